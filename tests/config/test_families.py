"""Task families as a registry (aka.config.families): the rules every module used to spell out, and a
family added by registering it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aka.authoring.kernelbench import FAMILIES as IMPORTABLE
from aka.authoring.task_tools import CUDA_FAMILIES, SKELETON_FAMILIES, TRITON_FAMILIES
from aka.config import families
from aka.config.families import FAMILIES, Family, register_family
from aka.config.task_config import BaselineSource, load_task_config
from aka.harness.task import policy_applies


def test_the_registry_keeps_the_rules_the_modules_had() -> None:
    reference = {name for name, f in FAMILIES.items() if f.baseline == families.REFERENCE}
    assert reference == {n for n in FAMILIES if n.startswith(("torch2", "instruction2"))}
    exempt = {name for name, f in FAMILIES.items() if not f.torch_policy}
    assert exempt == {"e2e", "repository", "image_kernel"}
    assert (TRITON_FAMILIES, CUDA_FAMILIES, SKELETON_FAMILIES) == (
        ("triton2triton", "instruction2triton", "torch2triton"),
        ("cuda2cuda", "torch2cuda"),
        ("instruction2triton",),
    )
    assert IMPORTABLE == ("torch2triton", "torch2cuda")
    assert policy_applies("cuda2hip") and not policy_applies("e2e")
    assert policy_applies("numba2triton") and not policy_applies("notebook")  # unregistered: by its language


def _config(directory: Path, family: str) -> Path:
    directory.mkdir(parents=True)
    (directory / "kernel.py").write_text("def k():\n    return 1\n")
    (directory / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "task_type": family,
                "source_file_path": ["kernel.py"],
                "target_kernel_functions": ["k"],
                "compile_command": ["true"],
                "correctness_command": ["true"],
            }
        )
    )
    return directory


def test_a_family_is_added_by_registering_it(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="unknown task type 'torch2mojo'"):
        load_task_config(_config(tmp_path / "before", "torch2mojo"))
    register_family(Family("torch2mojo", "mojo", families.REFERENCE))
    try:
        config = load_task_config(_config(tmp_path / "after", "torch2mojo"))
        assert config.baseline_source is BaselineSource.REFERENCE and policy_applies("torch2mojo")
        with pytest.raises(ValueError, match="already registered"):
            register_family(Family("torch2mojo", "mojo"))
    finally:
        FAMILIES.pop("torch2mojo")
