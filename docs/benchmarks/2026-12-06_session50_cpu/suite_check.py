import aka
import pathlib
root = pathlib.Path("/work/main/tasks")
ids = sorted(str(p.parent.relative_to(root)) for p in root.glob("*/*/*/config.yaml"))
with aka.KernelEvaluator(root, cache_dir="/tmp/suite-check-cache") as ev:
    for task in ids:
        try:
            r = ev.evaluate(task, {})
            print(task, r.status.value, r.failure_kind.value, (r.failure_message or "")[:200], flush=True)
        except Exception as exc:
            print(task, "ERROR", exc, flush=True)
