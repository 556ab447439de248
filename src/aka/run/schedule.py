"""The order in which a run visits tasks x arms x repeats: randomized, balanced and interleaved.

The run goes in rounds, one per repeat. Each round visits every task once, in a fresh random
order, and runs all the arms of a task back to back, so slow drift of the machine (clocks,
temperature, other tenants, time of day) reaches every arm alike. The arms' order within a task
is a fixed random permutation rotated by one position per round from a random start per task:
with K a multiple of the arm count, every arm runs first, second, ... equally often on every task.
The seed is recorded in the run manifest and the whole order in `schedule.json`, so a resumed run
follows the same order and the order can be audited.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Trial:
    """One task attempt of one arm in one repeat; `arm` is None in a single-arm run."""

    task: str
    arm: str | None
    repeat: int

    def workspace_label(self, repeats: int) -> str | None:
        """What a trial's workspace name carries after the task slug (None: the seed's plain name)."""
        if self.arm is not None:
            return f"{self.arm}__r{self.repeat}"
        return f"r{self.repeat}" if repeats > 1 else None


def interleaved_schedule(tasks: list[str], arms: list[str | None], repeats: int, seed: int) -> list[Trial]:
    rng = random.Random(seed)
    base = list(arms)
    rng.shuffle(base)
    start = {task: rng.randrange(len(base)) for task in tasks}
    trials = []
    for repeat in range(1, repeats + 1):
        order = list(tasks)
        rng.shuffle(order)
        for task in order:
            shift = (start[task] + repeat - 1) % len(base)
            trials += [Trial(task, arm, repeat) for arm in base[shift:] + base[:shift]]
    return trials
