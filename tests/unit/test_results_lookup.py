"""Notebook 04's results table: found from any working directory, the demo's when no full matrix exists."""

import pytest

from lab import report
from lab.errors import LabError


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
