"""The dashboard's charts, built with plotly from the site's data and embedded as figure JSON
(`Plotly.newPlot` draws them in the page): the per-family heatmap, the speedup distributions and
one forest plot per A/B pair. SVG trace types only: WebGL traces (`*gl`) need a GPU in the
browser and warn without one.

Speedups are shown on a log scale (a 2x gain and a 2x loss are the same distance from 1.0).
"""

from __future__ import annotations

import json
import math
from typing import Any

from aka.dashboard.data import Pair, SiteData

Figure = dict[str, Any]
HEATMAP_COLORS = "RdYlGn"
LAYOUT = {
    "margin": {"l": 170, "r": 30, "t": 50, "b": 60},
    "font": {"size": 12},
    "paper_bgcolor": "white",
    "plot_bgcolor": "white",
}


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError:
        from aka.errors import AkaError

        raise AkaError("aka dashboard needs plotly: pip install 'agentkernelarena[dashboard]'") from None
    return go


def _json(figure: Any) -> Figure:
    data: Figure = json.loads(figure.to_json())
    return data


def _smoke(data: SiteData) -> str:
    return " (smoke test: CPU timings)" if any(c.smoke_test for c in data.columns) else ""


def heatmap(data: SiteData) -> Figure:
    """Families x columns: the geometric-mean speedup of the correct tasks (colour: its log2), and
    how many of the family's tasks were correct."""
    go = _plotly()
    families = sorted({f for c in data.columns for f in c.families})
    keys = [c.key for c in data.columns]
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    for family in families:
        z_row: list[float | None] = []
        text_row: list[str] = []
        for column in data.columns:
            stats = column.families.get(family)
            if stats is None:
                z_row.append(None)
                text_row.append("")
                continue
            geomean = stats.geomean_speedup
            z_row.append(math.log2(geomean) if geomean else None)
            shown = f"{geomean:.3f}x" if geomean else "n/a"
            text_row.append(f"{shown}<br>{stats.correct}/{stats.tasks} correct")
        z.append(z_row)
        text.append(text_row)
    span = max([1.0, *(abs(v) for row in z for v in row if v is not None)])  # at least 0.5x..2x
    figure = go.Figure(
        go.Heatmap(
            z=z,
            x=keys,
            y=families,
            text=text,
            texttemplate="%{text}",
            colorscale=HEATMAP_COLORS,
            zmid=0.0,
            zmin=-span,
            zmax=span,
            hoverongaps=False,
            colorbar={"title": {"text": "log2 speedup"}},
            hovertemplate="%{y} in %{x}<br>%{text}<extra></extra>",
        )
    )
    figure.update_layout(
        title={"text": f"Geometric-mean speedup per family{_smoke(data)}"},
        height=140 + 45 * max(len(families), 1),
        xaxis={"type": "category"},
        yaxis={"type": "category", "autorange": "reversed"},
        **LAYOUT,
    )
    return _json(figure)


def distributions(data: SiteData) -> Figure:
    """Per column, the speedups of its correct tasks (one point per trial) over a box."""
    go = _plotly()
    figure = go.Figure()
    for column in data.columns:
        trials = [t for t in data.trials if t.column == column.key and t.speedup is not None]
        figure.add_trace(
            go.Box(
                x=[t.speedup for t in trials],
                name=column.key,
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                orientation="h",
                text=[t.task for t in trials],
                hovertemplate="%{text}: %{x:.3f}x<extra>%{fullData.name}</extra>",
            )
        )
    figure.add_vline(x=1.0, line={"color": "grey", "width": 1, "dash": "dot"})
    figure.update_layout(
        title={"text": f"Speedup of each correct task{_smoke(data)}"},
        showlegend=False,
        xaxis={"type": "log", "title": {"text": "speedup (log scale)"}},
        height=160 + 60 * max(len(data.columns), 1),
        **LAYOUT,
    )
    return _json(figure)


def forest(pair: Pair) -> Figure:
    """One A/B pair: each task's log-speedup difference with its tie band, and the mean with its
    95% interval (`aka compare`'s primary endpoint)."""
    go = _plotly()
    rows = sorted(pair.rows, key=lambda r: r.log_diff)
    mean_label = "mean (95% CI)"
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            x=[r.log_diff for r in rows],
            y=[r.task for r in rows],
            mode="markers",
            name="task",
            error_x={"type": "data", "array": [r.tie_band for r in rows], "visible": True},
            text=[f"{r.outcome}: {r.treatment_speedup:.3f}x vs {r.control_speedup:.3f}x" for r in rows],
            hovertemplate="%{y}: %{x:+.3f} (%{text})<extra></extra>",
        )
    )
    figure.add_trace(
        go.Scatter(
            x=[pair.log_mean],
            y=[mean_label],
            mode="markers",
            name=mean_label,
            marker={"symbol": "diamond", "size": 11},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [pair.log_high - pair.log_mean],
                "arrayminus": [pair.log_mean - pair.log_low],
                "visible": True,
            },
            hovertemplate=f"ratio {pair.ratio:.3f}x ({pair.ratio_low:.3f}-{pair.ratio_high:.3f})<extra></extra>",
        )
    )
    figure.add_vline(x=0.0, line={"color": "grey", "width": 1})
    figure.update_layout(
        title={
            "text": f"{pair.treatment} vs {pair.control}: geomean ratio {pair.ratio:.3f}x "
            f"(95% CI {pair.ratio_low:.3f}-{pair.ratio_high:.3f})"
        },
        xaxis={"title": {"text": f"log-speedup difference ({pair.treatment} - {pair.control})"}},
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": [mean_label, *(r.task for r in rows)]},
        showlegend=False,
        height=160 + 28 * (len(rows) + 1),
        **LAYOUT,
    )
    return _json(figure)


def site_figures(data: SiteData) -> dict[str, Figure]:
    """Every chart of the site, by the id of the element it is drawn in."""
    figures = {"fig-heatmap": heatmap(data), "fig-distributions": distributions(data)}
    for i, view in enumerate(data.comparisons):
        for j, pair in enumerate(view.pairs):
            figures[f"fig-forest-{i}-{j}"] = forest(pair)
    return figures


def plotly_js() -> str:
    """plotly.js, as plotly for Python ships it (written once beside the page)."""
    _plotly()
    from plotly.offline import get_plotlyjs

    text: str = get_plotlyjs()
    return text
