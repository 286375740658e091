"""Exercises: each topic notebook ends with its tasks, each has a solution cell, each scenario is valid."""

import json

import pytest

from lab.audit.expectations import EXPECTATIONS
from lab.config import make_config
from lab.errors import LabError
from lab.lessons.exercises import (
    EXERCISES,
    SettingCheck,
    check_setting,
    exercise,
    for_notebook,
    judge_attempt,
    markdown,
)
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
    """A solution is the learner's line with the blank filled in with the answer (an evidence one: its own run or the
    run before)."""
    solution = ROOT / "notebooks" / "solutions" / path.name
    code = "".join("".join(c["source"]) for c in cells(solution) if c["cell_type"] == "code")
    for ex in for_notebook(path.stem):
        if ex.blank:
            value = ex.params[ex.blank]
            typed = json.dumps(value) if isinstance(value, str) else repr(value)
            assert f'nb.solve("{ex.id}", {ex.blank}={typed}' in code, ex.id
        else:
            assert f'nb.solve("{ex.id}"' in code, ex.id
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
def test_each_line_leaves_its_setting_and_prediction_to_the_learner(path):
    """A run exercise's line: ``r = nb.exercise(id, <blank>=..., predict=...)``; an evidence one reads the notebook's
    run."""
    import ast
    import re
    import textwrap

    text = "".join([c for c in cells(path) if c["cell_type"] == "markdown"][-1]["source"])
    blocks = [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)\n\s*```", text, re.S)]
    exs = for_notebook(path.stem)
    assert len(blocks) == len(exs)
    code = "\n".join("".join(c["source"]) for c in cells(path) if c["cell_type"] == "code")
    for n, (ex, block) in enumerate(zip(exs, blocks)):
        body = ast.parse(block).body
        if ex.evidence:
            assert (ast.unparse(body[0]) == ast.unparse(ast.parse(f"r = {ex.lesson_run}"))
                    and ast.unparse(body[1]) == f"nb.explain('{ex.id}', r)"), ex.id
            assert len(body) >= 3, ex.id
            if ex.lesson_run == "r":  # the learner's run of the exercise before, with the same settings
                before = exs[n - 1]
                assert before.blank and before.params == ex.params and before.cluster == ex.cluster, ex.id
            else:  # a run the notebook itself makes: its variable is assigned there, its label is in its code
                name = re.match(r"\w+", ex.lesson_run).group(0)
                assert re.search(rf"^{name} = ", code, re.M), f"{ex.id}: {name} is not a run of the notebook"
                label = re.findall(r'\["(.+)"\]', ex.lesson_run)
                assert all(f'"{x}"' in code for x in label), f"{ex.id}: no run labelled {label} in the notebook"
        else:
            assert ast.unparse(body[0]) == f"r = nb.exercise('{ex.id}', {ex.blank}=..., predict=...)", ex.id
            assert len(body) == 1


@pytest.mark.parametrize("ex", [e for e in EXERCISES if e.blank], ids=lambda e: e.id)
def test_a_task_names_its_setting_but_not_the_value(ex):
    value = ex.params[ex.blank]
    assert f"`{ex.blank}`" in ex.task, "the task names the setting to fill in"
    for typed in (f'"{value}"', f"={value}", f"`{value}`"):
        assert typed not in ex.task, f"the task gives the answer {typed}"


def test_no_two_exercises_run_the_same_settings_and_each_answer_is_one_outcome():
    from lab.outcomes import WORDS

    runs = [json.dumps({**e.params, "cluster": e.cluster}, sort_keys=True) for e in EXERCISES
            if not e.lesson_run == "r"]
    assert len(runs) == len(set(runs)), [r for r in runs if runs.count(r) > 1]
    assert all(e.expect in WORDS for e in EXERCISES), [(e.id, e.expect) for e in EXERCISES if e.expect not in WORDS]


# -- a learner's attempt: the blank, the wrong value, the right one (the runs themselves: tests/integration)

def test_a_blank_left_is_one_line_naming_what_fills_it():
    ex = exercise("00.1")
    for left in (..., None, " "):
        with pytest.raises(LabError, match=r"exercise 00.1: fill in commit=\.\.\. before you run it \(one of: "
                                           r".*before-output"):
            check_setting(ex, left)
    with pytest.raises(LabError, match=r"commit mode 'sometimes'.*before-output"):
        check_setting(ex, "sometimes")  # not a value the setting takes: the config's own line


def test_the_value_filled_in_is_judged_against_the_task():
    assert not check_setting(exercise("00.1"), "after-output").ok
    assert check_setting(exercise("00.1"), "before-output") == SettingCheck(True, "commit='before-output'")
    assert check_setting(exercise("02.1"), "driver-crash@batch=2:mid-output").ok
    assert not check_setting(exercise("02.1"), "driver-crash@batch=2:after-offset-log").ok
    assert check_setting(exercise("05.1"), True).ok and not check_setting(exercise("05.1"), False).ok
    with pytest.raises(LabError, match="fault"):
        check_setting(exercise("02.1"), "driver-crash@sometime")


def test_an_attempt_is_judged_against_the_prediction_and_the_answer_separately():
    ex = exercise("00.1")
    lost = {"guarantee": "at-most-once", "lost": 300, "duplicated": 0, "acked": 1500, "run_dir": "runs/x"}
    right = judge_attempt(ex, "commit='before-output'", "at-most-once", lost)
    assert (right.right, right.as_documented) == (True, True) and right.sentence().startswith("✔ 00.1")
    wrong = judge_attempt(ex, "commit='before-output'", "exactly-once", lost)
    assert (wrong.right, wrong.as_documented) == (False, True) and wrong.sentence().startswith("✘ 00.1")
    assert "300 lost, 0 duplicated, 0 unexpected of 1500" in wrong.sentence()
    nothing = {**lost, "guarantee": "exactly-once", "lost": 0}
    other = judge_attempt(ex, "commit='before-output'", "exactly-once", nothing)
    assert ((other.right, other.as_documented) == (True, False)
            and "where the documented answer is at-most-once" in other.sentence())
    unfired = judge_attempt(
        ex, "x", "at-most-once", {**lost, "faults_not_applied": [{"kind": "driver-crash", "reason": "ended"}]})
    assert unfired.right is None and unfired.sentence().startswith("· 00.1")


def test_an_attempt_refuses_before_it_runs(monkeypatch):
    import IPython.display

    from lab.lessons import solve

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **_k: shown.extend(objs))

    def no_run(*_a, **_k):
        raise AssertionError("nothing may run")

    monkeypatch.setattr(solve, "_run", no_run)
    with pytest.raises(LabError, match="fill in commit"):
        solve.attempt("00.1", predict="at-most-once")
    with pytest.raises(LabError, match=r"predict first: predict=\.\.\. one of exactly-once"):
        solve.attempt("00.1", commit="before-output")
    with pytest.raises(LabError, match=r"prediction for 'exercise 00.1' 'twice'"):
        solve.attempt("00.1", commit="before-output", predict="twice")
    with pytest.raises(LabError, match=r"setting for exercise 00.1 'sink'; valid choices: commit, "):
        solve.attempt("00.1", commit="before-output", sink="idempotent", predict="at-most-once")
    with pytest.raises(LabError, match=r"reads a run this notebook made: nb.explain\('01.3', results"):
        solve.attempt("01.3", predict="at-least-once")
    assert solve.attempt("00.1", commit="after-output", predict="at-most-once") is None
    (said,) = shown
    assert "<code>commit=&#x27;after-output&#x27;</code> is not the change this exercise asks for" in said.data or \
        "<code>commit='after-output'</code> is not the change this exercise asks for" in said.data
    assert "before-output" not in said.data, "the refusal does not give the answer away"


def test_an_evidence_question_reads_only_the_run_it_is_about(tmp_path, monkeypatch):
    """The lesson's run passes whatever its size and crash batch; a run with another setting is refused by name."""
    from types import SimpleNamespace

    import IPython.display

    from lab.lessons import solve

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **_k: shown.extend(objs))
    ex = exercise("02.3")
    lesson = dict(pipeline="direct", offsets="checkpoint", sink="append", events=1500, max_batch_records=200,
                  faults="driver-crash@batch=3:after-output-before-commit", runs_dir=str(tmp_path))
    run = lambda **kw: SimpleNamespace(config=make_config(**{**lesson, **kw}), run_dir=tmp_path / "run")  # noqa: E731
    solve.explain("02.3", run())
    import html

    assert ex.task in html.unescape(shown[0].data)
    with pytest.raises(LabError, match=r"02.3 is about another run: this one has offsets='kafka' \(this question needs "
                                       r"'checkpoint'\); pass ckpt"):
        solve.explain("02.3", run(offsets="kafka"))
    with pytest.raises(LabError, match=r"faults 'driver-crash@batch=3:mid-output'"):
        solve.explain("02.3", run(faults="driver-crash@batch=3:mid-output"))
    with pytest.raises(LabError, match=r"is a run to predict: nb.exercise\('02.1', faults=\.\.\., predict=\.\.\.\)"):
        solve.explain("02.1", run())
