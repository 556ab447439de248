"""The GPU benchmarks' report side (`--merge`), on synthetic rows: it must run on CPU-only CI."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _measurement(rng: random.Random, offset: float, pairs: int = 40) -> dict[str, object]:
    base = [0.1 * (1 + rng.gauss(0, 0.005)) for _ in range(pairs)]
    cand = [b * (1 + offset) * (1 + rng.gauss(0, 0.002)) for b in base]
    return {"method": "paired_cuda_event_l2flush", "seconds": 0.1, "base": base, "cand": cand,
            "first": [(i + i // 10) % 2 == 0 for i in range(pairs)]}


def _merge(script: str, rows: list[dict[str, object]], tmp_path: Path) -> str:
    shard = tmp_path / "rows.json"
    shard.write_text(json.dumps(rows))
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--merge", str(shard),
                           "--out", str(tmp_path / "report.md")], capture_output=True, text=True, check=True)
    assert (tmp_path / "report.md").read_text() in done.stdout
    return done.stdout


def test_code_placement_finds_an_offset_that_persists_in_one_load_only(tmp_path: Path) -> None:
    rng = random.Random(1)
    rows = [{"task": f"t{case}", "case": "c", "variants": {
        "c0": [_measurement(rng, 0.0) for _ in range(2)],
        "c1": [_measurement(rng, offset) for _ in range(2)],
    }} for case, offset in enumerate([0.01, -0.01, 0.008, -0.012, 0.0, 0.011])]
    report = _merge("code_placement.py", rows, tmp_path)
    ratios = {line.split("|")[1].strip(): float(line.split("|")[5]) for line in report.splitlines()
              if line.startswith("| c")}
    assert ratios["c1"] > 10 * max(ratios["c0"], 0.1)


def test_timer_offsets_reports_every_variant(tmp_path: Path) -> None:
    rng = random.Random(2)
    rows = [{"task": "t", "case": "c", "variants": {name: [_measurement(rng, 0.0) for _ in range(3)]
                                                    for name in ("copies", "same")}}]
    report = _merge("timer_offsets.py", rows, tmp_path)
    assert "| copies | trimmed mean 20% |" in report and "| same |" in report
