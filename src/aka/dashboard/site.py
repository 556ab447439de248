"""`aka dashboard RUN... --out DIR`: a static site that works from `file://`, no server needed.

DIR gets `index.html` (the data and the chart figures embedded as JSON: a page opened from a
file may not fetch others), `assets/` (plotly.js once, the page's script and style) and
`data.json` (what the page was built from, for tools and tests). `single_file` inlines the assets
instead, for one file to mail. The page makes no network request.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from aka.dashboard.data import SiteData, load_site_data
from aka.dashboard.figures import plotly_js, site_figures
from aka.errors import AkaError
from aka.results.task_result import write_text_atomic

INDEX_NAME = "index.html"
DATA_NAME = "data.json"
ASSETS_DIR = "assets"
PLOTLY_NAME = "plotly.min.js"
APP_NAME = "app.js"
STYLE_NAME = "style.css"


def _asset(name: str) -> str:
    return resources.files("aka.dashboard").joinpath(ASSETS_DIR).joinpath(name).read_text(encoding="utf-8")


def embedded_json(value: object) -> str:
    """JSON that is safe inside a `<script>` element: no `</script>` or `<!--` can end it early."""
    return (
        json.dumps(value, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    )


def render_page(data: SiteData, single_file: bool) -> str:
    figures = site_figures(data)
    if single_file:
        plotly = f"<script>{plotly_js()}</script>"
        app = f"<script>{_asset(APP_NAME)}</script>"
        style = f"<style>{_asset(STYLE_NAME)}</style>"
    else:
        plotly = f'<script src="{ASSETS_DIR}/{PLOTLY_NAME}"></script>'
        app = f'<script src="{ASSETS_DIR}/{APP_NAME}"></script>'
        style = f'<link rel="stylesheet" href="{ASSETS_DIR}/{STYLE_NAME}">'
    page = _asset(INDEX_NAME)
    for mark, text in (
        ("{{STYLE}}", style),
        ("{{DATA}}", embedded_json(data.model_dump(mode="json"))),
        ("{{FIGURES}}", embedded_json(figures)),
        ("{{PLOTLY}}", plotly),
        ("{{APP}}", app),
    ):
        page = page.replace(mark, text, 1)
    return page


def build_site(run_dirs: list[Path], out: Path, single_file: bool = False) -> Path:
    """Write the dashboard of `run_dirs` into `out`; returns its index.html."""
    if out.exists() and not out.is_dir():
        raise AkaError(f"--out {out}: a file is in the way; name a folder")
    data = load_site_data(run_dirs, out)
    page = render_page(data, single_file)
    out.mkdir(parents=True, exist_ok=True)
    if not single_file:
        assets = out / ASSETS_DIR
        write_text_atomic(assets / PLOTLY_NAME, plotly_js())
        write_text_atomic(assets / APP_NAME, _asset(APP_NAME))
        write_text_atomic(assets / STYLE_NAME, _asset(STYLE_NAME))
    write_text_atomic(out / DATA_NAME, data.model_dump_json(indent=1) + "\n")
    write_text_atomic(out / INDEX_NAME, page)
    return out / INDEX_NAME


def built_run_dirs(out: Path) -> list[Path]:
    """The run directories a built site shows (its data.json), for `--serve` of a site built before."""
    path = out / DATA_NAME
    try:
        return [Path(d) for d in SiteData.model_validate_json(path.read_text(encoding="utf-8")).run_dirs]
    except FileNotFoundError:
        raise AkaError(
            f"--out {out}: no dashboard here ({DATA_NAME} missing); build one with `aka dashboard RUN... --out DIR`"
        ) from None
    except (OSError, ValueError) as exc:
        raise AkaError(
            f"{path}: not a dashboard's data ({type(exc).__name__}); build it again with "
            "`aka dashboard RUN... --out DIR`"
        ) from None
