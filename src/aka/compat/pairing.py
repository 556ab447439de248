"""The pristine baseline's twin of a timed function, so the original's tasks time both interleaved.

The original's tasks time a closure: vllm's `_bench_fn` calls `mod.<op>(...)` where `mod` is the
editable source loaded by the runner; rocmbench's `op_lambda` calls the kernel through the globals
of its own (editable) test file. The evaluation directory holds the pristine editable files in
`.aka_baseline/`, so the same closure can be rebuilt with every editable module it reaches
replaced by its pristine copy: the same inputs, outputs and launch code, the baseline's kernels.
Our perf helpers (`aka.compat.bench`) then time that twin and the candidate in alternation, as
our own tasks' judge does, instead of against a baseline timed earlier in another process.

Only what the timed function reaches directly is replaced (its globals, its closure's modules,
functions, partials and Triton JIT functions, a few levels deep); code that reaches an editable
module through another module is not seen, and when nothing is replaced there is no twin (the
step times the candidate alone and the frozen baseline is used). Everything here runs in the
task's process, next to the candidate: the pairing is a precision measure, not a defence.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aka.evaluation.wire import BASELINE_SOURCES_DIR, ENV_BASELINE_DIR, ENV_TARGET

ENV_PAIRING = "AKA_COMPAT_PAIRING"  # set by the evaluator where the baseline is the pristine editable files
MAX_DEPTH = 4


@dataclass(frozen=True)
class Twin:
    fn: Callable[[], Any]
    files: tuple[str, ...]  # the editable files whose pristine copies the twin runs


def pairing_requested() -> bool:
    """The evaluator asked for it: a candidate's performance step of a task whose baseline is
    the pristine editable files."""
    return (
        os.environ.get(ENV_PAIRING) == "1"
        and os.environ.get(ENV_TARGET) == "candidate"
        and bool(os.environ.get(ENV_BASELINE_DIR))
    )


class _Rebinder:
    """Rebuilds a function over fresh loads of the editable files it reaches: from `load_dir`
    (the pristine copies by default), as modules named `prefix` + the file's path."""

    def __init__(self, baseline_dir: Path, load_dir: Path | None = None, prefix: str = "aka_baseline_") -> None:
        self.baseline_dir = baseline_dir.resolve()
        self.eval_dir = self.baseline_dir.parent
        self.load_dir = (load_dir or self.baseline_dir).resolve()
        self.prefix = prefix
        self.pristine: dict[str, types.ModuleType] = {}
        self.used: set[str] = set()

    def editable(self, file: object) -> str | None:
        """The editable file `file` is (relative to the evaluation directory), or None."""
        if not isinstance(file, str) or not file:
            return None
        try:
            rel = Path(file).resolve().relative_to(self.eval_dir)
        except (ValueError, OSError):
            return None
        if not rel.parts or rel.parts[0] == BASELINE_SOURCES_DIR or not (self.baseline_dir / rel).is_file():
            return None
        return rel.as_posix()

    def pristine_module(self, rel: str) -> types.ModuleType:
        if rel not in self.pristine:
            unique = self.prefix + "".join(c if c.isalnum() else "_" for c in rel)
            spec = importlib.util.spec_from_file_location(unique, self.load_dir / rel)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {self.load_dir / rel}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[unique] = module
            spec.loader.exec_module(module)
            self.pristine[rel] = module
        self.used.add(rel)
        return self.pristine[rel]

    def rebind(self, obj: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            return obj
        if isinstance(obj, types.ModuleType):
            rel = self.editable(getattr(obj, "__file__", None))
            return self.pristine_module(rel) if rel else obj
        if isinstance(obj, types.FunctionType):
            return self.function(obj, depth)
        if isinstance(obj, functools.partial):
            func = self.rebind(obj.func, depth + 1)
            args = tuple(self.rebind(a, depth + 1) for a in obj.args)
            keywords = {k: self.rebind(v, depth + 1) for k, v in obj.keywords.items()}
            same = (
                func is obj.func
                and all(a is b for a, b in zip(args, obj.args, strict=True))
                and all(keywords[k] is v for k, v in obj.keywords.items())
            )
            return obj if same else functools.partial(func, *args, **keywords)
        inner = getattr(obj, "fn", None)  # a Triton JITFunction (or an autotuner around one)
        if isinstance(inner, types.FunctionType) and depth > 0:
            rel = self.editable(inner.__globals__.get("__file__"))
            if rel is not None:
                twin = getattr(self.pristine_module(rel), inner.__name__, None)
                return twin if twin is not None else obj
        return obj

    def function(self, fn: types.FunctionType, depth: int) -> Any:
        rel = self.editable(fn.__globals__.get("__file__"))
        if rel is not None and depth > 0 and fn.__qualname__ == fn.__name__:
            twin = getattr(self.pristine_module(rel), fn.__name__, None)
            if callable(twin):
                return twin
        new_globals = self.pristine_module(rel).__dict__ if rel is not None else fn.__globals__
        cells = fn.__closure__ or ()
        contents = []
        for cell in cells:
            try:
                contents.append(cell.cell_contents)
            except ValueError:  # an empty cell (a name assigned later)
                contents.append(cell)
        rebound = [c if isinstance(c, types.CellType) else self.rebind(c, depth + 1) for c in contents]
        if new_globals is fn.__globals__ and all(a is b for a, b in zip(rebound, contents, strict=True)):
            return fn
        new_cells = tuple(c if isinstance(c, types.CellType) else types.CellType(c) for c in rebound)
        twin = types.FunctionType(fn.__code__, new_globals, fn.__name__, fn.__defaults__, new_cells or None)
        twin.__kwdefaults__ = fn.__kwdefaults__
        return twin


def baseline_twin(fn: Callable[[], Any]) -> tuple[Twin | None, str]:
    """The twin of `fn` running the pristine editable files, or None and why there is none."""
    baseline_dir = os.environ.get(ENV_BASELINE_DIR, "")
    if not baseline_dir or not Path(baseline_dir).is_dir():
        return None, "no pristine sources in this evaluation directory"
    rebinder = _Rebinder(Path(baseline_dir))
    try:
        twin = rebinder.rebind(fn, 0)
    except Exception as exc:  # the pristine module failed to load: time the candidate alone
        return None, f"the pristine sources did not load: {type(exc).__name__}: {str(exc)[:160]}"
    if twin is fn or not rebinder.used:
        return None, "the timed function reaches no editable source directly"
    return Twin(twin, tuple(sorted(rebinder.used))), "paired"


def placement_copies(
    fn: Callable[[], Any], twin: Twin, count: int
) -> tuple[list[Callable[[], Any]], list[Callable[[], Any]]]:
    """`count` separate loads of each side, called in turn: `fn` and copies of it over fresh loads
    of the candidate's editable files, the twin and more twins. A kernel's time depends a little on
    where its code and buffers lie (separately loaded copies of one kernel differ by up to 1% on
    the H200, more for microsecond kernels); one load per side would make that a fixed offset.
    Fewer copies where a load fails."""
    baseline_dir = Path(os.environ.get(ENV_BASELINE_DIR, ""))
    candidates, twins = [fn], [twin.fn]
    for serial in range(1, max(1, count)):
        try:
            candidate = _Rebinder(baseline_dir, baseline_dir.parent, f"aka_candidate{serial}_").rebind(fn, 0)
            baseline = _Rebinder(baseline_dir, prefix=f"aka_baseline{serial}_").rebind(fn, 0)
        except Exception:  # noqa: BLE001 - a copy that does not load: time with the loads there are
            break
        candidates.append(candidate)
        twins.append(baseline)
    return candidates, twins
