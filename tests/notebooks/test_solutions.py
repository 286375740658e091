"""Every exercise's solution runs headless and its measured result bears out the answer it states."""

from __future__ import annotations

import pytest

from lab.lessons.exercises import for_notebook
from tests.conftest import ROOT
from tests.notebooks.headless import execute_headless

pytestmark = pytest.mark.notebook

ARTIFACTS = ROOT / "test-artifacts" / "solutions"
SOLUTIONS = sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb"))


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_holds(path, shared_runs_dir):
    runs_dir = shared_runs_dir
    import nbformat

    from lab.broker import shared as shared_broker

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / path.name
    try:
        # nb.solve raises when a run disagrees with the stated answer: papermill then fails the test
        execute_headless(path, out, dict(INTERACTIVE=False, EVENTS=1500))
    finally:
        left_running = shared_broker.stop_detached(runs_dir / "cluster")
    assert not left_running, "the kernel must stop the cluster it started"
    from nbconvert import HTMLExporter

    nb = nbformat.read(out, as_version=4)
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                if o.get("output_type") == "error"]
    html, _ = HTMLExporter().from_notebook_node(nb)
    (ARTIFACTS / f"{path.stem}.html").write_text(html)  # docs/reference is made from it (lab.lessons.reference)
    for ex in for_notebook(path.stem):
        assert f"✔ <b>{ex.id}</b>: measured <b>" in html, f"exercise {ex.id} was not checked"
