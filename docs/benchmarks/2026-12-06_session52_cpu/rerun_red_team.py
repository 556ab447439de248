import glob, os, sys, time
import aka
TASKS = {"gelu": "triton2triton/basic/gelu", "softmax": "triton2triton/llm/softmax", "rmsnorm": "triton2triton/llm/rmsnorm_residual",
         "layernorm": "torch2triton/llm/layernorm", "moe": "instruction2triton/llm/moe_router_topk_softmax",
         "moe_align": "instruction2triton/llm/moe_align_block_size"}
files = sorted(f for f in glob.glob("/tmp/redteamA/*/*.py"))
with aka.KernelEvaluator("/work/main/tasks", cache_dir="/tmp/rerunA/cache") as ev:
    for f in files:
        folder = os.path.basename(os.path.dirname(f))
        task = TASKS[folder]
        t = time.time()
        r = ev.evaluate(task, {"kernel.py": open(f).read()})
        msg = (r.failure_message or "")[:160].replace("\n", " ")
        print(f"| {folder}/{os.path.basename(f)} | {task} | {r.failure_kind.value} | {r.speedup if r.speedup is None else round(r.speedup, 2)} | {msg} |", flush=True)
