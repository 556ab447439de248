"""What a task folder in the original's format says beyond our `TaskConfig` (`task.original`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from aka.compat.arena_protocol import CaseManifest
from aka.compat.platform import OriginalPlatform


class TaskFormat(str, Enum):
    """How a task folder's steps report: ours (the step report), or the original's v1 / v2."""

    AKA = "aka"
    ORIGINAL_V1 = "original-v1"
    ORIGINAL_V2 = "original-v2"


@dataclass(frozen=True)
class EditScope:
    """One editable file; with `symbols`, only those top-level definitions of it may change
    (and new helpers be added when `allow_new_helpers`), checked by `aka.compat.symbol_scope`."""

    path: str
    symbols: tuple[str, ...] = ()
    allow_new_helpers: bool = False


@dataclass(frozen=True)
class ArenaCommands:
    """Schema v2's `evaluation`: the argv of each (role, action) and its timeout."""

    runner: tuple[str, ...]
    overrides: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    timeouts: dict[tuple[str, str], float] = field(default_factory=dict)
    default_timeout: float = 3600.0

    def argvs(self, role: str, action: str) -> list[tuple[str, ...]]:
        """`commands` of the override, else `runner + [action]` (task) or `runner + [role, action]`."""
        if (role, action) in self.overrides:
            return list(self.overrides[(role, action)])
        return [(*self.runner, action) if role == "task" else (*self.runner, role, action)]

    def timeout(self, role: str, action: str) -> float:
        return self.timeouts.get((role, action), self.default_timeout)


@dataclass(frozen=True)
class ArenaSpec:
    """The v2 parts the evaluator needs: commands, the case manifest (from the workloads file of
    the pristine task; None when it lists no cases), and how the baseline is judged."""

    commands: ArenaCommands
    manifest: CaseManifest | None
    baseline_kind: str = "initial_candidate"
    diagnostic_baseline: bool = False


@dataclass(frozen=True)
class OriginalSpec:
    """`schema` 1 or 2; `skip_reason` is known at load time (an AMD-only language, a container
    image tree this machine lacks); `platform` is decided against the device (`aka.compat.platform`)."""

    schema: int
    scopes: tuple[EditScope, ...]
    platform: OriginalPlatform
    warnings: tuple[str, ...] = ()
    skip_reason: str | None = None
    arena: ArenaSpec | None = None
    pairing: bool = True  # the baseline is the pristine editable files: our helpers may time it interleaved

    @property
    def format(self) -> TaskFormat:
        return TaskFormat.ORIGINAL_V2 if self.schema == 2 else TaskFormat.ORIGINAL_V1

    def symbol_scopes(self) -> list[EditScope]:
        return [scope for scope in self.scopes if scope.symbols]
