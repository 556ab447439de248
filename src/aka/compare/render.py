"""The comparison as the user reads it: rich tables, markdown, JSON, and two plots beside them.

Plots need matplotlib (the `plots` extra, drawn with the Agg backend, no display needed); without
it the comparison still writes its text and JSON and says how to get the images.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from aka.compare.comparison import ArmSummary, Comparison, PairComparison
from aka.results.task_result import write_text_atomic

JSON_NAME = "comparison.json"
MARKDOWN_NAME = "comparison.md"
DISTRIBUTION_PLOT = "speedup_distribution.png"
SEED_FIELDS = (
    "task_count",
    "average_score",
    "compile_rate",
    "correct_rate",
    "speedup_gt1_rate",
    "average_speedup",
    "median_speedup",
    "std_speedup",
    "geomean_speedup",
)


def _num(value: object, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _p(value: float) -> str:
    return f"{value:.3g}"


def arm_rows(arms: list[ArmSummary]) -> tuple[list[str], list[list[str]]]:
    head = [
        "arm",
        "tasks",
        "repeats",
        "correct",
        "geomean speedup",
        "fast_1",
        "fast_1.2",
        "fast_1.5",
        "fast_2",
        "mean score",
    ]
    rows = [
        [
            a.label,
            str(a.tasks),
            f"{a.repeats:.2f}",
            f"{a.correct_rate:.3f}",
            f"{a.geomean_speedup:.3f}x",
            *(f"{a.fast_p[k]:.3f}" for k in ("1", "1.2", "1.5", "2")),
            f"{a.mean_score:.2f}",
        ]
        for a in arms
    ]
    return head, rows


def seed_rows(arms: list[ArmSummary]) -> tuple[list[str], list[list[str]]]:
    """The seed's aggregate report for every arm, overall and per family (SEED_SPEC 3)."""
    head = ["arm", "group", *SEED_FIELDS]
    rows = []
    for arm in arms:
        for group, stats in [("overall", arm.seed_overall), *sorted(arm.seed_by_family.items())]:
            rows.append([arm.label, group, *(_num(getattr(stats, f)) for f in SEED_FIELDS)])
    return head, rows


def pair_rows(pair: PairComparison) -> tuple[list[str], list[list[str]]]:
    head = ["metric (treatment - control)", "estimate", "95% CI", "p", "Holm p"]
    ls, c, s = pair.log_speedup, pair.correctness, pair.score
    rows = [
        [
            "log-speedup (t)",
            f"{ls.mean:+.4f}",
            f"{ls.low:+.4f} .. {ls.high:+.4f}",
            _p(ls.p_value),
            _p(pair.holm["log_speedup_t"]),
        ],
        [
            "log-speedup (bootstrap over tasks)",
            f"{ls.mean:+.4f}",
            f"{pair.bootstrap_low:+.4f} .. {pair.bootstrap_high:+.4f}",
            "",
            "",
        ],
        ["log-speedup (Wilcoxon signed-rank)", "", "", _p(pair.wilcoxon_p), _p(pair.holm["log_speedup_wilcoxon"])],
        [
            "geomean speedup ratio",
            f"{pair.speedup_ratio:.4f}x",
            f"{pair.speedup_ratio_low:.4f} .. {pair.speedup_ratio_high:.4f}",
            "",
            "",
        ],
        [
            "correctness rate (exact McNemar)",
            f"{c.mean:+.4f}",
            f"{c.low:+.4f} .. {c.high:+.4f}",
            _p(pair.mcnemar_p),
            _p(pair.holm["correctness_mcnemar"]),
        ],
        ["score (t)", f"{s.mean:+.3f}", f"{s.low:+.3f} .. {s.high:+.3f}", _p(s.p_value), _p(pair.holm["score_t"])],
    ]
    return head, rows


def pair_facts(pair: PairComparison) -> list[str]:
    power = pair.power
    corr = "n/a" if pair.correlation is None else f"{pair.correlation:.3f}"
    repeats = (
        "unknown (needs K >= 2)"
        if power.within_difference is None
        else str(power.repeats_needed)
        if power.repeats_needed is not None
        else "none suffices: add tasks"
    )
    return [
        f"paired tasks: {pair.tasks}; wins/losses/ties: {pair.wins}/{pair.losses}/{pair.ties} "
        f"(ties: inside the recorded timing intervals); correct only in treatment/control: "
        f"{pair.correct_b_only}/{pair.correct_a_only}; arms' correlation: {corr}",
        f"sd of per-task differences {power.sd_diff:.4f} (within-task variance: control "
        f"{_num(power.within_control, 5)}, treatment {_num(power.within_treatment, 5)}, of a round's "
        f"difference {_num(power.within_difference, 5)}; between tasks {_num(power.between_tasks, 5)})",
        f"minimum detectable ratio (80% power): {_num(power.mde_ratio, 4)}x; power at {power.target_ratio:g}x: "
        f"{power.power_at_target:.2f}; repeats per arm for {power.target_ratio:g}x: {repeats}",
    ]


def _markdown_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


def render_markdown(comparison: Comparison) -> str:
    lines = [
        "# aka compare",
        "",
        "## Arms",
        "",
        *_markdown_table(*arm_rows(comparison.arms)),
        "",
        "## Seed aggregates",
        "",
        *_markdown_table(*seed_rows(comparison.arms)),
    ]
    for pair in comparison.pairs:
        lines += [
            "",
            f"## {pair.treatment} vs {pair.control}",
            "",
            f"**Verdict:** {pair.verdict}",
            "",
            *_markdown_table(*pair_rows(pair)),
            "",
            *(f"- {fact}" for fact in pair_facts(pair)),
            *(f"- warning: {w}" for w in pair.warnings),
            "",
            "### Per task",
            "",
            *_markdown_table(
                [
                    "task",
                    "control speedup",
                    "treatment speedup",
                    "control correct",
                    "treatment correct",
                    "log diff",
                    "tie band",
                    "outcome",
                ],
                [
                    [
                        r.task,
                        f"{r.control_speedup:.3f}",
                        f"{r.treatment_speedup:.3f}",
                        f"{r.control_correct:.2f}",
                        f"{r.treatment_correct:.2f}",
                        f"{r.log_diff:+.4f}",
                        f"{r.tie_band:.4f}",
                        r.outcome,
                    ]
                    for r in pair.rows
                ],
            ),
        ]
    return "\n".join(lines) + "\n"


def _rich_table(title: str, head: list[str], rows: list[list[str]]) -> Table:
    table = Table(*head, title=title, title_justify="left")
    for row in rows:
        table.add_row(*row)
    return table


def print_comparison(comparison: Comparison, console: Console) -> None:
    console.print(_rich_table("Arms", *arm_rows(comparison.arms)))
    console.print(_rich_table("Seed aggregates", *seed_rows(comparison.arms)))
    for pair in comparison.pairs:
        console.print(_rich_table(f"{pair.treatment} vs {pair.control}", *pair_rows(pair)))
        for fact in pair_facts(pair):
            console.print(f"  {fact}", highlight=False)
        for warning in pair.warnings:
            console.print(f"  [yellow]warning:[/] {warning}", highlight=False)
        console.print(f"[bold]verdict:[/] {pair.verdict}", highlight=False)


def _slug(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in label)


def write_plots(comparison: Comparison, out_dir: Path) -> list[Path]:
    """A forest plot per pair (per-task log-speedup differences with their tie bands, and the mean
    with its 95% interval) and one speedup distribution plot (per-task geomean speedups, per arm)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for pair in comparison.pairs:
        rows = sorted(pair.rows, key=lambda r: r.log_diff)
        fig, ax = plt.subplots(figsize=(7, max(2.5, 0.25 * len(rows) + 1.5)))
        ys = list(range(len(rows)))
        ax.errorbar([r.log_diff for r in rows], ys, xerr=[r.tie_band for r in rows], fmt="o", ms=3, color="tab:blue")
        ls = pair.log_speedup
        ax.errorbar([ls.mean], [-1.5], xerr=[[ls.mean - ls.low], [ls.high - ls.mean]], fmt="D", color="tab:red")
        ax.axvline(0.0, color="grey", lw=0.8)
        ax.set_yticks([*ys, -1.5], [*(r.task for r in rows), "mean (95% CI)"], fontsize=7)
        ax.set_xlabel(f"log-speedup difference ({pair.treatment} - {pair.control})")
        ax.set_title(
            f"{pair.treatment} vs {pair.control}: ratio {pair.speedup_ratio:.3f}x "
            "(blue bars: the tasks' timing tie bands; red: the mean with its 95% t-interval)",
            fontsize=8,
        )
        fig.tight_layout()
        path = out_dir / f"forest_{_slug(pair.treatment)}_vs_{_slug(pair.control)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    fig, ax = plt.subplots(figsize=(7, 4))
    first = comparison.pairs[0] if comparison.pairs else None
    if first is not None:
        per_arm = {first.control: [r.control_speedup for r in first.rows]}
        for pair in comparison.pairs:
            per_arm[pair.treatment] = [r.treatment_speedup for r in pair.rows]
        for label, values in per_arm.items():
            ordered = sorted(values)
            ax.step(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], where="post", label=label)
        ax.set_xscale("log")
        ax.axvline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("per-task geomean speedup (failed attempts count as the declared convention)")
        ax.set_ylabel("share of tasks at or below")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / DISTRIBUTION_PLOT
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


def write_outputs(comparison: Comparison, out_dir: Path, plots: bool) -> tuple[list[Path], str | None]:
    """comparison.json, comparison.md and (with matplotlib) the plots; the note says why plots are missing."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / JSON_NAME, comparison.model_dump_json(indent=2) + "\n")
    write_text_atomic(out_dir / MARKDOWN_NAME, render_markdown(comparison))
    written = [out_dir / JSON_NAME, out_dir / MARKDOWN_NAME]
    if not plots:
        return written, None
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return written, "plots skipped: matplotlib is not installed (pip install 'agentkernelarena[plots]')"
    return written + write_plots(comparison, out_dir), None
