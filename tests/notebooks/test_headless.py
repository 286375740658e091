"""The notebook tests' papermill call: written once, whole on success and on a failing cell, never stale."""

from __future__ import annotations

import nbformat
import pytest

from tests.notebooks.headless import execute_headless

pytestmark = pytest.mark.notebook


def notebook(path, *sources):
    """A notebook of ``sources`` (the first cell tagged ``parameters``) written to ``path``; its path."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def code_outputs(path):
    """Every output of the code cells of the notebook at ``path``."""
    return [o for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code" for o in c.outputs]


def test_written_once_at_the_end_with_every_cell_output(tmp_path):
    out = tmp_path / "out.ipynb"
    out.write_text("an earlier run's notebook")
    # the running notebook looks for its own output file: papermill's default would have written it by now
    src = notebook(tmp_path / "ok.ipynb", "N = 1\nOUT = ''", "import os\nprint('written yet:', os.path.exists(OUT))",
                   "print('cell three', N + 1)")
    execute_headless(src, out, {"N": 41, "OUT": str(out)})
    texts = "".join(o.get("text", "") for o in code_outputs(out))
    assert "written yet: False" in texts and "cell three 42" in texts


def test_a_failing_cell_leaves_the_notebook_with_its_traceback(tmp_path):
    from papermill.exceptions import PapermillExecutionError

    src = notebook(tmp_path / "fails.ipynb", "N = 1", "print('before', N)", "raise ValueError(f'bad N={N}')",
                   "print('never')")
    out = tmp_path / "out.ipynb"
    with pytest.raises(PapermillExecutionError, match="bad N=7"):
        execute_headless(src, out, {"N": 7})
    outputs = code_outputs(out)
    assert any("before 7" in o.get("text", "") for o in outputs)
    assert any(o.get("output_type") == "error" and o.get("ename") == "ValueError" for o in outputs)
    assert not any("never" in o.get("text", "") for o in outputs)
