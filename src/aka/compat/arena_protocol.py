"""Schema v2's result line, `ARENA_EVAL_RESULT=<json>`, parsed and cross-checked.

The original's v2 actions (`validate-task`, `baseline|candidate compile|correctness|performance`)
print exactly one such line and exit 0 exactly when it says PASS. The line is printed by a
process that runs candidate code, so everything in it is checked as the original does
(`task_protocol.parse_command_result`): one line, a JSON object without duplicate keys or
non-finite numbers, the protocol, role and action of the invocation, statuses, a reason for
FAIL, positive finite times with a device timing method; and the cases must be exactly those of
the task's case manifest for the action, with the same shape, dtype and params. What the line
says is still only as trustworthy as that process (a `trust` level in the result).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

PROTOCOL = "arena-eval-v1"
RESULT_PREFIX = "ARENA_EVAL_RESULT="
RESULT_KEYS = frozenset({"protocol", "role", "action", "status", "cases", "reason", "failure_kind", "metadata"})
DEVICE_METHODS = frozenset({"cuda_graph", "cuda_event_fallback"})
CPU_METHOD = "cpu_timer_fallback"  # ours: accepted only when the evaluation runs on the CPU
CHECKS = ("correctness", "performance")


class ArenaProtocolError(ValueError):
    """The line is missing, duplicated, malformed or does not match the invocation or manifest."""


@dataclass(frozen=True)
class ArenaCase:
    test_case_id: str
    status: str
    raw: dict[str, Any]

    @property
    def identity(self) -> str:
        return case_identity(self.raw)

    @property
    def checks(self) -> tuple[str, ...]:
        return tuple(self.raw.get("checks") or ())


@dataclass(frozen=True)
class ArenaResult:
    role: str
    action: str
    status: str
    cases: tuple[ArenaCase, ...] = ()
    reason: str | None = None
    failure_kind: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "PASS"


def case_identity(case: dict[str, Any]) -> str:
    """What makes two cases the same workload: their shape, dtype and params."""
    return json.dumps([case.get("shape"), case.get("dtype"), case.get("params")], sort_keys=True)


def _pairs_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        duplicated = next(k for k in keys if keys.count(k) > 1)
        raise ArenaProtocolError(f"duplicate key '{duplicated}'")
    return dict(pairs)


def _no_constant(name: str) -> None:
    raise ArenaProtocolError(f"{name} is not a finite number")


def _finite(value: object, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ArenaProtocolError(f"{where} is not a finite number")
    if isinstance(value, dict):
        for key, item in value.items():
            _finite(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _finite(item, f"{where}[{index}]")


def result_lines(lines: Iterable[str]) -> list[str]:
    """The lines of a command's output that carry a result."""
    return [line.rstrip("\r\n") for line in lines if line.startswith(RESULT_PREFIX)]


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ArenaProtocolError(f"{where} is not an object")
    return value


def _case(raw: object, index: int, action: str, result_status: str, methods: frozenset[str]) -> ArenaCase:
    case = _object(raw, f"cases[{index}]")
    case_id, status = case.get("test_case_id"), case.get("status")
    if not isinstance(case_id, str) or not case_id:
        raise ArenaProtocolError(f"cases[{index}].test_case_id is not a nonempty string")
    if status not in ("PASS", "FAIL"):
        raise ArenaProtocolError(f"case {case_id}: status is not PASS or FAIL")
    if result_status == "PASS" and status == "FAIL":
        raise ArenaProtocolError(f"case {case_id} failed in a PASS result")
    if "params" in case:
        _object(case["params"], f"case {case_id}: params")
    if "dtype" in case and not isinstance(case["dtype"], str):
        raise ArenaProtocolError(f"case {case_id}: dtype is not a string")
    for key in ("metrics", "metadata"):
        if key in case:
            _object(case[key], f"case {case_id}: {key}")
    if action == "validate-task":
        checks = case.get("checks")
        if (
            not isinstance(checks, list)
            or not checks
            or len(set(checks)) != len(checks)
            or any(c not in CHECKS for c in checks)
            or ("performance" in checks and "correctness" not in checks)
        ):
            raise ArenaProtocolError(
                f"case {case_id}: checks must be a nonempty subset of correctness, performance "
                "(performance needs correctness)"
            )
    if action == "performance" and status == "PASS":
        ms, method = case.get("execution_time_ms"), case.get("benchmark_method")
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms <= 0:
            raise ArenaProtocolError(f"case {case_id}: execution_time_ms is not a positive finite number")
        if method not in methods:
            raise ArenaProtocolError(
                f"case {case_id}: benchmark_method '{method}' is not one of {', '.join(sorted(methods))}"
            )
    return ArenaCase(case_id, str(status), case)


def parse_command_result(
    lines: list[str], *, role: str, action: str, returncode: int | None, cpu: bool = False
) -> ArenaResult:
    """The one result line of an invocation, checked against it; `ArenaProtocolError` otherwise.
    `cpu`: the evaluation runs on the CPU, where the CPU timer is the only method there is."""
    found = result_lines(lines)
    if not found:
        raise ArenaProtocolError(f"no {RESULT_PREFIX} line was printed")
    if len(found) > 1:
        raise ArenaProtocolError(f"{len(found)} {RESULT_PREFIX} lines were printed; exactly one is allowed")
    if returncode is None or returncode < 0:
        raise ArenaProtocolError("the command was killed by a signal")
    try:
        data = json.loads(
            found[0][len(RESULT_PREFIX) :], object_pairs_hook=_pairs_without_duplicates, parse_constant=_no_constant
        )
    except json.JSONDecodeError as exc:
        raise ArenaProtocolError(f"not valid JSON: {exc.msg}") from None
    result = _object(data, "the result")
    _finite(result, "the result")
    unknown = sorted(set(result) - RESULT_KEYS)
    if unknown:
        raise ArenaProtocolError(f"unknown key '{unknown[0]}'")
    if result.get("protocol") != PROTOCOL:
        raise ArenaProtocolError(f"protocol is '{result.get('protocol')}', not '{PROTOCOL}'")
    if result.get("role") != role or result.get("action") != action:
        raise ArenaProtocolError(
            f"says role/action {result.get('role')}/{result.get('action')}, the invocation was {role}/{action}"
        )
    status = result.get("status")
    if status not in ("PASS", "FAIL"):
        raise ArenaProtocolError("status is not PASS or FAIL")
    if (returncode == 0) != (status == "PASS"):
        raise ArenaProtocolError(f"status {status} with exit status {returncode}")
    reason, kind = result.get("reason"), result.get("failure_kind")
    if status == "FAIL" and (not isinstance(reason, str) or not reason.strip()):
        raise ArenaProtocolError("a FAIL result needs a nonempty reason")
    if status == "PASS" and kind is not None:
        raise ArenaProtocolError("a PASS result carries a failure_kind")
    metadata = _object(result.get("metadata", {}), "metadata")
    raw_cases = result.get("cases", [])
    if not isinstance(raw_cases, list):
        raise ArenaProtocolError("cases is not a list")
    if status == "PASS" and action != "compile" and not raw_cases:
        raise ArenaProtocolError(f"a PASS {action} result has no cases")
    methods = DEVICE_METHODS | ({CPU_METHOD} if cpu else frozenset())
    cases = tuple(_case(raw, i, action, str(status), methods) for i, raw in enumerate(raw_cases))
    ids = [c.test_case_id for c in cases]
    if len(set(ids)) != len(ids):
        raise ArenaProtocolError("duplicate test_case_id")
    if (
        action == "validate-task"
        and status == "PASS"
        and metadata.get("candidate_state") not in ("implemented", "unimplemented")
    ):
        raise ArenaProtocolError("validate-task must report metadata.candidate_state implemented or unimplemented")
    return ArenaResult(
        role,
        action,
        str(status),
        cases,
        reason if isinstance(reason, str) else None,
        kind if isinstance(kind, str) else None,
        metadata,
    )


def merge_results(results: list[ArenaResult]) -> ArenaResult:
    """An action of several commands: their cases together (no id twice); FAIL if any failed."""
    first = results[0]
    cases = [case for result in results for case in result.cases]
    if len({c.test_case_id for c in cases}) != len(cases):
        raise ArenaProtocolError("two commands of one action reported the same test_case_id")
    failed = [r for r in results if not r.passed]
    return ArenaResult(
        first.role,
        first.action,
        "FAIL" if failed else "PASS",
        tuple(cases),
        "; ".join(r.reason or "" for r in failed) or None,
        failed[0].failure_kind if failed else None,
        {k: v for r in results for k, v in r.metadata.items()},
    )


@dataclass(frozen=True)
class ManifestCase:
    test_case_id: str
    identity: str
    checks: tuple[str, ...]


@dataclass(frozen=True)
class CaseManifest:
    """The cases a task declares (its workloads file, or a validate-task PASS) and what each checks."""

    cases: tuple[ManifestCase, ...]

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]], where: str) -> CaseManifest:
        cases = []
        for index, row in enumerate(rows):
            case_id, checks = row.get("test_case_id"), row.get("checks")
            if not isinstance(case_id, str) or not case_id or not isinstance(checks, list) or not checks:
                raise ArenaProtocolError(f"{where}: case {index} needs a test_case_id and a list of checks")
            cases.append(ManifestCase(case_id, case_identity(row), tuple(str(c) for c in checks)))
        if len({c.test_case_id for c in cases}) != len(cases):
            raise ArenaProtocolError(f"{where}: duplicate test_case_id")
        if not any("performance" in c.checks for c in cases):
            raise ArenaProtocolError(f"{where}: no case is checked for performance")
        return cls(tuple(cases))

    def for_action(self, action: str) -> dict[str, ManifestCase]:
        return {c.test_case_id: c for c in self.cases if action == "validate-task" or action in c.checks}

    def validate(self, result: ArenaResult) -> None:
        """The result's cases are the manifest's for its action (compile: any of them), each the
        same workload; validate-task also declares the same checks."""
        expected = self.for_action(result.action)
        reported = {c.test_case_id: c for c in result.cases}
        if result.action == "compile":
            extra = sorted(set(reported) - set(self.for_action("validate-task")))
            if extra:
                raise ArenaProtocolError(f"case {extra[0]} is not in the task's case manifest")
            expected = {k: v for k, v in self.for_action("validate-task").items() if k in reported}
        elif set(reported) != set(expected):
            missing, extra = sorted(set(expected) - set(reported)), sorted(set(reported) - set(expected))
            what = f"case {missing[0]} is missing" if missing else f"case {extra[0]} is not in the manifest"
            raise ArenaProtocolError(f"{what} for action {result.action} (the task's case manifest decides)")
        for case_id, case in reported.items():
            if case.identity != expected[case_id].identity:
                raise ArenaProtocolError(f"case {case_id}: shape, dtype or params differ from the task's case manifest")
            if result.action == "validate-task" and case.checks != expected[case_id].checks:
                raise ArenaProtocolError(f"case {case_id}: checks differ from the task's case manifest")
