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
    "01_receiver_wal": dict(INTERACTIVE=False, EVENTS=1500, RATE=500, WORKER_FAILURE=False),
    "02_direct_kafka": dict(INTERACTIVE=False, EVENTS=1500, RATE=1000, MAX_BATCH=100),
    "03_structured_streaming": dict(INTERACTIVE=False, EVENTS=1500, RATE=1000, MAX_BATCH=200, SINKS=["transactional"]),
    "04_semantics_matrix": dict(INTERACTIVE=False, RESULTS=str(ROOT / "tests" / "data" / "matrix_with_wrong_row.csv")),
    "05_exactly_once_production": dict(INTERACTIVE=False, PIPELINE="plain", EVENTS=1500, RATE=1000, LOST_ACKS=3, LOSS_AT=0.5),
}
#: Plots each executed notebook must contain (default 3: counts, per-event strip, timeline).
MIN_PLOTS = {"01_receiver_wal": 1, "02_direct_kafka": 4, "04_semantics_matrix": 1, "05_exactly_once_production": 1}


def notebooks():
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_every_notebook_has_small_parameters():
    assert {p.stem for p in notebooks()} == set(SMALL)


def execute(path, runs_dir):
    import nbformat
    import papermill

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / path.name
    papermill.execute_notebook(str(path), str(out), parameters=SMALL[path.stem], cwd=str(path.parent),
                               kernel_name="python3", progress_bar=False)
    return nbformat.read(out, as_version=4)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_notebook_runs_headless(path, runs_dir):
    from nbconvert import HTMLExporter

    nb = execute(path, runs_dir)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    plotly = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(plotly) >= MIN_PLOTS.get(path.stem, 3), "the plots must be in the executed notebook"
    assert all("text/html" in o["data"] for o in plotly), "each plot needs an HTML rendering for static export"
    html, _ = HTMLExporter().from_notebook_node(nb)
    (ARTIFACTS / f"{path.stem}.html").write_text(html)
    assert html.count("Plotly.newPlot") >= MIN_PLOTS.get(path.stem, 3)
    if path.stem != "04_semantics_matrix":
        assert list(runs_dir.glob("*/report.json")), "the notebook's runs go where LAB_RUNS_DIR says"
    else:
        flagged = [l for l in html.split("<tr") if "MISMATCH" in l]
        assert len(flagged) == 1 and "deliberately wrong" in flagged[0] and "#fde0dc" in flagged[0]
        assert html.count("as expected</b>") == 3
