"""Render the semantics grid of a results table as a PNG, headless (the README's picture).

Plotly's static export needs kaleido, which the lab does not install; this writes
the figure's HTML (plotly.js inlined, so no network) and screenshots it in headless
Chromium through playwright, the browser the browser test uses.

    .venv/bin/python docs/tools/render_grid.py                 # docs/reference/matrix.csv ->
    docs/images/semantics_grid.png .venv/bin/python docs/tools/render_grid.py --results data/results/matrix.csv --out
    grid.png
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# the flags the browser test launches Chromium with: no sandbox (containers), nothing fetched in the background
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
WIDTH = 1500


def render(results: Path, out: Path, width: int = WIDTH) -> Path:
    """Screenshot :func:`lab.views.plots.semantics_grid` of ``results`` into ``out`` (PNG); returns ``out``."""
    from playwright.sync_api import sync_playwright

    from lab.matrix.report import matrix_view, read_results
    from lab.matrix.semantics import build_grid
    from lab.views.plots import semantics_grid

    fig = semantics_grid(build_grid(matrix_view(read_results(results)), results.parent))
    fig.update_layout(width=width)  # fixed, so the picture does not depend on the window
    height = int(fig.layout.height)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        page_file = Path(tmp) / "grid.html"
        fig.write_html(page_file, include_plotlyjs=True, full_html=True, config={"displayModeBar": False})
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": width + 40, "height": height + 40}, device_scale_factor=1)
                page.goto(page_file.as_uri())
                page.wait_for_selector(".plotly-graph-div .main-svg", timeout=30_000)
                page.locator(".plotly-graph-div").screenshot(path=str(out))
            finally:
                browser.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(ROOT / "docs" / "reference" / "matrix.csv"), help="results table (CSV)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "images" / "semantics_grid.png"), help="PNG to write")
    ap.add_argument("--width", type=int, default=WIDTH, help=f"figure width in pixels (default {WIDTH})")
    a = ap.parse_args(argv)
    print(f"written: {render(Path(a.results).resolve(), Path(a.out), a.width)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
