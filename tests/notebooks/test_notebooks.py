"""Every notebook runs headless through papermill with small parameters, plots rendered in the HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.notebook

ARTIFACTS = ROOT / "test-artifacts" / "notebooks"

#: Small parameters per notebook; every notebook must be listed.
SMALL = {
    "00_start_here": dict(INTERACTIVE=False, EVENTS=1500, RATE=1000, CRASH_AT=1.0),
}


def notebooks():
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_every_notebook_has_small_parameters():
    assert {p.stem for p in notebooks()} == set(SMALL)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_notebook_runs_headless(path, runs_dir):
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / path.name
    papermill.execute_notebook(str(path), str(out), parameters=SMALL[path.stem], cwd=str(path.parent),
                               kernel_name="python3", progress_bar=False)
    nb = nbformat.read(out, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    plotly = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(plotly) >= 3, "the plots must be in the executed notebook"
    assert all("text/html" in o["data"] for o in plotly), "each plot needs an HTML rendering for static export"
    html, _ = HTMLExporter().from_notebook_node(nb)
    (ARTIFACTS / f"{path.stem}.html").write_text(html)
    assert html.count("Plotly.newPlot") >= 3
    assert list(runs_dir.glob("*/report.json")), "the notebook's runs go where LAB_RUNS_DIR says"
