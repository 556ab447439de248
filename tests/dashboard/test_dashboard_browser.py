"""The dashboard in a real headless Chromium: Debian's package (`make install-test` installs it),
driven by playwright on that binary (never `playwright install`, which downloads a browser).

The site is built from a real two-arm run on toy tasks (tests/toy_runs.py) and loaded once for
the module (parsing plotly.js is the slow part); each test starts from the overview. Any console
error or warning, uncaught exception, failed request or request that is not for a local file
fails the test it happens in. The numbers on the page are checked against the run's
`task_result.yaml` files and `aka compare`'s comparison.json, read here on their own.

Skipped only where no Chromium binary exists. Screenshots go to $AKA_TEST_ARTIFACTS (default
test-artifacts/): the README's docs/images/dashboard.png is dashboard-overview.png from here.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aka.dashboard.site import build_site
from aka.reports.writers import failure_text
from aka.results.task_result import TaskResult, read_task_result

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("AKA_TEST_ARTIFACTS", REPO / "test-artifacts"))
pytestmark = pytest.mark.browser


def _chromium() -> str | None:
    for candidate in (
        os.environ.get("CHROMIUM"),
        "/usr/lib/chromium/chromium",
        "/usr/lib/chromium/chromium-headless-shell",
        shutil.which("chromium"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _watch(page: Any, problems: list[str]) -> None:
    def console(message: Any) -> None:
        if message.type in ("error", "warning"):
            problems.append(f"console.{message.type}: {message.text}")

    def request(sent: Any) -> None:
        if not sent.url.startswith(("file:", "data:", "blob:")):
            problems.append(f"network request: {sent.url}")

    page.on("console", console)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"requestfailed: {r.url} {r.failure}"))
    page.on("request", request)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium binary (make install-test: apt-get install --no-install-recommends chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable)
        print(f"chromium {launched.version} at {executable}")
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def site(toy_ab_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_site([toy_ab_run], tmp_path_factory.mktemp("dashboard") / "site").parent


@pytest.fixture(scope="module")
def loaded(browser: Any, site: Path) -> Iterator[tuple[Any, list[str], list[str]]]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    _watch(page, problems)
    page.goto((site / "index.html").as_uri())
    page.wait_for_selector("body[data-ready='1']")
    yield page, problems, list(problems)
    context.close()


@pytest.fixture
def page(loaded: tuple[Any, list[str], list[str]]) -> Iterator[Any]:
    shown, problems, _ = loaded
    shown.evaluate("location.hash = '#overview'")
    shown.fill("#filter", "")
    shown.select_option("#family-filter", "")
    shown.select_option("#verdict-filter", "")
    shown.wait_for_selector("#view-overview", state="visible")
    problems.clear()
    yield shown
    assert not problems, problems


def _results(run_dir: Path) -> list[TaskResult]:
    return [read_task_result(p) for p in sorted(run_dir.glob("*/task_result.yaml"))]


def _screenshot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.mouse.move(0, 0)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_the_page_loads_clean_and_its_numbers_are_the_results(loaded: Any, page: Any, toy_ab_run: Path) -> None:
    assert not loaded[2], f"problems while loading: {loaded[2]}"
    assert page.title() == "aka dashboard"
    assert "Smoke test" in page.text_content("#smoke-banner") and page.is_visible("#smoke-banner")
    run = toy_ab_run.name
    rows = page.locator("#leaderboard tbody tr")
    assert rows.count() == 2
    for arm in ("noop", "sol"):
        mine = [r for r in _results(toy_ab_run) if r.arm == arm]
        correct = [r for r in mine if r.pass_correctness]
        row = page.locator(f'#leaderboard tbody tr[data-column="{run}:{arm}"]')

        def cell(field: str, row: Any = row) -> str:
            return str(row.locator(f'td[data-field="{field}"] .value').text_content())

        assert cell("tasks") == str(len(mine))
        assert cell("correct") == str(len(correct))
        assert cell("geomean") == f"{statistics.geometric_mean([r.speedup_ratio for r in correct]):.3f}x"
        assert cell("total-score") == f"{sum(r.score for r in mine):.1f}"
        assert "smoke test" in str(row.locator('td[data-field="geomean"]').text_content())
    assert page.locator('#leaderboard tr[data-column$=":sol"] td[data-field="faster"] .value').text_content() == "1"
    assert page.locator('#leaderboard tr[data-column$=":sol"] td[data-field="slower"] .value').text_content() == "1"
    page.wait_for_selector("#fig-heatmap .main-svg")
    z = page.evaluate("document.getElementById('fig-heatmap').data[0].z")
    assert len(z) == 2 and all(len(row) == 2 for row in z), "two families x two arms"
    assert page.locator("#matrix tbody tr").count() == 3
    _screenshot(page, "dashboard-overview.png")


def test_filters_narrow_the_task_matrix(page: Any) -> None:
    rows = page.locator("#matrix tbody tr:not(.hidden)")
    page.fill("#filter", "slow")
    assert rows.count() == 1 and page.text_content("#shown") == "showing 1 of 3 tasks"
    page.fill("#filter", "")
    page.select_option("#family-filter", "torch2triton")
    assert rows.count() == 1 and rows.first.get_attribute("data-task") == "torch2triton/toy/wrong"
    page.select_option("#family-filter", "")
    page.select_option("#verdict-filter", "correct-but-slower")
    assert [rows.nth(i).get_attribute("data-task") for i in range(rows.count())] == ["triton2triton/toy/slow"]
    page.select_option("#verdict-filter", "")
    assert rows.count() == 3 and page.text_content("#shown") == "showing 3 of 3 tasks"


def test_a_task_s_cases_are_one_click_from_the_overview(page: Any, toy_ab_run: Path, site: Path) -> None:
    recorded = next(r for r in _results(toy_ab_run) if r.arm == "sol" and r.task_name == "triton2triton/toy/fast")
    page.click(f'a.cell[data-column="{toy_ab_run.name}:sol"][data-task="triton2triton/toy/fast"]')
    page.wait_for_selector("#view-task", state="visible")
    assert page.text_content("#task-title") == f"triton2triton/toy/fast in {toy_ab_run.name}:sol"
    assert page.text_content("#task-trials .badge") == "correct-and-faster"
    speedups = page.locator("table.cases").first.locator("td.speedup").all_text_contents()
    intervals = page.locator("table.cases").first.locator("td.interval").all_text_contents()
    assert speedups == [f"{c.speedup:.3f}x" for c in recorded.cases]
    assert intervals == [f"[{c.speedup_ci_low:.3f}, {c.speedup_ci_high:.3f}]" for c in recorded.cases]
    page.wait_for_selector("#case-plot-0 .main-svg")
    assert recorded.heldout is not None and "held-out cases: both_pass" in page.text_content("#task-trials")
    links = page.locator("#task-trials .links a")
    hrefs = {links.nth(i).text_content(): links.nth(i).get_attribute("href") for i in range(links.count())}
    assert {"result", "prompt", "evaluation log"} <= set(hrefs)
    for href in hrefs.values():
        assert (site / href).resolve().is_file(), href
    _screenshot(page, "dashboard-task.png")
    page.go_back()
    page.wait_for_selector("#view-overview", state="visible")


def test_a_failed_trial_shows_why(page: Any, toy_ab_run: Path) -> None:
    recorded = next(r for r in _results(toy_ab_run) if r.arm == "noop" and r.task_name == "torch2triton/toy/wrong")
    page.click(f'a.cell[data-column="{toy_ab_run.name}:noop"][data-task="torch2triton/toy/wrong"]')
    page.wait_for_selector("#view-task", state="visible")
    assert page.text_content("#task-trials .badge") == "incorrect"
    assert page.text_content("#task-trials .failure") == failure_text(recorded)
    assert page.locator("#task-trials table.cases").count() == 0


def test_the_ab_view_shows_aka_compare_s_numbers(page: Any, toy_ab_run: Path) -> None:
    pair = json.loads((toy_ab_run / "reports/compare/comparison.json").read_text())["pairs"][0]
    page.click('header nav a[data-route="ab"]')
    page.wait_for_selector("#fig-forest-0-0 .main-svg")
    cells = page.locator(".pair-summary tbody td").all_text_contents()
    assert cells[:3] == [
        str(pair["tasks"]),
        f"{pair['speedup_ratio']:.3f}x",
        f"{pair['speedup_ratio_low']:.3f} - {pair['speedup_ratio_high']:.3f}",
    ]
    assert cells[5] == f"{pair['wins']} / {pair['losses']} / {pair['ties']}"
    _screenshot(page, "dashboard-ab.png")


def test_the_held_out_and_validation_views(page: Any, toy_ab_run: Path) -> None:
    page.click('header nav a[data-route="heldout"]')
    with_heldout = [r for r in _results(toy_ab_run) if r.heldout is not None]
    assert page.locator("table.heldout-tasks tbody tr").count() == len(with_heldout) == 2
    page.click('header nav a[data-route="validation"]')
    assert page.text_content("#validation h3 .badge") == "WARN"
    statuses = {
        page.locator("table.validation-reports tbody tr").nth(i).get_attribute("data-subject"): page.locator(
            "table.validation-reports tbody tr"
        )
        .nth(i)
        .locator("td")
        .nth(1)
        .text_content()
        for i in range(2)
    }
    assert statuses == {"triton2triton/toy/fast": "PASS", "triton2triton/toy/slow": "WARN"}
    page.click('header nav a[data-route="distributions"]')
    page.wait_for_selector("#fig-distributions .main-svg")
    assert page.evaluate("document.getElementById('fig-distributions').data.length") == 2


def test_the_watchers_see_console_errors_and_network_requests(browser: Any, tmp_path: Path) -> None:
    """The listeners that guard the tests above do report what they watch for."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<script>console.error('boom'); console.warn('careful')</script>"
        "<script src='https://cdn.example.invalid/x.js'></script><script>undefinedFunction()</script>"
    )
    page = browser.new_page()
    problems: list[str] = []
    _watch(page, problems)
    page.goto(bad.as_uri())
    page.wait_for_timeout(300)
    page.close()
    text = "\n".join(problems)
    assert "boom" in text and "careful" in text and "undefinedFunction" in text, text
    assert "network request: https://cdn.example.invalid/x.js" in text, text
