"""Task families as a registry: everything the platform decides by a task's `task_type`.

A family says which language its kernels are written in, what its baseline times by default
(the task's own source, or the PyTorch reference when the task starts from one), whether the
candidate may compute with torch operators, which `aka task new` scaffold it has, whether its
task gives no kernel at all (a skeleton that must fail cleanly), and whether KernelBench problems
can be imported into it. Adding a family is one `register_family(Family(...))` call, here or in
a module of its own. Standard library only: the step process (aka.harness) reads it too.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE, REFERENCE = "source", "reference"


@dataclass(frozen=True)
class Family:
    name: str
    language: str  # triton, cuda, hip, flydsl, python (e2e: any code), or repository
    baseline: str = SOURCE  # what the baseline times unless the task says otherwise
    torch_policy: bool = True  # the candidate must do the work in its kernels, not in torch operators
    scaffold: str | None = None  # the `aka task new` template: triton or cuda
    skeleton: bool = False  # the task gives no kernel: its untouched sources fail cleanly
    importable: bool = False  # `aka import kernelbench --family` writes tasks of this family


FAMILIES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    if family.name in FAMILIES:
        raise ValueError(f"a family named {family.name} is already registered")
    FAMILIES[family.name] = family
    return family


def family_named(name: str) -> Family | None:
    return FAMILIES.get(name)


for _family in (
    Family("triton2triton", "triton", scaffold="triton"),
    Family("instruction2triton", "triton", REFERENCE, scaffold="triton", skeleton=True),
    Family("torch2triton", "triton", REFERENCE, scaffold="triton", importable=True),
    Family("cuda2cuda", "cuda", scaffold="cuda"),
    Family("torch2cuda", "cuda", REFERENCE, scaffold="cuda", importable=True),
    Family("e2e", "python", torch_policy=False),
    Family("hip2hip", "hip"),
    Family("cuda2hip", "hip"),
    Family("torch2hip", "hip", REFERENCE),
    Family("triton2flydsl", "flydsl"),
    Family("torch2flydsl", "flydsl", REFERENCE),
    Family("flydsl2flydsl", "flydsl"),
    Family("image_kernel", "python", torch_policy=False),
    Family("repository", "repository", torch_policy=False),
):
    register_family(_family)
