"""The original's `platform_support` and what runs on this machine at all.

The original (main.py `should_run_task_for_platform`) runs a task unless `status` is `skip` or
its `required_arch` is not the current architecture; an unknown status or a `required_arch`
that is neither a string nor a list is a warning and the task runs. Schema v2 also allows a
list of alternatives. AMD architectures (`gfx*`, `rdna*`) never match an NVIDIA device or the
CPU, so those tasks are skipped with the reason. Languages that need an AMD toolchain (HIP,
FlyDSL) are skipped the same way (`language_skip_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass

AMD_ARCH_PREFIXES = ("gfx", "rdna", "cdna")
AMD_LANGUAGES = {"hip": "HIP", "flydsl": "FlyDSL", "tilelang": "TileLang on ROCm"}


@dataclass(frozen=True)
class OriginalPlatform:
    """`status` (active or skip), `required_arch` (alternatives; empty: any) and `skip_reason`."""

    status: str = "active"
    required_arch: tuple[str, ...] = ()
    skip_reason: str | None = None


def read_platform(raw: object, where: str) -> tuple[OriginalPlatform, list[str]]:
    """The platform rules of a task's `platform_support` and the warnings reading them gave."""
    if raw is None:
        return OriginalPlatform(), []
    if not isinstance(raw, dict):
        return OriginalPlatform(), [f"{where}: field 'platform_support' is not a mapping; ignored (the task runs)"]
    warnings = [
        f"{where}: field 'platform_support.{key}' is not used by aka; ignored"
        for key in raw
        if key not in ("status", "required_arch", "skip_reason")
    ]
    status = str(raw.get("status") or "active").strip().lower()
    if status not in ("active", "skip"):
        warnings.append(
            f"{where}: field 'platform_support.status': '{status}' is neither active nor skip; the task runs"
        )
        status = "active"
    required = raw.get("required_arch")
    arches: tuple[str, ...] = ()
    if isinstance(required, str) and required.strip():
        arches = (required.strip(),)
    elif isinstance(required, list) and all(isinstance(a, str) and a.strip() for a in required):
        arches = tuple(a.strip() for a in required)
    elif required:
        warnings.append(
            f"{where}: field 'platform_support.required_arch' is neither a string nor a list of "
            "strings; ignored (the task runs)"
        )
    reason = raw.get("skip_reason")
    return OriginalPlatform(status, arches, str(reason).strip() if reason else None), warnings


def is_amd_arch(arch: str) -> bool:
    return arch.lower().startswith(AMD_ARCH_PREFIXES)


def platform_skip_reason(platform: OriginalPlatform, arch: str | None) -> str | None:
    """Why the task does not run on a device of architecture `arch` (None: the CPU), or None."""
    if platform.status == "skip":
        return platform.skip_reason or "platform_support.status is skip"
    if not platform.required_arch or (arch is not None and arch in platform.required_arch):
        return None
    wanted = " or ".join(platform.required_arch)
    here = f"this device is {arch}" if arch else "this machine has no GPU"
    if all(is_amd_arch(a) for a in platform.required_arch):
        return f"requires {wanted} (an AMD GPU architecture); {here}"
    return f"requires {wanted}; {here}"


def language_skip_reason(language: str) -> str | None:
    """Why a task in `language` cannot run here: HIP and FlyDSL need an AMD GPU and toolchain."""
    name = AMD_LANGUAGES.get(language.lower())
    return f"{name} kernels need an AMD GPU and the ROCm toolchain" if name else None
