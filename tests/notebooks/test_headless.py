"""The notebook tests' papermill call: the executed notebook is whole on success and on a failing cell."""

from __future__ import annotations

import nbformat
import pytest

from tests.notebooks.headless import execute_headless

pytestmark = pytest.mark.notebook


def notebook(path, *sources):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_every_cell_output_is_in_the_written_notebook(tmp_path):
    src = notebook(tmp_path / "ok.ipynb", "N = 1", "print('cell two', N)", "print('cell three', N + 1)")
    out = tmp_path / "out.ipynb"
    execute_headless(src, out, {"N": 41})
    texts = ["".join(o.get("text", "") for o in c.outputs) for c in nbformat.read(out, as_version=4).cells
             if c.cell_type == "code"]
    assert "cell two 41" in texts[-2] and "cell three 42" in texts[-1]


def test_a_failing_cell_leaves_the_notebook_with_its_traceback(tmp_path):
    from papermill.exceptions import PapermillExecutionError

    src = notebook(tmp_path / "fails.ipynb", "N = 1", "print('before', N)", "raise ValueError(f'bad N={N}')",
                   "print('never')")
    out = tmp_path / "out.ipynb"
    with pytest.raises(PapermillExecutionError, match="bad N=7"):
        execute_headless(src, out, {"N": 7})
    cells = [c for c in nbformat.read(out, as_version=4).cells if c.cell_type == "code"]
    outputs = [o for c in cells for o in c.outputs]
    assert any("before 7" in o.get("text", "") for o in outputs)
    assert any(o.get("output_type") == "error" and o.get("ename") == "ValueError" for o in outputs)
    assert not any("never" in o.get("text", "") for o in outputs)
