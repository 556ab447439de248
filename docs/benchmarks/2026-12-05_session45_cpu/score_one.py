"""Like /tmp/redteam/judge_one.py, but also measures the frozen baseline and computes the TaskResult and
the default score (what the RL reward 'score' preset returns)."""
import shutil, sys
from pathlib import Path
sys.path[:0] = ["/work/main/src", "/work/main/tests"]
from exploits.gelu_task import copy_gelu_task
from aka.device import DeviceInfo
from aka.evaluation.steps import evaluate_candidate
from aka.evaluation.baseline import measure_baseline
from aka.run.task_pipeline import judge_outcomes
from aka.results.task_result import AgentOutcome
from aka.results.scoring import default_score, finite_score

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
source, work = Path(sys.argv[1]), Path(sys.argv[2])
if work.exists():
    shutil.rmtree(work)
work.mkdir(parents=True)
task = copy_gelu_task(work / "tasks")
baseline = measure_baseline(work / "run", task, "id", CPU, work / "base")
candidate = work / "candidate"
shutil.copytree(task.directory, candidate)
(candidate / "kernel.py").write_text(source.read_text())
outcomes = evaluate_candidate(task, candidate, work / "scratch", CPU)
result = judge_outcomes(task, baseline, CPU, default_score, "default", AgentOutcome(agent="rl"), outcomes, [])
print("failure_kind:", result.failure_kind, "| pass_correctness:", result.pass_correctness)
print("cases:", [(c.id, c.speedup) for c in result.cases])
print("valid baseline/optimized cases:", result.valid_baseline_cases, result.valid_optimized_cases)
print("speedup_ratio:", result.speedup_ratio, "| SCORE:", finite_score(default_score, result))
