"""bench/notebook_saves.py runs what the notebook tests and the matrix execute, a row's files in its work directory."""

from __future__ import annotations

from bench.notebook_saves import ITEMS, notebook_and_params
from lab.matrix import TEMPLATE
from tests.notebooks.test_notebooks import SMALL


def test_a_matrix_row_writes_its_report_and_runs_in_the_work_directory(tmp_path):
    path, params = notebook_and_params("matrix-row", tmp_path)
    assert path == TEMPLATE
    assert params["REPORT"].startswith(str(tmp_path)) and params["RUNS_DIR"].startswith(str(tmp_path))
    assert params["INTERACTIVE"] is False


def test_a_notebook_runs_with_the_tests_small_parameters(tmp_path):
    for item in ITEMS:
        if item == "matrix-row":
            continue
        path, params = notebook_and_params(item, tmp_path)
        assert path.is_file() and path.stem == item
        assert params == {**SMALL[item], "INTERACTIVE": False}
