"""Task folders written for the original AgentKernelArena (schema v1 and v2), run unchanged.

A task folder in the original's format is read into our `TaskConfig` plus an `OriginalSpec`
(`task.original`) that keeps what our schema cannot say: edit scopes by symbol, the v2 runner and
its case manifest, platform rules, load warnings. Its steps run through the same sandboxed step
processes as ours, but their verdicts and numbers come from the original's result files (v1) or
its `ARENA_EVAL_RESULT=` line (v2), read by `aka.compat.steps`, with a recorded trust level
(docs/original-tasks.md). The original's perf helpers are materialized as our own code before
every step (`aka.compat.perf_helpers`), and time the pristine baseline interleaved with the
candidate where the task's structure allows (`aka.compat.pairing`).
"""
