"""House style of every notebook: one story, a Setup section, one parameters cell, no outputs."""

import ast
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_house_style(path):
    import re

    assert re.match(r"^\d\d_[a-z0-9_]+\.ipynb$", path.name)
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    assert all(not c.get("outputs") and not c.get("execution_count") for c in cells if c["cell_type"] == "code")
    assert any(c["cell_type"] == "markdown" and "# Setup" in "".join(c["source"]) for c in cells)
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    tree = ast.parse("".join(tagged[0]["source"]))
    names = []
    for node in tree.body:
        assert isinstance(node, (ast.Assign, ast.AnnAssign)), "the parameters cell holds assignments only"
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        names.append(target.id)
        json.dumps(ast.literal_eval(node.value))  # JSON-serialisable literal
    assert names and all(n.isupper() for n in names)
    assert "INTERACTIVE" in names
    # papermill can only infer parameters from lines with a single "="
    for line in "".join(tagged[0]["source"]).splitlines():
        assert line.count("=") <= 1, f"papermill cannot parse {line!r}"
