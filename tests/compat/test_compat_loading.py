"""Reading the original's task folders (schema v1 and v2): field mapping, warnings, platform rules,
Triton needs, and discovery that never lets one broken folder stop the others."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml
from original_task_fixtures import ADD_TEST_FILE, instruction_task, rocmbench_task, v2_task, vllm_task

from aka.compat.platform import OriginalPlatform, platform_skip_reason, read_platform
from aka.compat.spec import EditScope, TaskFormat
from aka.compat.triton_versions import TritonNeed, mismatch
from aka.config.task_config import load_task_config
from aka.config.tasks import gate_tasks, load_task, select_tasks
from aka.errors import ConfigError


def _edit(task_dir: Path, **changes: object) -> None:
    path = task_dir / "config.yaml"
    raw = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    path.write_text(yaml.safe_dump(raw))


def test_v1_fields_map_and_unknown_ones_warn(tasks_root: Path, caplog: pytest.LogCaptureFixture) -> None:
    vllm_task(tasks_root)
    with caplog.at_level(logging.WARNING):
        task = load_task(tasks_root, tasks_root / "triton2triton/vllm/toy_scale")
    assert task.original is not None and task.original.format is TaskFormat.ORIGINAL_V1
    assert task.config.source_file_path == ["source/toy_scale.py"]
    assert task.config.baseline_source.value == "source" and task.config.prompt.instructions == "Make scale faster."
    assert task.original.scopes == (EditScope("source/toy_scale.py"),)
    assert "field 'kernel_identity' is not used by aka" in caplog.text


def test_rocmbench_commas_pytest_and_symbol_scope(tasks_root: Path) -> None:
    rocmbench_task(tasks_root, extra_field=1)
    task = load_task(tasks_root, tasks_root / "triton2triton/rocmbench/easy/test_toy_add")
    assert task.config.target_kernel_functions == ["add_kernel", "sub_kernel"]
    assert task.config.correctness_command[0].startswith("python3 -m pytest -vv -x --maxfail=1 test_toy_add.py")
    assert task.original is not None
    assert task.original.scopes == (EditScope("test_toy_add.py", ("add_kernel", "sub_kernel"), True),)
    assert any("field 'extra_field' is unknown" in w for w in task.original.warnings)


def test_empty_source_file_path_means_the_file_defining_the_kernel(tasks_root: Path) -> None:
    task_dir = instruction_task(tasks_root)
    task = load_task(tasks_root, task_dir)
    assert task.config.source_file_path == ["test_toy_add.py"] and task.family == "instruction2triton"
    (task_dir / "test_toy_add.py").write_text(ADD_TEST_FILE.replace("def add_kernel", "def other_kernel"))
    with pytest.raises(ConfigError) as info:
        load_task(tasks_root, task_dir)
    assert "config.yaml: field 'source_file_path' is empty and no Python file of the task defines 'add_kernel'" in (
        str(info.value)
    )


def test_our_own_tasks_keep_strict_validation(make_toy_task, tasks_root: Path) -> None:
    task_dir = make_toy_task(unknown_field=1)
    with pytest.raises(ConfigError, match="field 'unknown_field': unknown field"):
        load_task(tasks_root, task_dir)
    with pytest.raises(ConfigError, match="field 'triton_versions': Value error, 'three' is not a version specifier"):
        _edit(task_dir, unknown_field=None, triton_versions="three")
        load_task_config(task_dir)


def test_a_broken_task_among_many_is_that_tasks_problem(make_toy_task, tasks_root: Path) -> None:
    make_toy_task("triton2triton/toy/good")
    broken = make_toy_task("triton2triton/toy/broken", source_file_path=["missing.py"])
    (tasks_root / "triton2triton/toy/bad_yaml").mkdir(parents=True)
    (tasks_root / "triton2triton/toy/bad_yaml/config.yaml").write_text("task_type: [unclosed")
    tasks = {t.name: t for t in select_tasks(tasks_root, ["all"])}
    assert tasks["triton2triton/toy/good"].problem is None
    assert "broken/config.yaml: field 'source_file_path': 'missing.py' does not exist" in str(
        tasks["triton2triton/toy/broken"].problem
    )
    assert "not valid YAML" in str(tasks["triton2triton/toy/bad_yaml"].problem)
    runnable, _ = gate_tasks(list(tasks.values()), None)
    assert len(runnable) == 3  # problems run as their own infrastructure failures
    with pytest.raises(ConfigError, match="field 'source_file_path'"):
        select_tasks(tasks_root, ["triton2triton/toy/broken"])  # named explicitly: strict
    assert broken.is_dir()


@pytest.mark.parametrize(
    ("support", "arch", "reason"),
    [
        ({"status": "skip", "skip_reason": "parked upstream"}, "sm_90", "parked upstream"),
        ({"required_arch": "gfx942"}, "sm_90", "requires gfx942 (an AMD GPU architecture); this device is sm_90"),
        ({"required_arch": ["sm_90", "gfx950"]}, "sm_90", None),
        (
            {"required_arch": ["gfx942", "gfx950"]},
            None,
            "requires gfx942 or gfx950 (an AMD GPU architecture); this machine has no GPU",
        ),
        ({"required_arch": "sm_100"}, "sm_90", "requires sm_100; this device is sm_90"),
        ({"required_arch": 7}, "sm_90", None),
        ({"status": "parked"}, "sm_90", None),
    ],
)
def test_platform_support_variants(support: dict[str, object], arch: str | None, reason: str | None) -> None:
    platform, _ = read_platform(support, "config.yaml")
    assert platform_skip_reason(platform, arch) == reason


def test_platform_oddities_are_warnings() -> None:
    assert read_platform("yes", "c.yaml") == (
        OriginalPlatform(),
        ["c.yaml: field 'platform_support' is not a mapping; ignored (the task runs)"],
    )
    _, warnings = read_platform({"required_arch": 7, "status": "parked", "runnable_on_gfx942": True}, "c.yaml")
    assert [w.split(": ", 1)[1] for w in warnings] == [
        "field 'platform_support.runnable_on_gfx942' is not used by aka; ignored",
        "field 'platform_support.status': 'parked' is neither active nor skip; the task runs",
        "field 'platform_support.required_arch' is neither a string nor a list of strings; ignored (the task runs)",
    ]


def test_gating_amd_languages_images_and_arches(tasks_root: Path) -> None:
    vllm_task(tasks_root, "hip2hip/others/toy", task_type="hip2hip")
    vllm_task(tasks_root, "image_kernel/toy", task_type="image_kernel", image_repo_path="/sgl-workspace/aiter")
    vllm_task(tasks_root, "triton2triton/vllm/amd_only", platform_support={"required_arch": "gfx950"})
    vllm_task(tasks_root, "triton2triton/vllm/anywhere")
    runnable, dropped = gate_tasks(select_tasks(tasks_root, ["all"]), "sm_90")
    reasons = {task.name: why for task, why in dropped}
    assert [t.name for t in runnable] == ["triton2triton/vllm/anywhere"]
    assert reasons["hip2hip/others/toy"] == "HIP kernels need an AMD GPU and the ROCm toolchain"
    assert reasons["image_kernel/toy"].startswith("runs inside the original's ROCm container image")
    assert reasons["triton2triton/vllm/amd_only"].startswith("requires gfx950 (an AMD GPU architecture)")


def test_triton_needs(tasks_root: Path) -> None:
    need = TritonNeed("<3.9", "uses tl.make_block_ptr, which Triton 3.9 removed")
    assert mismatch(need, "3.8.0") is None and mismatch(need, "3.6.0+git42270451") is None
    assert mismatch(need, "3.9.0") == (
        "needs Triton <3.9 (uses tl.make_block_ptr, which Triton 3.9 removed); Triton 3.9.0 is installed"
    )
    assert mismatch(need, None) is not None and mismatch(None, "3.9.0") is None
    block = rocmbench_task(
        tasks_root,
        "triton2triton/rocmbench/easy/test_blocks",
        ADD_TEST_FILE + "\n\ndef blocks(tl, x):\n    return tl.make_block_ptr(x)\n",
    )
    vllm_task(tasks_root, "triton2triton/vllm/old_triton", triton_versions="<1.0")
    vllm_task(tasks_root, "triton2triton/vllm/any_triton")
    _, dropped = gate_tasks(select_tasks(tasks_root, ["all"]), None)
    reasons = {task.name: why for task, why in dropped}
    assert reasons["triton2triton/vllm/old_triton"].startswith("needs Triton <1.0 (declared by the task")
    assert "triton2triton/vllm/any_triton" not in reasons
    from aka.compat.triton_versions import installed_triton

    installed = installed_triton()
    assert ("triton2triton/rocmbench/easy/test_blocks" in reasons) == (mismatch(need, installed) is not None)
    assert block.is_dir()


def test_schema_detection(tasks_root: Path, make_toy_task) -> None:
    ours = make_toy_task()
    assert load_task(tasks_root, ours).original is None
    v2 = v2_task(tasks_root)
    assert load_task(tasks_root, v2).original.format is TaskFormat.ORIGINAL_V2  # type: ignore[union-attr]
    _edit(v2, schema_version=3)
    with pytest.raises(ConfigError, match="field 'schema_version': 3 is not supported"):
        load_task(tasks_root, v2)


def test_v2_fields_map(tasks_root: Path) -> None:
    task = load_task(tasks_root, v2_task(tasks_root, triton_versions=">=3.6"))
    spec = task.original
    assert spec is not None and spec.arena is not None and spec.arena.manifest is not None
    assert task.family == "triton2triton" and task.config.source_file_path == ["source/toy_scale.py"]
    assert task.config.target_kernel_functions == ["scale_kernel", "scale"]
    assert task.config.performance_command == ["python3 _arena_eval.py candidate performance"]
    assert spec.scopes == (EditScope("source/toy_scale.py", ("scale_kernel", "scale"), True),)
    assert [c.test_case_id for c in spec.arena.manifest.cases] == ["perf1", "perf2"]
    assert spec.arena.commands.argvs("task", "validate-task") == [("python3", "_arena_eval.py", "validate-task")]
    assert spec.arena.commands.argvs("baseline", "compile") == [("python3", "_arena_eval.py", "baseline", "compile")]
    assert (
        spec.pairing
        and task.config.triton_versions == ">=3.6"
        and "Optimize toy_scale" in str(task.config.prompt.instructions)
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"candidate": {"language": "triton", "editable": [{"path": "a.py", "scope": "symbols"}]}},
            "field 'candidate.editable.0': Value error, scope symbols needs a nonempty list",
        ),
        (
            {"candidate": {"language": "triton", "editable": ["workloads.json"]}},
            "field 'candidate.editable': 'workloads.json' is protected",
        ),
        ({"candidate": {"language": "triton", "editable": ["../escape.py"]}}, "is not a normalized path"),
        ({"evaluation": {"workloads": "workloads.json"}}, "field 'evaluation.runner' is missing"),
        ({"baseline": {"correctness_policy": "diagnostic"}}, "diagnostic_reason is required"),
    ],
)
def test_bad_v2_configs_name_the_field(tasks_root: Path, change: dict[str, object], expected: str) -> None:
    task_dir = v2_task(tasks_root)
    _edit(task_dir, **change)
    with pytest.raises(ConfigError) as info:
        load_task(tasks_root, task_dir)
    assert str(task_dir / "config.yaml") in str(info.value) and expected in str(info.value)


def test_v2_warnings_skips_and_manifest_problems(tasks_root: Path) -> None:
    task_dir = v2_task(
        tasks_root,
        evaluation_tools={"triton": "3.6"},
        surprise=True,
        platform_support={"required_arch": ["gfx942", "gfx950"], "status": "active"},
    )
    task = load_task(tasks_root, task_dir)
    assert task.original is not None and any("field 'surprise' is unknown" in w for w in task.original.warnings)
    assert platform_skip_reason(task.original.platform, "sm_90") is not None
    _edit(task_dir, workspace={"sources": [{"kind": "image", "image_path": "/opt/x", "destination": "x"}]})
    assert "workspace sources" in str(load_task(tasks_root, task_dir).original.skip_reason)  # type: ignore[union-attr]
    _edit(task_dir, workspace=None)
    (task_dir / "workloads.json").write_text(json.dumps({"cases": [{"test_case_id": "a", "checks": ["correctness"]}]}))
    with pytest.raises(ConfigError, match="no case is checked for performance"):
        load_task(tasks_root, task_dir)
    (task_dir / "workloads.json").write_text(json.dumps({"version": 1}))
    assert load_task(tasks_root, task_dir).original.arena.manifest is None  # type: ignore[union-attr]
