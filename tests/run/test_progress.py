"""What a person watching sees: phases, the run's events, the console views (live, plain, quiet,
JSON lines), the end-of-run summary, lines that never wrap off a terminal, and `aka task check`'s
phases; real runs of toy tasks through the CLI, serial and parallel."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import toy_kernel_source
from rich.console import Console
from typer.testing import CliRunner

from aka import cli
from aka.cli import app
from aka.console import cli_console
from aka.progress import Phase, phase, phases_to, step_started
from aka.reports.summary import print_summary
from aka.results.task_result import FailureKind, TaskResult, TaskStatus
from aka.run.events import EventFollower, EventKind, EventsFile, RunEvent, now
from aka.run.progress_display import LiveDisplay, PlainDisplay, ProgressState

REPO = Path(__file__).resolve().parents[2]
PHASES = ["baseline", "agent", "compile", "correctness", "performance"]


def test_phases_reach_the_listener_and_an_enclosing_phase_holds() -> None:
    seen: list[Phase] = []
    step_started("compile")  # nobody listens: nothing happens
    with phases_to(seen.append):
        step_started("compile")
        with phase(Phase.AGENT):
            step_started("correctness")  # the agent's own evaluation: not the trial's phase
            with phase(Phase.BASELINE):
                pass
        step_started("performance")
        step_started("export")  # not a step the evaluation announces
        thread = threading.Thread(target=step_started, args=("compile",))
        thread.start()
        thread.join()
    assert seen == [Phase.COMPILE, Phase.AGENT, Phase.PERFORMANCE], "another thread's steps are not this trial's"


def _event(kind: EventKind, task: str = "a", **fields: object) -> RunEvent:
    return RunEvent.model_validate({"time": now(), "event": kind, "task": task, **fields})


def test_the_events_file_is_followed_line_by_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "events.jsonl"
    EventsFile(path).emit(_event(EventKind.TASK_STARTED, "before"))
    follower = EventFollower(path)
    assert follower.poll() == []
    EventsFile(path).emit(_event(EventKind.TASK_PHASE, phase=Phase.AGENT))
    with path.open("a") as handle:
        handle.write('{"time": "t", "event": "task_finished", "task": "a", "sta')  # a worker mid-write
    assert [e.event for e in follower.poll()] == [EventKind.TASK_PHASE]
    with path.open("a") as handle:
        handle.write('tus": "PASS"}\nnot an event\n')
    with caplog.at_level(logging.WARNING):
        finished = follower.poll()
    assert [(e.event, e.status) for e in finished] == [(EventKind.TASK_FINISHED, "PASS")]
    assert "not an event" in caplog.text
    lines = [json.loads(line) for line in path.read_text().splitlines()[:2]]
    assert lines[1] == {"time": lines[1]["time"], "event": "task_phase", "task": "a", "phase": "agent"}
    assert EventFollower(tmp_path / "none.jsonl").poll() == []


def test_a_retried_trial_counts_once_and_the_eta_comes_from_trials_that_ran() -> None:
    state = ProgressState()
    state.apply(RunEvent(time=now(), event=EventKind.RUN_STARTED, trials=3, arm_trials={"x": 2, "y": 1}, workers=2))
    state.apply(_event(EventKind.TASK_REUSED, "kept", arm="y", verdict="correct-and-faster"))
    assert state.eta() is None, "a reused trial took no time: it says nothing of what is left"
    state.apply(_event(EventKind.TASK_STARTED, arm="x", repeat=1))
    state.apply(_event(EventKind.TASK_FINISHED, arm="x", repeat=1, status="INFRA", verdict="infrastructure"))
    assert state.done == 2
    state.apply(_event(EventKind.TASK_STARTED, arm="x", repeat=1))  # the queue retries it
    assert state.done == 1 and list(state.running) == [("a", "x", 1)]
    state.apply(_event(EventKind.TASK_PHASE, arm="x", repeat=1, phase=Phase.CORRECTNESS))
    assert state.running[("a", "x", 1)].phase is Phase.CORRECTNESS
    state.apply(_event(EventKind.TASK_FINISHED, arm="x", repeat=1, status="PASS", verdict="correct-but-slower"))
    assert (state.done, state.arm_counts("x"), state.arm_counts("y")) == (2, (1, 1), (1, 1))
    assert state.verdicts() == {"correct-and-faster": 1, "correct-but-slower": 1}
    assert state.eta() is not None and "2/3 done" in state.counts()


def test_the_plain_and_live_views(tmp_path: Path) -> None:
    events = [
        RunEvent(
            time=now(),
            event=EventKind.RUN_STARTED,
            run_dir="/runs/" + "r" * 120,
            agent="noop",
            device="cpu",
            smoke_test=True,
            trials=2,
            arm_trials={"base": 1, "new": 1},
        ),
        _event(EventKind.TASK_STARTED, "fam/suite/task", arm="new", repeat=1, worker="w0"),
        _event(EventKind.TASK_PHASE, "fam/suite/task", arm="new", repeat=1, worker="w0", phase=Phase.PERFORMANCE),
    ]
    finished = _event(
        EventKind.TASK_FINISHED,
        "fam/suite/task",
        arm="new",
        repeat=1,
        status="PASS",
        verdict="correct-but-slower",
        score=170.0,
        speedup=0.5,
    )
    plain = io.StringIO()
    display = PlainDisplay(Console(file=plain, width=60))
    for event in [*events, finished]:
        display.emit(event)
    lines = plain.getvalue().splitlines()
    assert lines[0].endswith("r" * 120 + "  agent=noop  device=cpu  trials=2"), "never wrapped"
    assert lines[1].startswith("smoke test:")
    assert lines[3] == "  performance fam/suite/task [new r1] (worker w0)"
    assert lines[4].startswith(
        "  PASS    correct-but-slower fam/suite/task [new r1] score=170.0 speedup=0.500x (smoke test)  (1/2 done"
    )
    quiet = io.StringIO()
    display = PlainDisplay(Console(file=quiet, width=200), quiet=True)
    for event in [*events, finished]:
        display.emit(event)
    assert len(quiet.getvalue().splitlines()) == 3, "the run's two lines and the trial's end only"

    screen = io.StringIO()
    live = LiveDisplay(Console(file=screen, force_terminal=True, width=140))
    with live:
        for event in events:
            live.emit(event)
        shown = Console(file=io.StringIO(), width=140, record=True)
        shown.print(live.render())
        text = shown.export_text()
        assert "0/2 done" in text and "arm base: 0/1 done, 0 correct" in text and "arm new: 0/1 done" in text
        assert "fam/suite/task [new r1]" in text and "w0" in text and "performance" in text
        live.emit(finished)
        shown.print(live.render())
        assert "correct-but-slower 1" in shown.export_text()
    printed = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())
    assert "correct-but-slower fam/suite/task [new r1]" in printed, "the trial's end stays printed"


def test_the_summary_counts_verdicts_per_family_and_marks_a_smoke_test() -> None:
    def result(name: str, family: str, **fields: object) -> TaskResult:
        return TaskResult.model_validate({"task_name": name, "task_type": family, "device": "cpu", **fields})

    results = [
        result(
            "a",
            "triton2triton",
            pass_compilation=True,
            pass_correctness=True,
            status=TaskStatus.PASS,
            speedup_ratio=2.0,
            speedup_ci_low=1.8,
            speedup_ci_high=2.2,
            score=320.0,
        ),
        result(
            "b",
            "triton2triton",
            pass_compilation=True,
            pass_correctness=True,
            status=TaskStatus.PASS,
            speedup_ratio=0.5,
            score=170.0,
        ),
        result("c", "cuda2cuda", status=TaskStatus.SKIP, failure_kind=FailureKind.SKIPPED),
        result(
            "d",
            "cuda2cuda",
            status=TaskStatus.FAIL,
            failure_kind=FailureKind.COMPILE_ERROR,
            compilation_error_message="x",
        ),
    ]
    out = io.StringIO()
    print_summary(results, Console(file=out, width=250))
    lines = out.getvalue().splitlines()
    overall = next(line for line in lines if "overall" in line)
    cells = [c.strip() for c in overall.split("│")[1:-1]]
    assert cells == ["overall", "3 (+1 skipped)", "2", "1", "1", "0", "1.000x", "163.3", "490.0", "compile_error 1"]
    assert "geomean speedup (smoke test)" in out.getvalue()
    assert "verdicts: correct-and-faster 1, correct-but-slower 1, compile failure 1, skipped 1" in lines
    assert lines[-1].startswith("smoke test:")


def _toy_run(make_toy_task, write_run_config, tmp_path: Path, **fields: object) -> Path:
    make_toy_task("triton2triton/toy/one")
    make_toy_task("torch2triton/toy/two", kernel=toy_kernel_source(value=41))
    config: Path = write_run_config(workspace_directory_prefix=str(tmp_path / ("deep_" * 20) / "workspace"), **fields)
    return config


def test_a_run_off_a_terminal_prints_lines_then_the_summary_and_a_whole_path(
    make_toy_task, write_run_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Consoles made here, with no terminal variables: the CLI's own were made when aka.cli was
    # first imported in this process, with whatever another test's environment held then
    # (a full run on CI once gave this test an 80-column summary table).
    for name in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cli, "console", cli_console())
    monkeypatch.setattr(cli, "err_console", cli_console(stderr=True))
    config = _toy_run(make_toy_task, write_run_config, tmp_path)
    done = CliRunner().invoke(app, ["run", str(config)])
    assert done.exit_code == 0, done.output
    reports = Path(done.stdout.splitlines()[-1])
    assert reports.is_dir() and len(str(reports)) > 100, "the path is long, and still one line"
    # The untouched baseline is timed like any candidate: on a loaded CPU its interval may miss 1.0.
    correct = r"correct-(unchanged|and-faster|but-slower)"
    assert re.search(rf"^verdicts: {correct} 1, incorrect 1$", done.stdout, re.M) and "overall" in done.stdout
    err = done.stderr.splitlines()
    for name in PHASES:
        assert f"  {name:<11} triton2triton/toy/one" in err, (name, err)
    assert any(line.startswith("  PARTIAL incorrect") and "torch2triton/toy/two" in line for line in err)
    assert any(
        re.search(rf"{correct} +triton2triton/toy/one score=[0-9.]+ speedup=[0-9.]+x \(smoke test\)", line)
        for line in err
    ), err
    quiet = CliRunner().invoke(app, ["run", str(config), "--quiet", "--resume-latest"])
    assert quiet.exit_code == 0 and "  start" not in quiet.stderr
    assert "triton2triton/toy/one (completed earlier, kept: correct-unchanged)" in quiet.stderr
    both = CliRunner().invoke(app, ["run", str(config), "--quiet", "--json-events"])
    assert both.exit_code == 2 and "--quiet or --json-events" in both.stderr


def test_json_events_are_the_events_file_s_lines_with_the_run_around_them(
    make_toy_task, write_run_config, tmp_path: Path
) -> None:
    config = _toy_run(make_toy_task, write_run_config, tmp_path)
    done = CliRunner().invoke(app, ["run", str(config), "--json-events"])
    assert done.exit_code == 0, done.output
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["event"] == "run_started" and events[0]["trials"] == 2 and events[0]["smoke_test"] is True
    assert events[-1]["event"] == "run_finished" and Path(events[-1]["reports"]).is_dir()
    run_dir = Path(events[0]["run_dir"])
    in_file = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events[1:-1] == in_file
    ends = {e["task"]: e["verdict"] for e in in_file if e["event"] == "task_finished"}
    assert ends == {"triton2triton/toy/one": "correct-unchanged", "torch2triton/toy/two": "incorrect"}


def test_a_parallel_run_s_parent_shows_its_workers_phases(make_toy_task, write_run_config, tmp_path: Path) -> None:
    config = _toy_run(make_toy_task, write_run_config, tmp_path, num_parallel=2)
    done = CliRunner().invoke(app, ["run", str(config)])
    assert done.exit_code == 0, done.output
    err = done.stderr.splitlines()
    assert "workers=2" in err[0]
    phases = [line for line in err if line.startswith("  correctness ") and "(worker " in line]
    assert len(phases) == 2, err
    assert sum("2/2 done" in line for line in err) == 1 and sum(" done, elapsed" in line for line in err) == 2


def test_task_check_shows_its_phases(make_toy_task) -> None:
    task = make_toy_task("triton2triton/toy/checked")
    done = CliRunner().invoke(app, ["task", "check", str(task)])
    assert done.exit_code == 0, done.output
    shown = [line.split()[0] for line in done.stderr.splitlines()]
    assert shown == ["baseline", "compile", "correctness", "performance"], done.stderr


def test_version_and_whole_task_names_off_a_terminal(tasks_root: Path, make_toy_task) -> None:
    long_name = "triton2triton/" + "a_suite_with_a_long_name" * 2 + "/" + "and_a_task_name_past_eighty_columns" * 2
    make_toy_task(long_name)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    listed = subprocess.run(
        [sys.executable, "-m", "aka.cli", "tasks", "list", "--tasks-root", str(tasks_root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0 and any(long_name in line for line in listed.stdout.splitlines()), listed.stdout
    version = CliRunner().invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.strip().startswith("aka 0.")
