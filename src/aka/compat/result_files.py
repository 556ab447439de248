"""The result files the original's v1 task commands write, read as its evaluator reads them.

Performance (first file that yields cases wins): `build/performance_report.json`,
`performance_report.json`, `build/perf_report.json`, `perf_report.json`,
`perf/benchmark_results.json` (rocmbench). A file holds a list of records, an object with a
`test_cases` list, or one record. A record's time is the first usable key, in the original's
priority: device keys (`device_time_ms` ... `execution_time_ms`), then the ambiguous
`execution_time`, `time_ms`, `time` (below 1000 taken as ms, else seconds), nothing when a host
key (`wall_time_ms` ...) is present, then `timing_ms` (`mean`, else `median`, else `min`), then
`bytes_per_second_gs` (its inverse); torch2hip reads `ori_time`/`opt_time` first. A negative
time (`-1.0`) is how a runner reports a case that failed. Compile and correctness: the step's
`build/<step>_report.json`, when the command writes one, must say `"status": "ok"`.

Standard output is never searched for numbers, with one declared exception: geak_eval's
harnesses print exactly one `GEAK_RESULT_LATENCY_MS=<ms>` line and write no file; that exact
line is read (lower trust: `aka.compat.trust`). Every file here is written by a process that
runs candidate code; `aka.compat.steps` removes them all before every command, so nothing left
over from an earlier step (or committed in the task) is ever read.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PERFORMANCE_REPORTS = (
    "build/performance_report.json",
    "performance_report.json",
    "build/perf_report.json",
    "perf_report.json",
    "perf/benchmark_results.json",
)
STEP_REPORTS = {"compile": "build/compile_report.json", "correctness": "build/correctness_report.json"}
SELF_TIMED_SIDECAR = "build/aka_self_timed.json"  # aka.compat.self_timed's paired numbers
DEVICE_KEYS = (
    "device_time_ms",
    "gpu_time_ms",
    "kernel_time_ms",
    "cuda_event_time_ms",
    "cuda_graph_time_ms",
    "execution_time_ms",
)
AMBIGUOUS_KEYS = ("execution_time", "time_ms", "time")
HOST_KEYS = ("host_time_ms", "wall_time_ms", "elapsed_time_ms", "total_time_ms", "end_to_end_time_ms")
GEAK_LINE = re.compile(r"^GEAK_RESULT_LATENCY_MS=([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)\s*$")
PAIRED_KEYS = ("aka_baseline_time_ms", "aka_speedup", "aka_speedup_ci_low", "aka_speedup_ci_high", "aka_pairs")
Scalar = str | int | float | bool | None


class ResultFileError(ValueError):
    """A result file is there but unreadable or malformed."""


@dataclass(frozen=True)
class FileCase:
    """One case of a performance file: `time_ms` None or <= 0 is a failed case (`-1.0`)."""

    id: str
    time_ms: float | None
    params: dict[str, Scalar] = field(default_factory=dict)
    method: str | None = None
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.time_ms is None or not math.isfinite(self.time_ms) or self.time_ms <= 0


def stale_results(root: Path) -> list[Path]:
    """Every result file a step might read, present under `root`."""
    paths = [root / rel for rel in (*PERFORMANCE_REPORTS, *STEP_REPORTS.values(), SELF_TIMED_SIDECAR)]
    return [path for path in paths if path.is_file() or path.is_symlink()]


def remove_stale_results(root: Path) -> list[str]:
    removed = []
    for path in stale_results(root):
        path.unlink()
        removed.append(path.relative_to(root).as_posix())
    return removed


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def record_time(record: dict[str, Any], family: str = "", baseline: bool = False) -> float | None:
    """A record's time in ms by the original's key priority; None when it has none."""
    if family == "torch2hip":
        key = "ori_time" if baseline else "opt_time"
        if key in record and (value := _float(record[key])) is not None:
            return value
    for key in DEVICE_KEYS:
        if key in record and (value := _float(record[key])) is not None:
            return value
    for key in AMBIGUOUS_KEYS:
        if key in record and (value := _float(record[key])) is not None:
            return value if key == "time_ms" or value < 1000.0 else value * 1000.0
    if any(key in record for key in HOST_KEYS):
        return None
    timing = record.get("timing_ms")
    if isinstance(timing, dict):
        for key in ("mean", "median", "min"):
            if key in timing:
                return _float(timing[key])
    bps = _float(record.get("bytes_per_second_gs"))
    return 1.0 / bps if bps is not None and bps > 0 else None


def _scalars(params: object) -> dict[str, Scalar]:
    if not isinstance(params, dict):
        return {}
    return {
        str(k): v if isinstance(v, (str, int, float, bool)) or v is None else json.dumps(v, sort_keys=True)
        for k, v in params.items()
    }


def _case_id(record: dict[str, Any], index: int) -> str:
    """`test_case_id`, else one made from the params (the original pairs such cases by params),
    else the position."""
    if record.get("test_case_id") is not None:
        return str(record["test_case_id"])
    params = record.get("params")
    if isinstance(params, dict) and params:
        inner = ", ".join(f"{k}={v}" for k, v in sorted(_scalars(params).items()))
        return f"{record.get('op_name') or 'case'}[{inner}]"
    return f"test_case_{index}"


def _records(data: object) -> list[dict[str, Any]]:
    if isinstance(data, list):
        return [item for item in data if isinstance(item, dict)]
    if isinstance(data, dict) and isinstance(data.get("test_cases"), list):
        return [item for item in data["test_cases"] if isinstance(item, dict)]
    if isinstance(data, dict):
        if record_time(data) is not None:
            return [{"test_case_id": data.get("test_case_id", "test_case_0"), **data}]
        return [
            {
                "test_case_id": key.removesuffix("_ms") if len(keys) == 1 else f"{key.removesuffix('_ms')}_{i}",
                "execution_time_ms": data[key],
                "shape": data.get("shape") or data.get("shapes"),
            }
            for keys in [sorted(k for k in data if k.endswith("_ms") and k not in HOST_KEYS)]
            for i, key in enumerate(keys)
        ]
    return []


def read_cases(path: Path, family: str = "", baseline: bool = False) -> list[FileCase]:
    """The cases of one performance file (records without any time are left out, as the
    original leaves them out)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ResultFileError(f"{path.name} is not valid JSON ({type(exc).__name__})") from None
    cases: list[FileCase] = []
    seen: dict[str, int] = {}
    for index, record in enumerate(_records(data)):
        time_ms = record_time(record, family, baseline)
        if time_ms is None and not any(k in record for k in (*DEVICE_KEYS, *AMBIGUOUS_KEYS, "timing_ms")):
            continue
        case_id = _case_id(record, index)
        seen[case_id] = seen.get(case_id, 0) + 1
        if seen[case_id] > 1:
            case_id = f"{case_id}#{seen[case_id]}"
        method = record.get("benchmark_method")
        cases.append(
            FileCase(
                case_id,
                time_ms,
                _scalars(record.get("params")),
                str(method) if isinstance(method, str) else None,
                record,
            )
        )
    return cases


def performance_cases(root: Path, family: str = "", baseline: bool = False) -> tuple[str | None, list[FileCase]]:
    """The first performance file under `root` that yields cases, and its cases."""
    for rel in PERFORMANCE_REPORTS:
        path = root / rel
        if path.is_file():
            cases = read_cases(path, family, baseline)
            if cases:
                return rel, cases
    return None, []


def step_report_problem(root: Path, step: str) -> str | None:
    """What is wrong with the step's own report (`build/<step>_report.json`), if it wrote one."""
    rel = STEP_REPORTS.get(step)
    if rel is None or not (root / rel).is_file():
        return None
    try:
        data = json.loads((root / rel).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return f"{rel} is not valid JSON"
    if not isinstance(data, dict) or data.get("status") != "ok":
        error = data.get("error") if isinstance(data, dict) else None
        status = data.get("status") if isinstance(data, dict) else data
        return f"{rel} says {status!r}" + (f": {error}" if error else "")
    return None


def geak_latency(lines: list[str]) -> float | None:
    """The one `GEAK_RESULT_LATENCY_MS=` line's value; None when there is none; an error when
    there are several."""
    values = [match.group(1) for line in lines if (match := GEAK_LINE.match(line.rstrip("\r\n")))]
    if len(values) > 1:
        raise ResultFileError(f"{len(values)} GEAK_RESULT_LATENCY_MS lines were printed; exactly one is allowed")
    return float(values[0]) if values else None


def paired_numbers(record: dict[str, Any]) -> dict[str, float] | None:
    """The `aka_*` numbers of a record our helpers paired; None when not paired. Numbers that
    are not positive and finite are a `ResultFileError` (our helpers never write them)."""
    if record.get("aka_pairing") != "paired":
        return None
    numbers = {key: _float(record.get(key)) for key in PAIRED_KEYS}
    bad = [key for key, value in numbers.items() if value is None or not math.isfinite(value) or value <= 0]
    if bad:
        raise ResultFileError(f"paired timing field {bad[0]} is not a positive finite number")
    return {key: float(value) for key, value in numbers.items() if value is not None}
