"""`aka import kernelbench`'s import reports as one markdown table: a level probed over several
device calls (each call's report holds the problems it reached; a later report wins).

    PYTHONPATH=src python3 scripts/import_report_table.py REPORT.yaml... [--out table.md]

Rows in KernelBench's problem order, each problem's status and its non-PASS findings, and the
counts. Exits 1 when a problem is FAIL, so a sweep can say whether every reference is sound.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml


def merged(reports: list[Path]) -> dict[str, dict[str, Any]]:
    """Problem name -> its probe (status, seconds, checks), the last report's where several hold it."""
    rows: dict[str, dict[str, Any]] = {}
    for path in reports:
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("tasks"), dict):
            raise SystemExit(f"{path}: not an import report (no `tasks` mapping); pass import_report.yaml files")
        for name, probe in data["tasks"].items():
            rows[str(name)] = {**probe, "report": str(path)}
    return rows


def _order(name: str) -> tuple[int, str]:
    head = name.split("_", 1)[0]
    return (int(head), name) if head.isdigit() else (sys.maxsize, name)


def render(rows: dict[str, dict[str, Any]]) -> str:
    counts = {status: sum(r["status"] == status for r in rows.values()) for status in ("PASS", "WARN", "FAIL")}
    lines = [
        f"{len(rows)} problems: {counts['PASS']} PASS, {counts['WARN']} WARN, {counts['FAIL']} FAIL.",
        "",
        "| problem | status | seconds | findings |",
        "|---|---|---|---|",
    ]
    for name in sorted(rows, key=_order):
        row = rows[name]
        bad = [c for c in row.get("checks", []) if c["status"] != "PASS"]
        findings = "; ".join(f"{c['name']}: {c['message']}"[:200].replace("|", "/") for c in bad)
        lines.append(f"| {name} | {row['status']} | {float(row.get('seconds', 0.0)):.1f} | {findings} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rows = merged(args.reports)
    text = render(rows)
    if args.out:
        args.out.write_text(text)
    print(text, end="")
    return 1 if any(r["status"] == "FAIL" for r in rows.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
