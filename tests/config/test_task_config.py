from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aka.config.task_config import BaselineSource, load_task_config
from aka.config.tasks import gate_tasks, select_tasks, task_identity
from aka.errors import ConfigError


def test_valid_toy_task_loads(make_toy_task) -> None:
    config = load_task_config(make_toy_task())
    assert config.source_file_path == ["kernel.py"]
    assert config.baseline_source is BaselineSource.SOURCE
    assert config.compile_timeout == 60


def test_tunables(make_toy_task) -> None:
    config = load_task_config(make_toy_task(tunables=[{"name": "BLOCK_SIZE", "values": [128, 256]}]))
    assert config.tunables[0].values == [128, 256] and config.tunable_file(config.tunables[0]) == "kernel.py"


def test_commands_accept_a_single_string(make_toy_task) -> None:
    config = load_task_config(make_toy_task(compile_command="python3 harness.py compile"))
    assert config.compile_command == ["python3 harness.py compile"]


def test_torch_families_default_to_reference_baseline(make_toy_task) -> None:
    assert load_task_config(make_toy_task("torch2triton/toy/x")).baseline_source is BaselineSource.REFERENCE


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"bogus_field": 1}, "field 'bogus_field': unknown field"),
        ({"task_type": "fortran2cobol"}, "unknown task type 'fortran2cobol'"),
        ({"source_file_path": ["../escape.py"]}, "must be a path inside the task folder"),
        ({"source_file_path": ["nope.py"]}, "'nope.py' does not exist"),
        ({"compile_command": []}, "field 'compile_command'"),
        ({"correctness_timeout": -5}, "field 'correctness_timeout'"),
        ({"target_kernel_functions": []}, "need source_file_path and target_kernel_functions"),
        ({"tunables": [{"name": "BLOCK", "values": []}]}, "field 'tunables.0.values'"),
        ({"tunables": [{"name": "BLOCK", "file": "other.py", "values": [1]}]}, "not in source_file_path"),
        ({"tunables": [{"name": "1BAD", "values": [1]}]}, "field 'tunables.0.name'"),
    ],
)
def test_bad_task_configs_name_file_and_field(make_toy_task, overrides: dict[str, object], expected: str) -> None:
    task_dir = make_toy_task(**overrides)
    with pytest.raises(ConfigError) as info:
        load_task_config(task_dir)
    message = str(info.value)
    assert str(task_dir / "config.yaml") in message
    assert expected in message
    assert "\n" not in message


def test_missing_required_field_and_bad_yaml(make_toy_task) -> None:
    task_dir = make_toy_task()
    raw = yaml.safe_load((task_dir / "config.yaml").read_text())
    del raw["correctness_command"]
    (task_dir / "config.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="field 'correctness_command': required field is missing"):
        load_task_config(task_dir)
    (task_dir / "config.yaml").write_text("task_type: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_task_config(task_dir)


def test_repository_tasks_need_repo_fields(make_toy_task) -> None:
    task_dir = make_toy_task("repository/toy/repo", task_type="repository")
    with pytest.raises(ConfigError, match="repo_url and repository_language"):
        load_task_config(task_dir)


def test_selectors(tasks_root: Path, make_toy_task) -> None:
    make_toy_task("triton2triton/a/one")
    make_toy_task("triton2triton/b/two")
    make_toy_task("cuda2cuda/a/three")
    names = lambda sel: [t.name for t in select_tasks(tasks_root, sel)]  # noqa: E731
    assert names(["all"]) == ["cuda2cuda/a/three", "triton2triton/a/one", "triton2triton/b/two"]
    assert names(["triton2triton"]) == ["triton2triton/a/one", "triton2triton/b/two"]
    assert names(["triton2triton/b"]) == ["triton2triton/b/two"]
    assert names(["cuda2cuda/a/three", "all"])[0] == "cuda2cuda/a/three"
    with pytest.raises(ConfigError, match="selector 'triton2triton/c' matches no task"):
        select_tasks(tasks_root, ["triton2triton/c"])
    with pytest.raises(ConfigError, match="matches no task"):
        select_tasks(tasks_root, ["triton2triton/a/on"])


def test_platform_gating(tasks_root: Path, make_toy_task) -> None:
    make_toy_task("triton2triton/a/skipme", platform_support={"status": "skip", "reason": "broken upstream"})
    make_toy_task("triton2triton/a/hopper", platform_support={"required_arch": "sm_90"})
    make_toy_task("triton2triton/a/any")
    tasks = select_tasks(tasks_root, ["all"])
    runnable, dropped = gate_tasks(tasks, None)
    assert [t.name for t in runnable] == ["triton2triton/a/any"]
    assert {t.name: why for t, why in dropped}["triton2triton/a/skipme"] == "broken upstream"
    runnable, _ = gate_tasks(tasks, "sm_90")
    assert [t.name for t in runnable] == ["triton2triton/a/any", "triton2triton/a/hopper"]


def test_identity_changes_with_any_task_file(tasks_root: Path, make_toy_task) -> None:
    task_dir = make_toy_task()
    (task := select_tasks(tasks_root, ["all"])[0])
    before = task_identity(task)
    (task_dir / "__pycache__").mkdir()
    (task_dir / "__pycache__" / "x.pyc").write_bytes(b"cache")
    assert task_identity(task) == before
    (task_dir / "harness.py").write_text((task_dir / "harness.py").read_text() + "\n# edited\n")
    assert task_identity(task) != before


def test_identity_changes_with_the_platform_that_judges(
    tasks_root: Path, make_toy_task, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frozen baseline or a result judged by another aka version is not reused on resume."""
    import aka
    from aka.config import tasks as tasks_module

    make_toy_task()
    task = select_tasks(tasks_root, ["all"])[0]
    before = task_identity(task)
    monkeypatch.setattr(aka, "__version__", aka.__version__ + ".upgraded")
    tasks_module.judge_identity.cache_clear()
    try:
        assert task_identity(task) != before
    finally:
        monkeypatch.undo()
        tasks_module.judge_identity.cache_clear()
    assert task_identity(task) == before
