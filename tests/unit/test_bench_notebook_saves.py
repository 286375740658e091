"""bench/notebook_saves.py runs what the notebook tests and the matrix execute, a row's files in its work directory."""

from __future__ import annotations

import pytest

from bench.notebook_saves import ITEMS, notebook_and_params
from lab.matrix.runner import TEMPLATE
from tests.notebooks.test_notebooks import SMALL


def test_a_matrix_row_writes_its_report_and_runs_in_the_work_directory(tmp_path):
    path, params = notebook_and_params("matrix-row", tmp_path)
    assert path == TEMPLATE
    assert params["REPORT"].startswith(str(tmp_path)) and params["RUNS_DIR"].startswith(str(tmp_path))
    assert params["INTERACTIVE"] is False


@pytest.mark.parametrize("item", [i for i in ITEMS if i != "matrix-row"])
def test_each_notebook_item_is_a_notebook_the_tests_run(item, tmp_path):
    path, params = notebook_and_params(item, tmp_path)
    assert path.is_file() and path.parent.name == "notebooks"
    assert item in SMALL and params["INTERACTIVE"] is False
