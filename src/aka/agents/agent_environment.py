"""The environment an agent's shell gets: the platform's interpreter and the evaluator's device variables.

The prompt tells an agent to run the task's step commands (`python3 harness.py correctness`), so
they must work in its shell as they do in the evaluator's steps: `python3` is the interpreter
running the platform (its folder first on PATH, whether or not its virtual environment was
activated), `aka.harness` is importable, and the device variables are the evaluator's
(`TRITON_INTERPRET=1` on a CPU machine, `AKA_DEVICE`, `AKA_CUDA_ARCH`, the case profile, the
baseline's pristine copies in the workspace's `.aka_baseline/`). The evaluator's own
`step_environment` makes it, so the two cannot drift; only the step's name is left out (the
command line names it), every variable of this process but the `AKA_` ones is kept (an agent's
CLI reads its own settings; a step sees only an allow-list), and the variable holding the agent's
key is kept too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from aka.config.tasks import Task
from aka.device import DeviceInfo
from aka.evaluation.step_spec import Step, Target, step_environment
from aka.evaluation.wire import ENV_STEP

CLUSTER_PREFIXES = ("RAY_", "SLURM_", "MUNGE_")
"""Variables that address or authenticate the machine's cluster services: never an agent's."""


def agent_environment(task: Task, device: DeviceInfo, workspace: Path, keep: Iterable[str] = ()) -> dict[str, str]:
    """This process's environment as the evaluator gives it to a step on `workspace`, plus the
    variables named in `keep` (an API key's) as they are here."""
    env = step_environment(task, device, Step.CORRECTNESS, Target.CANDIDATE, workspace, every_name=True)
    del env[ENV_STEP]
    for name in [name for name in env if name.startswith(CLUSTER_PREFIXES)]:
        del env[name]  # a red team's agent used the run's Ray cluster to run code outside its guard
    env.update({name: os.environ[name] for name in keep if name in os.environ})
    return env
