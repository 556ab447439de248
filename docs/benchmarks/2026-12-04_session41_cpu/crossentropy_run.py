import sys, time
from pathlib import Path
from aka import KernelEvaluator as Evaluator
ev = Evaluator("/tmp/kbx", "/tmp/kbx_run/cache", log_dir="/tmp/kbx_run/logs")
task = "torch2triton/kernelbench_level1/95_crossentropyloss"
for name, files in [("template_solution", {"kernel.py": Path("/tmp/kbx_run/ce_kernel.py").read_text()}),
                    ("zeros", {"kernel.py": Path("/tmp/kbx_run/ce_kernel.py").read_text().replace("        return out\n", "        return out.zero_()\n")})]:
    t = time.time()
    r = ev.evaluate(task, files)
    print(name, round(time.time() - t, 1), "s:", r.failure_kind, r.correct, r.speedup, (r.failure_message or "")[:300], flush=True)
