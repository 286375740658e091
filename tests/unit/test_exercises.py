"""Exercises: each topic notebook ends with its tasks, each has a solution cell, each scenario is valid."""

import json

import pytest

from lab.config import make_config
from lab.errors import LabError
from lab.lessons.exercises import EXERCISES, exercise, for_notebook, markdown
from lab.audit.expectations import EXPECTATIONS
from tests.conftest import ROOT

TOPICS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def cells(path):
    return json.loads(path.read_text())["cells"]


@pytest.mark.parametrize("path", TOPICS, ids=lambda p: p.stem)
def test_every_notebook_ends_with_its_exercises(path):
    exs = for_notebook(path.stem)
    assert 2 <= len(exs) <= 3
    last_md = [c for c in cells(path) if c["cell_type"] == "markdown"][-1]
    assert "".join(last_md["source"]) == markdown(path.stem), "regenerate the Exercises cell from lab.lessons.exercises"


@pytest.mark.parametrize("path", TOPICS, ids=lambda p: p.stem)
def test_every_exercise_has_a_checked_solution(path):
    solution = ROOT / "notebooks" / "solutions" / path.name
    code = "".join("".join(c["source"]) for c in cells(solution) if c["cell_type"] == "code")
    for ex in for_notebook(path.stem):
        assert f'nb.solve("{ex.id}"' in code
    tagged = [c for c in cells(solution) if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1 and "INTERACTIVE" in "".join(tagged[0]["source"])


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_each_exercise_is_a_valid_scenario(ex, tmp_path):
    assert ex.expect in EXPECTATIONS
    params = dict(ex.params, runs_dir=str(tmp_path))
    make_config(**params)  # validates pipeline, sink, faults against the catalogue


def test_ids_are_unique_and_unknown_ids_are_refused():
    assert len({e.id for e in EXERCISES}) == len(EXERCISES)
    with pytest.raises(LabError, match="unknown exercise '9.9'.*01.1"):
        exercise("9.9")


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_each_solution_states_the_answer_the_exercise_holds(ex):
    """The answer a solutions notebook shows is the one nb.solve checks, word for word."""
    solution = ROOT / "notebooks" / "solutions" / f"{ex.notebook}.ipynb"
    text = "".join("".join(c["source"]) for c in cells(solution) if c["cell_type"] == "markdown")
    assert f"## {ex.id} {ex.title}" in text and ex.task in text
    assert f"**{ex.expect}** ({EXPECTATIONS[ex.expect]}). {ex.why}" in text


@pytest.mark.parametrize("path", TOPICS, ids=lambda p: p.stem)
def test_each_ready_to_edit_line_is_the_run_its_solution_checks(path):
    """The line under each task, as a learner copies it, runs exactly the scenario ``nb.solve`` checks."""
    import ast
    import re

    import textwrap

    text = "".join([c for c in cells(path) if c["cell_type"] == "markdown"][-1]["source"])
    blocks = [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)\n\s*```", text, re.S)]
    exs = for_notebook(path.stem)
    assert len(blocks) == len(exs)
    for ex, block in zip(exs, blocks):
        body = ast.parse(block).body
        if ex.evidence:  # r = nb.run(nb.config(...)); nb.show(r); then the line that opens the run's files
            assert ast.unparse(body[0]).startswith("r = nb.run(") and ast.unparse(body[1]) == "nb.show(r)", ex.id
            assert len(body) >= 3 and all("r" in {n.id for n in ast.walk(s) if isinstance(n, ast.Name)}
                                          for s in body[2:]), ex.id
            run = body[0].value
        else:  # nb.show(nb.run(nb.config(...)))
            assert len(body) == 1 and ast.unparse(body[0].value.func) == "nb.show", ex.id
            run = body[0].value.args[0]
        assert ast.unparse(run.func) == "nb.run"
        cfg = run.args[0]
        assert ast.unparse(cfg.func) == "nb.config"
        kwargs = {k.arg: k.value for k in cfg.keywords}
        runs_dir = kwargs.pop("runs_dir", None)
        assert {k: ast.literal_eval(v) for k, v in kwargs.items()} == ex.params, ex.id
        assert (runs_dir is not None and ast.unparse(runs_dir) == "nb.start_cluster()") == ex.cluster, ex.id
        make_config(**ex.params)  # valid as typed
