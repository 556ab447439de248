"""Reading what the original's commands report: v1 result files by its key priority (never stdout,
but geak's one declared line) and v2's `ARENA_EVAL_RESULT=` line, cross-checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aka.compat.arena_protocol import ArenaProtocolError, CaseManifest, merge_results, parse_command_result
from aka.compat.result_files import (
    ResultFileError,
    geak_latency,
    paired_numbers,
    performance_cases,
    read_cases,
    record_time,
    remove_stale_results,
    step_report_problem,
)


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"device_time_ms": 1.5, "execution_time_ms": 9.0}, 1.5),
        ({"gpu_time_ms": "bad", "execution_time_ms": 2.0}, 2.0),
        ({"execution_time_ms": -1.0}, -1.0),
        ({"execution_time": 12.0}, 12.0),
        ({"execution_time": 1500.0}, 1_500_000.0),
        ({"time_ms": 2500.0}, 2500.0),
        ({"wall_time_ms": 1.0, "timing_ms": {"mean": 3.0}}, None),
        ({"timing_ms": {"mean": 3.0, "median": 2.0}}, 3.0),
        ({"timing_ms": {"median": 2.0, "min": 1.0}}, 2.0),
        ({"timing_ms": {"mean": "bad", "median": 2.0}}, None),
        ({"bytes_per_second_gs": 4.0}, 0.25),
        ({"note": "nothing timed"}, None),
    ],
)
def test_time_key_priority(record: dict[str, Any], expected: float | None) -> None:
    assert record_time(record) == expected


def test_torch2hip_reads_its_own_keys_first() -> None:
    record = {"ori_time": 4.0, "opt_time": 2.0, "execution_time_ms": 9.0}
    assert record_time(record, "torch2hip", baseline=True) == 4.0
    assert record_time(record, "torch2hip") == 2.0


def _write(root: Path, rel: str, data: object) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


def test_file_shapes_ids_and_failed_cases(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "a.json",
        [
            {"test_case_id": "perf1", "execution_time_ms": 0.5, "params": {"n": 4}, "benchmark_method": "cuda_graph"},
            {"test_case_id": "perf2", "execution_time_ms": -1.0, "params": {"n": 8}},
            {"op_name": "add", "params": {"SIZE": 3, "shape": [1, 2]}, "timing_ms": {"mean": 0.2}},
            {"op_name": "add", "params": {"SIZE": 3, "shape": [1, 2]}, "timing_ms": {"mean": 0.3}},
            {"no": "time"},
        ],
    )
    cases = read_cases(tmp_path / "a.json")
    assert [c.id for c in cases] == ["perf1", "perf2", "add[SIZE=3, shape=[1, 2]]", "add[SIZE=3, shape=[1, 2]]#2"]
    assert [c.failed for c in cases] == [False, True, False, False]
    assert cases[0].method == "cuda_graph" and cases[0].params == {"n": 4}
    _write(tmp_path, "b.json", {"test_cases": [{"time_ms": 1.0}]})
    assert [(c.id, c.time_ms) for c in read_cases(tmp_path / "b.json")] == [("test_case_0", 1.0)]
    _write(tmp_path, "c.json", {"execution_time_ms": 0.0371, "shape": {"rows": 3}})
    assert [(c.id, c.time_ms) for c in read_cases(tmp_path / "c.json")] == [("test_case_0", 0.0371)]
    _write(tmp_path, "d.json", {"fwd_ms": 1.0, "bwd_ms": 2.0, "wall_time_ms": 9.0})
    assert [(c.id, c.time_ms) for c in read_cases(tmp_path / "d.json")] == [("bwd_0", 2.0), ("fwd_1", 1.0)]
    _write(tmp_path, "e.json", "{not json")
    with pytest.raises(ResultFileError, match="e.json is not valid JSON"):
        read_cases(tmp_path / "e.json")


def test_first_file_with_cases_wins_and_stale_files_go(tmp_path: Path) -> None:
    _write(tmp_path, "build/performance_report.json", [])
    _write(tmp_path, "performance_report.json", [{"execution_time_ms": 1.0}])
    _write(tmp_path, "perf/benchmark_results.json", [{"timing_ms": {"mean": 2.0}}])
    _write(tmp_path, "build/compile_report.json", {"status": "ok"})
    source, cases = performance_cases(tmp_path)
    assert source == "performance_report.json" and cases[0].time_ms == 1.0
    assert sorted(remove_stale_results(tmp_path)) == [
        "build/compile_report.json",
        "build/performance_report.json",
        "perf/benchmark_results.json",
        "performance_report.json",
    ]
    assert performance_cases(tmp_path) == (None, [])


def test_a_step_report_must_say_ok(tmp_path: Path) -> None:
    assert step_report_problem(tmp_path, "compile") is None  # none written: the exit status decides
    _write(tmp_path, "build/correctness_report.json", {"status": "fail", "error": "Shape 2: mismatch"})
    assert step_report_problem(tmp_path, "correctness") == (
        "build/correctness_report.json says 'fail': Shape 2: mismatch"
    )
    _write(tmp_path, "build/compile_report.json", "[")
    assert step_report_problem(tmp_path, "compile") == "build/compile_report.json is not valid JSON"


def test_geak_line_is_the_only_stdout_read() -> None:
    assert geak_latency(["  [0] n=1  0.5ms\n", "GEAK_RESULT_LATENCY_MS=0.1234\n"]) == 0.1234
    assert (
        geak_latency(["Performance: 3.0 ms", "took 2 ms", " GEAK_RESULT_LATENCY_MS=1", "GEAK_RESULT_LATENCY_MS=x"])
        is None
    )
    with pytest.raises(ResultFileError, match="2 GEAK_RESULT_LATENCY_MS lines"):
        geak_latency(["GEAK_RESULT_LATENCY_MS=1.0", "GEAK_RESULT_LATENCY_MS=0.001"])


def test_paired_numbers() -> None:
    good: dict[str, Any] = {
        "aka_pairing": "paired",
        "aka_baseline_time_ms": 2.0,
        "aka_speedup": 1.0,
        "aka_speedup_ci_low": 0.9,
        "aka_speedup_ci_high": 1.1,
        "aka_pairs": 50,
    }
    assert paired_numbers(good) == {k: float(v) for k, v in good.items() if k != "aka_pairing"}
    assert paired_numbers({"aka_pairing": "not requested"}) is None
    with pytest.raises(ResultFileError, match="aka_speedup is not a positive finite number"):
        paired_numbers({**good, "aka_speedup": float("inf")})


def _line(**fields: object) -> str:
    result: dict[str, object] = {
        "protocol": "arena-eval-v1",
        "role": "candidate",
        "action": "performance",
        "status": "PASS",
        "cases": [
            {
                "test_case_id": "perf1",
                "status": "PASS",
                "params": {"case_index": 0},
                "dtype": "float16",
                "execution_time_ms": 0.5,
                "benchmark_method": "cuda_graph",
            }
        ],
    }
    result.update(fields)
    return "ARENA_EVAL_RESULT=" + json.dumps(result)


def _parse(lines: list[str], returncode: int = 0, action: str = "performance", **kwargs: Any) -> Any:
    return parse_command_result(lines, role="candidate", action=action, returncode=returncode, **kwargs)


def test_a_valid_result_line() -> None:
    result = _parse(["noise", _line() + "\n", "more noise"])
    assert result.passed and [c.test_case_id for c in result.cases] == ["perf1"]


@pytest.mark.parametrize(
    ("lines", "returncode", "message"),
    [
        ([], 0, "no ARENA_EVAL_RESULT= line"),
        ([_line(), _line()], 0, "2 ARENA_EVAL_RESULT= lines"),
        (["ARENA_EVAL_RESULT={bad"], 0, "not valid JSON"),
        (['ARENA_EVAL_RESULT={"protocol":"arena-eval-v1","protocol":"x"}'], 0, "duplicate key 'protocol'"),
        (
            [
                _line(
                    cases=[
                        {
                            "test_case_id": "perf1",
                            "status": "PASS",
                            "execution_time_ms": float("nan"),
                            "benchmark_method": "cuda_graph",
                        }
                    ]
                )
            ],
            0,
            "NaN is not a finite number",
        ),
        ([_line(extra=1)], 0, "unknown key 'extra'"),
        ([_line(protocol="arena-eval-v0")], 0, "protocol is 'arena-eval-v0'"),
        ([_line(role="baseline")], 0, "says role/action baseline/performance"),
        ([_line(action="correctness")], 0, "says role/action candidate/correctness"),
        ([_line()], 1, "status PASS with exit status 1"),
        ([_line()], -9, "killed by a signal"),
        ([_line(status="FAIL")], 1, "a FAIL result needs a nonempty reason"),
        ([_line(failure_kind="x")], 0, "a PASS result carries a failure_kind"),
        ([_line(cases=[])], 0, "a PASS performance result has no cases"),
        ([_line(cases=[{"test_case_id": "perf1", "status": "FAIL"}])], 0, "case perf1 failed in a PASS result"),
        (
            [
                _line(
                    cases=[
                        {
                            "test_case_id": "perf1",
                            "status": "PASS",
                            "execution_time_ms": 0,
                            "benchmark_method": "cuda_graph",
                        }
                    ]
                )
            ],
            0,
            "execution_time_ms is not a positive finite number",
        ),
        (
            [
                _line(
                    cases=[
                        {
                            "test_case_id": "perf1",
                            "status": "PASS",
                            "execution_time_ms": 1.0,
                            "benchmark_method": "cpu_timer_fallback",
                        }
                    ]
                )
            ],
            0,
            "benchmark_method 'cpu_timer_fallback'",
        ),
        (
            [
                _line(
                    cases=[
                        {
                            "test_case_id": "p",
                            "status": "PASS",
                            "execution_time_ms": 1.0,
                            "benchmark_method": "cuda_graph",
                        },
                        {
                            "test_case_id": "p",
                            "status": "PASS",
                            "execution_time_ms": 1.0,
                            "benchmark_method": "cuda_graph",
                        },
                    ]
                )
            ],
            0,
            "duplicate test_case_id",
        ),
    ],
)
def test_forged_or_malformed_result_lines(lines: list[str], returncode: int, message: str) -> None:
    with pytest.raises(ArenaProtocolError, match=message):
        _parse(lines, returncode)


def test_cpu_timer_only_on_the_cpu_and_validate_task_rules() -> None:
    cpu_case = {
        "test_case_id": "perf1",
        "status": "PASS",
        "execution_time_ms": 1.0,
        "benchmark_method": "cpu_timer_fallback",
    }
    assert _parse([_line(cases=[cpu_case])], cpu=True).passed
    validate = {
        "protocol": "arena-eval-v1",
        "role": "task",
        "action": "validate-task",
        "status": "PASS",
        "cases": [{"test_case_id": "a", "status": "PASS", "checks": ["performance"]}],
        "metadata": {"candidate_state": "implemented"},
    }
    with pytest.raises(ArenaProtocolError, match="performance needs correctness"):
        parse_command_result(
            ["ARENA_EVAL_RESULT=" + json.dumps(validate)], role="task", action="validate-task", returncode=0
        )
    validate["cases"] = [{"test_case_id": "a", "status": "PASS", "checks": ["correctness", "performance"]}]
    validate["metadata"] = {}
    with pytest.raises(ArenaProtocolError, match="candidate_state"):
        parse_command_result(
            ["ARENA_EVAL_RESULT=" + json.dumps(validate)], role="task", action="validate-task", returncode=0
        )


def test_case_manifest_cross_checks() -> None:
    rows = [
        {"test_case_id": "c1", "params": {"i": 0}, "checks": ["correctness"]},
        {"test_case_id": "p1", "params": {"i": 1}, "dtype": "float16", "checks": ["correctness", "performance"]},
    ]
    manifest = CaseManifest.from_rows(rows, "workloads.json")
    perf = _parse(
        [
            _line(
                cases=[
                    {
                        "test_case_id": "p1",
                        "status": "PASS",
                        "params": {"i": 1},
                        "dtype": "float16",
                        "execution_time_ms": 0.5,
                        "benchmark_method": "cuda_graph",
                    }
                ]
            )
        ]
    )
    manifest.validate(perf)
    missing = perf.__class__("candidate", "performance", "FAIL", (), "reason")
    with pytest.raises(ArenaProtocolError, match="case p1 is missing"):
        manifest.validate(missing)
    for cases, message in [
        (
            [
                {
                    "test_case_id": "p1",
                    "status": "PASS",
                    "params": {"i": 2},
                    "dtype": "float16",
                    "execution_time_ms": 0.5,
                    "benchmark_method": "cuda_graph",
                }
            ],
            "case p1: shape, dtype or params differ",
        ),
        (
            [
                {"test_case_id": "x", "status": "PASS", "execution_time_ms": 0.5, "benchmark_method": "cuda_graph"},
                {
                    "test_case_id": "p1",
                    "status": "PASS",
                    "params": {"i": 1},
                    "dtype": "float16",
                    "execution_time_ms": 0.5,
                    "benchmark_method": "cuda_graph",
                },
            ],
            "case x is not in the manifest",
        ),
    ]:
        with pytest.raises(ArenaProtocolError, match=message):
            manifest.validate(_parse([_line(cases=cases)]))
    compile_ok = _parse(
        [_line(action="compile", cases=[{"test_case_id": "c1", "status": "PASS", "params": {"i": 0}}])],
        action="compile",
    )
    manifest.validate(compile_ok)  # compile may name a subset
    with pytest.raises(ArenaProtocolError, match="no case is checked for performance"):
        CaseManifest.from_rows(rows[:1], "w.json")
    with pytest.raises(ArenaProtocolError, match="two commands of one action reported the same test_case_id"):
        merge_results([perf, perf])
