"""The original's perf helpers, put in place as our own code before every step.

The original's task folders ship stubs that raise until its framework fills them in:
`performance_utils_pytest.py` (rocmbench), a marked region of `scripts/task_runner.py` (vllm:
`# >>> AKA-GENERATED ...` to `# <<< AKA-GENERATED <<<`), and, in v2 adapters, an imported
`_aka_benchmark` module. Before every step command (and in the agent's copy, so its own runs
work) these become small modules importing `aka.compat.bench` / `aka.compat.pytest_bench`. They
count as harness: rewritten from the pristine task every time, never taken from the agent, and
an agent that changes them in its copy has tampered with the task. Editable files and the
pristine copies in `.aka_baseline/` are never touched.
"""

from __future__ import annotations

import re
from pathlib import Path

from aka.errors import AkaError
from aka.evaluation.wire import BASELINE_SOURCES_DIR

SRC_ROOT = Path(__file__).resolve().parents[2]
PYTEST_HELPER = "performance_utils_pytest.py"
AKA_BENCHMARK_HELPER = "_aka_benchmark.py"
MARK_START = "# >>> AKA-GENERATED"
MARK_END = "# <<< AKA-GENERATED <<<"
SKIPPED_PARTS = frozenset({BASELINE_SOURCES_DIR, "__pycache__", ".git", "build"})

_PATH_LINES = f"""import sys as _aka_sys
if {str(SRC_ROOT)!r} not in _aka_sys.path:
    _aka_sys.path.insert(0, {str(SRC_ROOT)!r})
"""
PYTEST_SHIM = f'''"""Written by AgentKernelArena (aka) before every step: the original's performance_utils_pytest."""
{_PATH_LINES}from aka.compat.pytest_bench import *  # noqa: E402,F403
from aka.compat.pytest_bench import _BENCHMARK_RESULTS, _compute_timing_stats  # noqa: E402,F401
'''
AKA_BENCHMARK_SHIM = f'''"""Written by AgentKernelArena (aka) before every step: the original's _aka_benchmark API."""
{_PATH_LINES}from aka.compat.bench import (  # noqa: E402,F401
    TimedRun, benchmark_cuda_event_samples, benchmark_cuda_graph_or_events, benchmark_cuda_graph_or_events_samples,
)
'''
VLLM_BLOCK = f"""# Written by AgentKernelArena (aka) before every step: the original's CUDA-graph benchmark helpers.
{_PATH_LINES}from aka.compat.bench import (  # noqa: E402,F401
    _benchmark_cuda_graph_or_events, _measure_cuda_event_fallback, _TimedRun,
)
from aka.compat.self_timed import install as _aka_pair_self_timed_calls  # noqa: E402
_aka_pair_self_timed_calls()  # only where the evaluator asks: a runner that times its calls itself
"""
IMPORTS_AKA_BENCHMARK = re.compile(r"^\s*(from\s+_aka_benchmark\s+import|import\s+_aka_benchmark)", re.MULTILINE)


class HelperError(AkaError):
    """A task's helper markers are broken: the task cannot be run (its fault, not the agent's)."""


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if not SKIPPED_PARTS & set(p.relative_to(root).parts))


def with_block(text: str, where: str) -> str | None:
    """`text` with its marked region replaced by our block; None when it has no markers."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(MARK_START)]
    ends = [i for i, line in enumerate(lines) if line.strip() == MARK_END]
    if not starts and not ends:
        return None
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise HelperError(f"{where}: invalid AKA-GENERATED helper markers (need one start line before one end line)")
    start, end = starts[0], ends[0]
    return "".join(lines[: start + 1]) + VLLM_BLOCK + "".join(lines[end:])


def helper_files(root: Path, editable: set[str]) -> dict[str, str]:
    """What each helper file under `root` (the pristine task, an evaluation directory, the
    agent's copy) must contain, by relative path; editable files are never helpers."""
    found: dict[str, str] = {}
    top = [p for p in root.glob("*.py") if p.name != PYTEST_HELPER]
    if (root / PYTEST_HELPER).is_file() or any(
        "performance_utils_pytest" in p.read_text(encoding="utf-8", errors="replace") for p in top
    ):
        found[PYTEST_HELPER] = PYTEST_SHIM
    for path in _python_files(root):
        rel = path.relative_to(root).as_posix()
        if rel in editable:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        block = with_block(text, str(path))
        if block is not None:
            found[rel] = block
        if IMPORTS_AKA_BENCHMARK.search(text):
            found[(path.parent / AKA_BENCHMARK_HELPER).relative_to(root).as_posix()] = AKA_BENCHMARK_SHIM
    return {rel: text for rel, text in found.items() if rel not in editable}


def materialize_helpers(root: Path, editable: set[str]) -> list[str]:
    """Write the helper files under `root`; the relative paths written."""
    files = helper_files(root, editable)
    for rel, text in files.items():
        target = root / rel
        if target.is_symlink():
            target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return sorted(files)
