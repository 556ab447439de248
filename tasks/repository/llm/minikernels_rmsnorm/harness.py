"""Evaluation steps of the repository RMSNorm task: `python3 harness.py compile|correctness|performance`.

The evaluation directory holds this task folder and the repository cloned at the pinned commit
under `minikernels/`; the candidate is that clone's `minikernels/rmsnorm.py`.
"""

from collections.abc import Callable
from pathlib import Path

import torch

from aka.harness import Case, KernelTask, import_candidate, random_tensor, run_task

PACKAGE = Path("minikernels") / "minikernels"
EPS = 1e-6
SHAPES = ((4096, 4096, "float16"), (4096, 4096, "bfloat16"), (8192, 5120, "float16"),
          (8192, 5120, "bfloat16"), (2048, 8191, "float32"), (16384, 2048, "bfloat16"))


def load_candidate(directory: Path) -> Callable[..., torch.Tensor]:
    """`rmsnorm` from the clone's package in `directory`; post_clone_install must have run."""
    if not (Path.cwd() / PACKAGE / "_build_info.py").is_file():
        raise RuntimeError("minikernels/_build_info.py is missing: post_clone_install did not run")
    rmsnorm = import_candidate("rmsnorm", directory / PACKAGE).rmsnorm

    def call(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return rmsnorm(x, weight, EPS)

    return call


def make_inputs(case: Case, generator: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    rows, hidden, dtype = case.int_param("rows"), case.int_param("hidden"), case.dtype()
    return (random_tensor((rows, hidden), dtype, generator, device),
            random_tensor((hidden,), dtype, generator, device, scale=0.5))


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()).to(x.dtype)


# The defaults fit: one float32 reduction per row and one rounding to the output dtype.
TASK = KernelTask(
    name="repository/llm/minikernels_rmsnorm",
    cases=[Case.make(rows=r, hidden=h, dtype=d) for r, h, d in SHAPES],
    ci_cases=[Case.make(rows=4, hidden=300, dtype="float32"), Case.make(rows=3, hidden=257, dtype="float16")],
    make_inputs=make_inputs,
    reference=reference,
    load_candidate=load_candidate,
    min_bytes=lambda case: 2 * case.int_param("rows") * case.int_param("hidden") * case.dtype().itemsize,
)

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
