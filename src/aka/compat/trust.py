"""How far a result of an original-format task can be trusted (`TaskResult.trust`).

Our own tasks' numbers come from a judge process that never runs candidate code (`trust` stays
unset). The original's tasks check and time the candidate inside the task's own process, so a
determined candidate can write whatever it likes into what that process reports; the levels
say what the numbers rest on (docs/original-tasks.md, docs/evaluation.md):

| level | verdicts and times from | baseline |
|---|---|---|
| `task-process-paired` | the task's result files, timed by our helpers | its pristine twin, interleaved, same process |
| `task-process` | the task's result files | frozen: the pristine task timed alone, earlier, in another process |
| `task-stdout-line` | geak's one `GEAK_RESULT_LATENCY_MS=` line | frozen |
| `arena-line-paired` | the v2 `ARENA_EVAL_RESULT=` line (cross-checked), timed by our helpers | interleaved, as above |
| `arena-line` | the v2 `ARENA_EVAL_RESULT=` line (cross-checked) | frozen |
"""

from __future__ import annotations

from enum import Enum


class Trust(str, Enum):
    TASK_PROCESS_PAIRED = "task-process-paired"
    TASK_PROCESS = "task-process"
    TASK_STDOUT_LINE = "task-stdout-line"
    ARENA_LINE_PAIRED = "arena-line-paired"
    ARENA_LINE = "arena-line"


def default_trust(schema: int) -> Trust:
    """Before anything is timed: what the task's verdicts rest on."""
    return Trust.ARENA_LINE if schema == 2 else Trust.TASK_PROCESS
