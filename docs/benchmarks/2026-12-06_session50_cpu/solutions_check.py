import aka, pathlib
root = pathlib.Path("/work/main/solutions/examples")
with aka.KernelEvaluator("/work/main/tasks", cache_dir="/tmp/suite-check-cache") as ev:
    for kernel in sorted(root.glob("*/*/*/kernel.py")):
        task = str(kernel.parent.relative_to(root))
        if "cuda" in task:
            continue
        r = ev.evaluate(task, {"kernel.py": kernel.read_text()})
        print(task, r.status.value, r.failure_kind.value, (r.failure_message or "")[:200], flush=True)
