"""The wire contract (aka.evaluation.wire) is the one both sides use: the evaluator's pydantic models, the
harness's plain dataclasses, the failure kinds and the step environment agree with it."""

from __future__ import annotations

from pathlib import Path

from aka.evaluation import wire
from aka.evaluation.step_report import CaseReport, StepReport, parse_step_message
from aka.harness import Case
from aka.harness.report import CaseResult, StepResult
from aka.harness.task import StepContext
from aka.results.task_result import FailureKind


def test_the_report_models_of_both_sides_have_the_contracts_fields_in_order() -> None:
    assert tuple(CaseReport.model_fields) == wire.CASE_FIELDS
    assert tuple(StepReport.model_fields) == wire.STEP_FIELDS
    case = CaseResult(Case.make(n=8), correct=True, time_ms=1.0, timing_method=wire.PAIRED_EVENTS)
    step = StepResult("performance", "ok", cases=[case])
    sent = step.to_json()
    assert tuple(sent) == wire.STEP_FIELDS and tuple(sent["cases"][0]) == wire.CASE_FIELDS  # type: ignore[index]


def test_what_the_harness_sends_the_evaluator_parses() -> None:
    import json

    step = StepResult(
        "correctness",
        "failed",
        "1 of 1 cases failed",
        [CaseResult(Case.make(n=8), correct=False)],
        failure_kind=wire.TAMPERING,
    )
    report = parse_step_message(json.dumps({"token": "t" * 32, "report": step.to_json()}).encode(), "t" * 32)
    assert report.format == wire.STEP_REPORT_FORMAT and report.failure_kind == wire.TAMPERING


def test_every_kind_a_step_may_name_is_a_failure_kind_of_the_result() -> None:
    assert wire.STEP_FAILURE_KINDS <= {kind.value for kind in FailureKind}


def test_the_step_reads_the_environment_the_evaluator_writes() -> None:
    environ = {
        wire.ENV_DEVICE: "cpu",
        wire.ENV_TARGET: "baseline",
        wire.ENV_CASE_PROFILE: "full",
        wire.ENV_TASK_FAMILY: "cuda2cuda",
        wire.ENV_TARGET_KERNELS: "a,b",
        wire.ENV_BASELINE: "reference",
        wire.ENV_BASELINE_DIR: "/x/" + wire.BASELINE_SOURCES_DIR,
    }
    ctx = StepContext.from_env("performance", environ)
    assert (ctx.target, ctx.profile, ctx.family, ctx.target_kernels, ctx.baseline) == (
        "baseline",
        "full",
        "cuda2cuda",
        ("a", "b"),
        "reference",
    )
    assert ctx.baseline_dir == Path("/x/.aka_baseline")


def test_exit_codes() -> None:
    assert [int(code) for code in wire.StepExit] == [0, 1, 2, 3]


def test_data_crossing_into_a_trusted_process_is_made_valid_text() -> None:
    """Lone surrogates (JSON carries them as escapes) become U+FFFD, in keys too; a pair stays."""
    from aka.evaluation.wire import valid_text

    data = {"ok": True, "a\udcff": ["x\ud800y", "\ud83d\ude00", 1.5, None, {"n": "plain"}]}
    assert valid_text(data) == {"ok": True, "a\ufffd": ["x\ufffdy", "\U0001f600", 1.5, None, {"n": "plain"}]}
    assert valid_text("plain") == "plain" and valid_text(3) == 3
    # terminal escapes redrew a FAIL line as a green PASS: control characters go, tabs and line ends stay
    assert valid_text("a\x1b[32mPASS\x07\x9b1m\tb\nc\r") == "a\ufffd[32mPASS\ufffd\ufffd1m\tb\nc\r"
