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


#: The notebooks whose scenario cells take a recorded prediction (predict, then look).
PREDICTING = {"01_receiver_wal", "02_direct_kafka", "03_structured_streaming", "05_exactly_once_production",
              "06_stateful_streaming", "07_kafka_guarantees", "08_other_engines", "09_queues_and_zombies"}


def _code(path):
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_interactive_means_the_same_everywhere(path):
    cells = json.loads(path.read_text())["cells"]
    p = next(i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    after = next("".join(c["source"]) for c in cells[p + 1:] if c["cell_type"] == "code")
    assert after.startswith("nb.setup(interactive=INTERACTIVE)"), "the first cell after the parameters sets the mode"
    assert sum(src.count("nb.setup(") for src in _code(path)) == 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_shown_code_regions_exist(path):
    import re

    from lab.lessons.code import lessons

    names = {m for src in _code(path) for m in re.findall(r'nb\.show_code\("([a-z0-9-]+)"\)', src)}
    assert names <= set(lessons()), names - set(lessons())
    if path.stem in PREDICTING:
        assert names, "a pipeline notebook shows the code that runs"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.stem in PREDICTING], ids=lambda p: p.name)
def test_every_scenario_cell_takes_a_prediction(path):
    import re

    code = _code(path)
    sheets = [m for src in code for m in re.findall(r"^(\w+) = nb\.predict\(", src, flags=re.M)]
    assert sheets, "no prediction cell"
    for sheet in sheets:
        frozen = [src for src in code if re.search(rf"^(\w+) = {sheet}\.freeze\(\)", src, flags=re.M)]
        assert len(frozen) == 1, f"{sheet} is frozen in exactly one cell, before its runs"
        name = re.search(rf"^(\w+) = {sheet}\.freeze\(\)", frozen[0], flags=re.M).group(1)
        assert frozen[0].index(f"{sheet}.freeze()") < frozen[0].find("nb.run(") or "nb.run(" not in frozen[0]
        assert any(f"nb.verdicts({name}," in src for src in code), f"{name}'s runs get a verdict"
    assert any("PREDICTIONS" in src for src in code)


#: Cells that run scenarios without a prediction, and why: the panels (a run the learner drives with
#: buttons, its own predict control) and 07's settings picker.
UNPREDICTED_RUNS = {"03_structured_streaming": ["Panel("], "06_stateful_streaming": ["Panel("],
                    "07_kafka_guarantees": ["SettingsPicker("], "09_queues_and_zombies": ["Panel("]}


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.stem in PREDICTING], ids=lambda p: p.name)
def test_no_scenario_runs_without_a_prediction(path):
    import re

    frozen_before: set[str] = set()
    for cell in _code(path):
        src = "\n".join(line for line in cell.splitlines() if not line.lstrip().startswith("#"))
        frozen = re.search(r"^(\w+) = \w+\.freeze\(\)", src, flags=re.M)
        if "nb.run(" in src and not any(mark in src for mark in UNPREDICTED_RUNS.get(path.stem, [])):
            # frozen first in this cell, or in an earlier cell and judged in this one (07: eos, then Spark)
            here = frozen is not None and src.index(frozen.group(0)) < src.index("nb.run(")
            earlier = any(f"nb.verdicts({name}," in src for name in frozen_before)
            assert here or earlier, f"a cell runs without a prediction:\n{src}"
        if frozen:
            frozen_before.add(frozen.group(1))
