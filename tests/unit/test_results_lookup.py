"""Notebook 04's results table: found from any working directory, the demo's when no full matrix exists."""

import pytest

from lab.errors import LabError
from lab.matrix import report


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "checkout"
    (root / "notebooks").mkdir(parents=True)
    monkeypatch.setattr(report, "project_root", lambda: root)
    monkeypatch.chdir(root / "notebooks")  # where Jupyter and papermill run a notebook
    return root


def write(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("name,expect\n")
    return path


def test_no_table_names_every_place_and_the_command(project):
    with pytest.raises(LabError) as e:
        report.find_results("")
    msg = str(e.value)
    assert "data/results/matrix.csv" in msg and "data/results/demo/matrix.csv" in msg and "make demo" in msg


def test_falls_back_to_the_demo_then_prefers_the_full_matrix(project):
    demo = write(project / "data/results/demo/matrix.csv")
    assert report.find_results("") == demo
    full = write(project / "data/results/matrix.csv")
    assert report.find_results("") == full


def test_a_relative_path_works_from_the_repository_root_or_here(project, monkeypatch):
    mine = write(project / "mine/table.csv")
    assert report.find_results("mine/table.csv") == mine  # from notebooks/: looked up at the root
    monkeypatch.chdir(project)
    assert report.find_results("mine/table.csv") == mine
    assert report.results_dir("") == project / "data/results"


def test_a_fresh_clone_reads_the_committed_reference_last(project):
    reference = write(project / report.REFERENCE_RESULTS)
    (project / "docs/reference/matrix.json").write_text('{"date": "2026-01-02", "lab": "0.1.0", "cores": 2}')
    assert report.find_results("") == reference and report.is_reference(reference)
    note = report.results_note(reference)
    assert "committed reference" in note and "2026-01-02" in note and "lab matrix" in note
    demo = write(project / "data/results/demo/matrix.csv")
    assert report.find_results("") == demo and not report.is_reference(demo)
    assert "committed reference" not in report.results_note(demo)


def test_the_reference_in_this_checkout_is_a_real_default_matrix():
    import json

    from lab.matrix.grid import load_grid
    from lab.matrix.report import read_results

    root = report.project_root()
    table = read_results(root / report.REFERENCE_RESULTS)
    assert set(table["name"]) == {s.name for s in load_grid(None).scenarios}
    assert not table.astype(str).apply(lambda c: c.str.contains("/tmp/")).any().any()
    meta = json.loads((root / "docs/reference/matrix.json").read_text())
    assert {"lab", "spark", "kafka", "java", "date", "cores", "command"} <= set(meta)
