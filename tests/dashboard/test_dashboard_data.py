"""`aka dashboard` without a browser: the site's data against the run's own files, the written
site, the server's limits, and every bad input as a one-line error (the browser test is
tests/dashboard/test_dashboard_browser.py)."""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from aka.cli import app
from aka.dashboard.data import load_site_data
from aka.dashboard.serve import site_server
from aka.dashboard.site import build_site, embedded_json
from aka.errors import AkaError
from aka.results.task_result import TaskResult, read_task_result

REPO = Path(__file__).resolve().parents[2]


def _results(run_dir: Path) -> dict[tuple[str, str], TaskResult]:
    found = {}
    for path in run_dir.glob("*/task_result.yaml"):
        result = read_task_result(path)
        found[(str(result.arm), result.task_name)] = result
    return found


def test_site_data_matches_the_run_s_own_files(toy_ab_run: Path, tmp_path: Path) -> None:
    data = load_site_data([toy_ab_run], tmp_path / "site")
    run = toy_ab_run.name
    assert [c.key for c in data.columns] == [f"{run}:noop", f"{run}:sol"]
    results = _results(toy_ab_run)
    for column in data.columns:
        mine = [r for (arm, _), r in results.items() if arm == column.arm]
        correct = [r for r in mine if r.pass_correctness]
        assert (column.stats.tasks, column.stats.correct) == (3, len(correct))
        assert column.stats.geomean_speedup == pytest.approx(
            statistics.geometric_mean([r.speedup_ratio for r in correct])
        )
        assert column.stats.total_score == pytest.approx(sum(r.score for r in mine))
        assert column.smoke_test, "a CPU run is a smoke test"
    words = {(t.column.split(":")[1], t.task): t.verdict for t in data.trials}
    assert words == {
        ("noop", "triton2triton/toy/fast"): "correct-unchanged",
        ("noop", "triton2triton/toy/slow"): "correct-unchanged",
        ("noop", "torch2triton/toy/wrong"): "incorrect",
        ("sol", "triton2triton/toy/fast"): "correct-and-faster",
        ("sol", "triton2triton/toy/slow"): "correct-but-slower",
        ("sol", "torch2triton/toy/wrong"): "no candidate",
    }
    fast = next(t for t in data.trials if t.column.endswith(":sol") and t.task.endswith("fast"))
    recorded = results[("sol", "triton2triton/toy/fast")]
    assert [(c.id, c.speedup, c.ci_low, c.ci_high) for c in fast.cases] == [
        (c.id, c.speedup, c.speedup_ci_low, c.speedup_ci_high) for c in recorded.cases
    ]
    assert fast.heldout is not None and fast.heldout.outcome == "both_pass"
    labels = {link.label for link in fast.links}
    assert {"result", "prompt", "evaluation log", "held-out log"} <= labels
    for link in fast.links:
        assert (tmp_path / "site" / link.href).resolve().is_file(), link
    [comparison] = data.comparisons
    assert comparison.source.endswith("reports/compare/comparison.json")
    [pair] = comparison.pairs
    written = json.loads((toy_ab_run / "reports/compare/comparison.json").read_text())["pairs"][0]
    assert (pair.control, pair.treatment, pair.ratio) == ("noop", "sol", written["speedup_ratio"])
    [validation] = data.validation
    assert validation.summary is not None and validation.summary.overall_status.value == "WARN"
    assert validation.summary.details["passed"] == "1"
    slow = next(r for r in validation.reports if r.subject.endswith("slow"))
    assert [(c.name, c.status, c.message) for c in slow.checks] == [
        ("baseline runs", "PASS", ""),
        ("timing noise", "WARN", "A/A spread 3%"),
    ]


def test_the_site_is_self_contained_and_its_data_is_the_page_s(toy_ab_run: Path, tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        index = build_site([toy_ab_run], tmp_path / "site")
    finally:
        os.umask(old)
    page = index.read_text()
    assert '<script src="assets/plotly.min.js"></script>' in page and "https://cdn" not in page
    embedded = page.split('<script id="site-data" type="application/json">')[1].split("</script>")[0]
    assert json.loads(embedded) == json.loads((tmp_path / "site" / "data.json").read_text())
    assert {p.name for p in (tmp_path / "site" / "assets").iterdir()} == {"plotly.min.js", "app.js", "style.css"}
    assert (index.stat().st_mode & 0o777) == 0o640, "site files follow the umask"
    single = build_site([toy_ab_run], tmp_path / "one", single_file=True).read_text()
    assert "<script src=" not in single and not (tmp_path / "one" / "assets").exists()
    figures = json.loads(page.split('<script id="site-figures" type="application/json">')[1].split("</script>")[0])
    assert set(figures) == {"fig-heatmap", "fig-distributions", "fig-forest-0-0"}
    trace_types = {trace["type"] for figure in figures.values() for trace in figure["data"]}
    assert trace_types <= {"heatmap", "box", "scatter"}, "SVG traces only (WebGL warns without a GPU)"
    heat = figures["fig-heatmap"]["data"][0]
    sol = [c for c in json.loads(embedded)["columns"] if c["arm"] == "sol"][0]
    assert heat["z"][heat["y"].index("triton2triton")][1] == pytest.approx(
        math.log2(sol["families"]["triton2triton"]["geomean_speedup"])
    )


def test_embedded_json_cannot_end_its_script_element() -> None:
    text = embedded_json({"failure": "</script><script>alert(1)</script> & <!--"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"failure": "</script><script>alert(1)</script> & <!--"}


def test_without_aka_compare_s_file_the_comparison_is_computed(toy_ab_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / toy_ab_run.parent.name / toy_ab_run.name
    shutil.copytree(toy_ab_run, copy, symlinks=True)
    shutil.rmtree(copy / "reports" / "compare")
    [computed] = load_site_data([copy], tmp_path / "site").comparisons
    assert computed.source.startswith("computed") and computed.pairs[0].treatment == "sol"
    views = load_site_data([toy_ab_run, copy], tmp_path / "site").comparisons
    assert views[-1].title.startswith("across the runs") and len(views[-1].pairs) == 3


def _error(runs: list[Path], site: Path) -> str:
    with pytest.raises(AkaError) as caught:
        load_site_data(runs, site)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_bad_inputs_are_one_line_errors_naming_the_file_and_field(toy_ab_run: Path, tmp_path: Path) -> None:
    assert "not a run directory" in _error([tmp_path], tmp_path / "site")
    copy = tmp_path / "copy" / toy_ab_run.name
    shutil.copytree(toy_ab_run, copy, symlinks=True)
    compare_file = copy / "reports" / "compare" / "comparison.json"
    compare_file.write_text('{"pairs": "no"}')
    message = _error([copy], tmp_path / "site")
    assert str(compare_file) in message and "aka compare" in message
    compare_file.unlink()
    report = copy / "validation" / "triton2triton_toy_fast" / "validation_report.yaml"
    report.write_text(yaml.safe_dump({"overall_status": "MAYBE"}))
    message = _error([copy], tmp_path / "site")
    assert str(report) in message and "field 'overall_status'" in message and "PASS, WARN or FAIL" in message
    report.write_text(yaml.safe_dump({"overall_status": "PASS", "checks": "all fine"}))
    assert "field 'checks'" in _error([copy], tmp_path / "site")
    report.write_text("overall_status: [unclosed")
    assert "not readable YAML" in _error([copy], tmp_path / "site")
    (copy / "run_manifest.json").write_text("{}")
    assert "run_manifest.json: not a run manifest" in _error([copy], tmp_path / "site")


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_the_server_serves_the_site_and_the_run_s_files_only(toy_ab_run: Path, tmp_path: Path) -> None:
    build_site([toy_ab_run], tmp_path / "site")
    (tmp_path / "secret.txt").write_text("not for the page")
    server, url = site_server(tmp_path / "site", [toy_ab_run], 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert url.startswith("http://127.0.0.1:") and _get(url) == 200
        data = json.loads((tmp_path / "site" / "data.json").read_text())
        link = data["trials"][0]["links"][0]["href"]
        assert _get(url.rsplit("/", 1)[0] + "/" + link) == 200, "a result's file, through its relative link"
        with urllib.request.urlopen(url.rsplit("/", 1)[0] + "/" + link, timeout=10) as response:
            assert link.endswith("task_result.yaml") and response.headers["Content-Type"].startswith("text/plain")
        base = url.split("/", 3)
        root = f"{base[0]}//{base[2]}/"
        assert (
            _get(
                root
                + (tmp_path / "secret.txt")
                .relative_to(Path(os.path.commonpath([tmp_path / "site", toy_ab_run])))
                .as_posix()
            )
            == 404
        )
        assert _get(url.rsplit("/", 1)[0] + "/../../../../../../etc/passwd") == 404
        assert _get(url.rsplit("/", 1)[0] + "/assets/") == 404, "no folder listings"
        assert _get(root) == 200 and _get(url.rsplit("/", 1)[0] + "/") == 200, "/ and the site's folder: the page"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_cli_builds_serves_and_refuses_bad_calls(toy_ab_run: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["dashboard", "--out", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "pass run directories" in missing.output
    nothing = runner.invoke(app, ["dashboard", "--serve", "--out", str(tmp_path / "none")])
    assert nothing.exit_code == 2 and "data.json missing" in nothing.output
    built = runner.invoke(app, ["dashboard", str(toy_ab_run), "--out", str(tmp_path / "site")])
    assert built.exit_code == 0 and built.output.strip() == str(tmp_path / "site" / "index.html"), built.output
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    served = subprocess.Popen(
        [sys.executable, "-m", "aka.cli", "dashboard", "--serve", "--port", "0", "--out", str(tmp_path / "site")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert served.stdout is not None
        line = served.stdout.readline()
        assert line.startswith("serving http://127.0.0.1:"), line + (served.stderr.read() if served.stderr else "")
        url = line.split()[1]
        assert _get(url) == 200
        href = json.loads((tmp_path / "site" / "data.json").read_text())["trials"][0]["links"][0]["href"]
        assert _get(url.rsplit("/", 1)[0] + "/" + href) == 200, "the runs of the site built before are served too"
    finally:
        served.terminate()
        served.wait(timeout=30)


def test_validation_reports_where_agents_and_steps_write_are_not_read(tmp_path: Path) -> None:
    """A CLI agent wrote a forged `validation_report.yaml` in its home and a candidate one in its
    step's scratch that a killed run kept: the dashboard showed their PASS, or crashed on a list
    for a status (red team, session 50). Only folders the platform writes are searched."""
    from aka.dashboard.validation import find_validation
    from aka.errors import AkaError

    forged = "overall_status: PASS\nchecks: []\ntask_name: forged/by/agent\n"
    trial = tmp_path / "run_1" / "triton2triton_toy_answer_1"
    for folder in (trial / "agent_home" / "v", trial / "tmp-compile-x1", trial / "triton-ab12", trial / "builds-3"):
        folder.mkdir(parents=True)
        (folder / "validation_report.yaml").write_text(forged)
    assert find_validation(tmp_path / "run_1") == (None, [])
    (trial / "validation_report.yaml").write_text("overall_status: [PASS]\n")
    with pytest.raises(AkaError, match="field 'overall_status'"):
        find_validation(tmp_path / "run_1")
