"""The `llm` agent's tools: file access confined to the workspace, and the platform's own evaluation.

Paths are relative to the workspace; absolute paths, `..` and symlinks that resolve outside it are
refused. Only the task's editable files can be written, and never through a symlink. Every refusal
is a tool error the model reads, never an exception. `run_evaluation` judges a copy of the editable
files with `aka.evaluation.steps.evaluate_candidate` in a scratch folder next to the agent log.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from aka.agents.autotune.tuner import capped_task
from aka.agents.llm.protocols import JsonObject, ToolCall, ToolOutput, ToolSpec
from aka.agents.registry import AgentContext
from aka.evaluation.speedup import apply_timings
from aka.evaluation.step_spec import Step
from aka.evaluation.steps import StepOutcome, evaluate_candidate
from aka.results.task_result import TaskResult
from aka.trees import remove_tree

SCRATCH_NAME = "llm_evaluations"
READ_LIMIT_CHARS = 100_000
WRITE_LIMIT_CHARS = 1_000_000
LIST_LIMIT = 300
STEP_MESSAGE_CHARS = 2000
SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".pytest_cache", ".mypy_cache"})


class ToolError(Exception):
    """A refused or failed tool call; its text goes back to the model."""


def _path(description: str) -> JsonObject:
    return {"type": "string", "description": description}


def _schema(required: dict[str, JsonObject], optional: dict[str, JsonObject] | None = None) -> JsonObject:
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": list(required),
        "additionalProperties": False,
    }


REL = "path relative to the workspace root, e.g. kernel.py"
TOOL_SPECS = (
    ToolSpec(
        "list_files",
        "List the files in the workspace (or in one folder of it), with sizes; editable files are marked.",
        _schema({}, {"path": _path("folder relative to the workspace root")}),
    ),
    ToolSpec("read_file", "Read a text file of the workspace.", _schema({"path": _path(REL)})),
    ToolSpec(
        "write_file",
        "Replace the whole content of one of the task's editable files.",
        _schema({"path": _path(REL), "content": {"type": "string", "description": "the new content"}}),
    ),
    ToolSpec(
        "edit_file",
        "Replace one exact occurrence of old_string with new_string in an editable file; "
        "old_string must occur exactly once.",
        _schema({"path": _path(REL), "old_string": {"type": "string"}, "new_string": {"type": "string"}}),
    ),
    ToolSpec(
        "run_evaluation",
        "Compile, check correctness and time the current editable files with the "
        "platform's own evaluation (the same as the final one); returns pass/fail per step and the "
        "speedup per test case.",
        _schema({}),
    ),
    ToolSpec(
        "finish",
        "End the session. The editable files as they are now are evaluated.",
        _schema({"summary": {"type": "string", "description": "what you changed and why"}}),
    ),
)


def _argument(arguments: JsonObject, name: str, required: bool = True) -> str:
    value = arguments.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ToolError(f"argument '{name}' (a string) is required")
    return value


def _tail(text: str | None) -> str:
    text = (text or "").strip()
    return text if len(text) <= STEP_MESSAGE_CHARS else "..." + text[-STEP_MESSAGE_CHARS:]


class Workspace:
    """The agent's task folder, seen through the confinement rules."""

    def __init__(self, root: Path, editable: tuple[str, ...]) -> None:
        self.root = root
        self.real_root = root.resolve()
        self.editable = tuple(PurePosixPath(e).as_posix() for e in editable)

    def relative(self, path: str) -> PurePosixPath:
        pure = PurePosixPath(path)
        if pure.is_absolute() or path.startswith("~"):
            raise ToolError(f"'{path}': absolute paths are refused; give a path relative to the workspace root")
        if ".." in pure.parts:
            raise ToolError(f"'{path}': '..' is refused; every file you may touch is inside the workspace")
        return PurePosixPath(*[p for p in pure.parts if p != "."]) if pure.parts else PurePosixPath(".")

    def inside(self, path: str) -> tuple[PurePosixPath, Path]:
        rel = self.relative(path)
        target = self.root / rel
        try:
            resolved = target.resolve()
        except (OSError, RuntimeError) as exc:
            raise ToolError(f"'{path}' cannot be resolved: {exc}") from exc
        if not resolved.is_relative_to(self.real_root):
            raise ToolError(f"'{path}' resolves outside the workspace (through a symlink); refused")
        return rel, target

    def list_files(self, path: str) -> str:
        _, folder = self.inside(path or ".")
        if not folder.is_dir():
            raise ToolError(f"'{path}' is not a folder of the workspace")
        lines: list[str] = []
        for current, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            for name in sorted(files):
                file = Path(current) / name
                rel = file.relative_to(self.root).as_posix()
                size = "symlink" if file.is_symlink() else f"{file.stat().st_size} bytes"
                lines.append(f"{rel} ({size}){'  [editable]' if rel in self.editable else ''}")
        shown = lines[:LIST_LIMIT]
        more = [f"... and {len(lines) - LIST_LIMIT} more"] if len(lines) > LIST_LIMIT else []
        return "\n".join(shown + more) or "(no files)"

    def read_file(self, path: str) -> str:
        _, target = self.inside(path)
        if not target.is_file():
            raise ToolError(f"'{path}' is not a file of the workspace")
        text = target.read_bytes().decode("utf-8", errors="replace")
        if len(text) > READ_LIMIT_CHARS:
            return text[:READ_LIMIT_CHARS] + f"\n... [truncated: {len(text)} characters in all]"
        return text

    def writable(self, path: str) -> Path:
        rel, target = self.inside(path)
        if rel.as_posix() not in self.editable:
            raise ToolError(
                f"'{path}' is not an editable file; only these are evaluated and may be written: "
                f"{', '.join(self.editable)}"
            )
        if target.is_symlink() or target.resolve() != self.real_root / rel or target.is_dir():
            raise ToolError(f"'{path}' is a symlink or folder; refused")
        return target

    def write_file(self, path: str, content: str) -> str:
        target = self.writable(path)
        if len(content) > WRITE_LIMIT_CHARS:
            raise ToolError(f"content of {len(content)} characters is over the limit of {WRITE_LIMIT_CHARS}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode("utf-8"))
        return f"wrote {path} ({len(content)} characters)"

    def edit_file(self, path: str, old: str, new: str) -> str:
        target = self.writable(path)
        if not target.is_file():
            raise ToolError(f"'{path}' does not exist; create it with write_file")
        text = target.read_bytes().decode("utf-8", errors="replace")
        count = text.count(old) if old else 0
        if count != 1:
            found = "is empty" if not old else f"occurs {count} times"
            raise ToolError(f"old_string {found} in {path}; it must occur exactly once (include more context)")
        target.write_bytes(text.replace(old, new, 1).encode("utf-8"))
        return f"edited {path}"


@dataclass
class Toolbox:
    """Runs the model's tool calls; `run_evaluation` is capped at the agent's remaining time."""

    ctx: AgentContext
    workspace: Workspace
    deadline: float | None
    evaluations: int = 0
    last_evaluation: str | None = None

    def call(self, call: ToolCall, evaluate: bool = True) -> ToolOutput:
        if call.arguments is None:
            return ToolOutput(f"error: the arguments are not a JSON object: {call.raw_arguments[:200]}", True)
        args, ws = call.arguments, self.workspace
        try:
            if call.name == "list_files":
                return ToolOutput(ws.list_files(_argument(args, "path", required=False)))
            if call.name == "read_file":
                return ToolOutput(ws.read_file(_argument(args, "path")))
            if call.name == "write_file":
                return ToolOutput(ws.write_file(_argument(args, "path"), _argument(args, "content")))
            if call.name == "edit_file":
                return ToolOutput(
                    ws.edit_file(_argument(args, "path"), _argument(args, "old_string"), _argument(args, "new_string"))
                )
            if call.name == "run_evaluation":
                if not evaluate:
                    return ToolOutput("not run: the session's budget is used up", True)
                return ToolOutput(self.run_evaluation())
            if call.name == "finish":
                return ToolOutput(_argument(args, "summary", required=False) or "finished")
        except ToolError as exc:
            return ToolOutput(f"error: {exc}", True)
        except OSError as exc:
            return ToolOutput(f"error: {type(exc).__name__}: {exc}", True)
        names = ", ".join(spec.name for spec in TOOL_SPECS)
        return ToolOutput(f"error: unknown tool '{call.name}'; the tools are: {names}", True)

    def run_evaluation(self) -> str:
        self.evaluations += 1
        folder = self.ctx.log_path.parent / SCRATCH_NAME / f"{self.evaluations:03d}"
        candidate = folder / "candidate"
        remove_tree(folder)
        for rel in self.ctx.task.config.source_file_path:
            source = self.workspace.root / rel
            if source.is_file():
                (candidate / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, candidate / rel)
        candidate.mkdir(parents=True, exist_ok=True)
        remaining = None if self.deadline is None else self.deadline - time.monotonic()
        outcomes = evaluate_candidate(capped_task(self.ctx.task, remaining), candidate, folder, self.ctx.device)
        for leftover in ("evaluation", ".reports"):
            remove_tree(folder / leftover)
        report = self.describe(outcomes)
        self.last_evaluation = report.splitlines()[-1] if report else None
        return report

    def describe(self, outcomes: list[StepOutcome]) -> str:
        lines = []
        for outcome in outcomes:
            if outcome.passed:
                lines.append(f"{outcome.step.value}: pass")
            elif outcome.skipped:
                lines.append(f"{outcome.step.value}: skipped on this machine: {_tail(outcome.message)}")
            else:
                lines.append(f"{outcome.step.value}: FAIL ({outcome.failure.value}): {_tail(outcome.message)}")
        last = outcomes[-1]
        if not last.passed:
            return "\n".join(lines + ([] if last.skipped else ["later steps were not run"]))
        if last.step is not Step.PERFORMANCE:
            return "\n".join(lines + ["the task has no performance step; correctness is all that is judged"])
        return "\n".join(lines + self._speedups(last))

    def _speedups(self, performance: StepOutcome) -> list[str]:
        judged = TaskResult(task_name=self.ctx.task_name, task_type=self.ctx.task.family)
        apply_timings(judged, self.ctx.baseline, performance.cases)
        if judged.speedup_ratio is None:
            return [f"speedup: not available ({judged.speedup_calculation_error_message})"]
        cases = [
            f"{c.id}: {c.speedup:.3f}x ({c.base_ms:.4f} ms -> {c.optimized_ms:.4f} ms)"
            for c in judged.cases
            if c.speedup is not None and c.base_ms and c.optimized_ms
        ]
        return cases + [
            f"mean speedup {judged.speedup_ratio:.3f}x over {len(cases)} case(s) "
            "(baseline time / your time; higher is better)"
        ]
