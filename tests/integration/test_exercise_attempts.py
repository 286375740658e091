"""A learner's exercise and its solution, run for real: exercise 00.1 (the plain pipeline, a few seconds a run).

The three results a learner can get from one line: the blank left (an error, nothing run), the wrong value
(refused, nothing run), the right one (a run judged against the prediction and the documented answer); and
the solution's line, which passes with the answer filled in and fails once that answer is made wrong.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from lab.errors import LabError
from lab.lessons import exercises, solve

pytestmark = pytest.mark.integration

SMALL = dict(events=1500, rate=1000)


@pytest.fixture
def shown(monkeypatch):
    import IPython.display

    out = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **_k: out.extend(objs))
    return out


def html(objs) -> str:
    return "\n".join(getattr(o, "data", "") or "" for o in objs)


def test_blank_wrong_and_right_are_three_different_results(runs_dir, shown):
    with pytest.raises(LabError, match=r"fill in commit=\.\.\. before you run it"):
        solve.attempt("00.1", commit=..., predict="at-most-once", **SMALL)
    assert solve.attempt("00.1", commit="after-output", predict="at-most-once", **SMALL) is None
    assert "is not the change this exercise asks for" in html(shown) and not list(runs_dir.glob("*/report.json"))
    shown.clear()
    result = solve.attempt("00.1", commit="before-output", predict="exactly-once", **SMALL)
    verdict = json.loads((result.run_dir / "prediction.json").read_text())
    report = result.report
    # the run's own counts decide: what it lost, against the prediction and the documented answer
    assert result.config.kafka.commit == "before-output" and verdict["measured"] == report["guarantee"]
    assert (verdict["predicted"], verdict["source"]) == ("exactly-once", "exercise")
    assert verdict["right"] == (report["guarantee"] == "exactly-once")
    said = html(shown)
    if report["guarantee"] == "at-most-once":  # the documented answer: the prediction was not
        assert "✘ 00.1 with commit=" in said and "which is the documented answer" in said
        assert report["lost"] > 0 and report["duplicated"] == 0
    else:
        assert "where the documented answer is at-most-once" in said


def test_a_solution_fills_in_the_blank_and_fails_when_its_answer_is_made_wrong(runs_dir, shown, monkeypatch):
    result = solve.solve("00.1", commit="before-output", **SMALL)
    assert "✔ <b>00.1</b>: measured <b>at-most-once</b>" in html(shown)
    measured = result.report["guarantee"]
    wrong = dataclasses.replace(exercises.exercise("00.1"), expect="exactly-once")
    monkeypatch.setattr(solve, "exercise", lambda _id: wrong)
    with pytest.raises(AssertionError, match=rf"the answer says exactly-once .* the run measured {measured}"):
        solve.solve("00.1", commit="before-output", **SMALL)
    with pytest.raises(AssertionError, match=r"commit='after-output' is not the answer's commit='before-output'"):
        solve.solve("00.1", commit="after-output", **SMALL)
