"""User-facing errors: one line naming the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError


class AkaError(Exception):
    """An error the CLI prints as one line and exits 2 on, without a traceback."""


class ConfigError(AkaError):
    """A run or task configuration is invalid."""


class PreflightError(AkaError):
    """The machine does not match what the run asks for."""


def describe_validation_error(path: Path, exc: ValidationError, allowed: dict[str, str] | None = None) -> str:
    """Turn the first pydantic error into `FILE: field X: problem (fix)`."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(top level)"
    if first["type"] == "extra_forbidden":
        problem = "unknown field"
        fix = "remove it or check its spelling"
    elif first["type"] == "missing":
        problem = "required field is missing"
        fix = "add it"
    else:
        problem = first["msg"]
        fix = ""
    hint = (allowed or {}).get(field.split(".")[-1], fix)
    return f"{path}: field '{field}': {problem}" + (f" ({hint})" if hint else "")
