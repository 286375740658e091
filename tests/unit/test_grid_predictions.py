"""Notebook 04's sheet: a row of buttons per grid row, the measured grid kept back until every row is predicted."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lab.errors import LabError
from lab.matrix.grid import Grid, Scenario, load_grid
from lab.matrix.questions import GridAnswer, answers_for, grid_answers, grid_questions
from lab.views.predict import predict_grid
from tests.conftest import ROOT

GRID = Grid([Scenario("plain, driver-crash", {}, 1, "no-loss", "00"),
             Scenario("plain, driver-crash", {}, 2, "no-loss", "00"),
             Scenario("cluster, acks=1", {}, 1, "acked-lost", "07")])


def view(*rows):
    return pd.DataFrame([dict(name=n, measured=m, lost=lost, duplicated=d, acked=100, topic_lost=t)
                         for n, m, lost, d, t in rows])


def test_each_name_is_asked_once_with_the_words_it_is_judged_in():
    qs = grid_questions(GRID)
    assert [(q.name, q.notebook, q.label) for q in qs] == [
        ("plain, driver-crash", "00", "00 · plain, driver-crash"), ("cluster, acks=1", "07", "07 · cluster, acks=1")]
    assert "at-least-once" in qs[0].choices and qs[1].choices == ("acked-kept", "acked-lost")


def test_the_default_grid_names_a_notebook_for_every_row():
    assert all(q.notebook.isdigit() and len(q.notebook) == 2 for q in grid_questions(load_grid(None)))


def test_a_row_is_answered_by_the_first_table_that_ran_it_with_its_worst_run():
    qs = grid_questions(GRID)
    mine = view(("plain, driver-crash", "exactly-once", 0, 0, None),
                ("plain, driver-crash", "at-least-once", 0, 7, None))
    reference = view(("cluster, acks=1", "acked-lost", 0, 0, 640), ("plain, driver-crash", "at-most-once", 5, 0, None))
    got = grid_answers(qs, [("mine.csv", mine), ("reference.csv", reference)])
    assert got["plain, driver-crash"] == GridAnswer("plain, driver-crash", "at-least-once",
                                                    "0 lost, 7 duplicated of 100", "mine.csv")
    assert got["cluster, acks=1"] == GridAnswer("cluster, acks=1", "acked-lost",
                                                "640 of 100 acknowledged sends not in the topic", "reference.csv")


def test_the_committed_reference_answers_every_row_of_the_default_grid():
    qs = grid_questions(load_grid(None))
    got = answers_for(qs, ROOT / "docs" / "reference" / "matrix.csv")
    assert set(got) == {q.name for q in qs} and {a.table for a in got.values()} == {"docs/reference/matrix.csv"}
    assert all(a.measured in q.choices for q in qs for a in [got[q.name]])


def test_bad_predictions_are_one_line_naming_the_valid_choices():
    qs = grid_questions(GRID)
    with pytest.raises(LabError, match=r"PREDICTIONS key.*'no such row'.*plain, driver-crash"):
        predict_grid(qs, {"no such row": "exactly-once"}, interactive=False)
    with pytest.raises(LabError, match=r"'cluster, acks=1'.*'exactly-once'.*acked-kept, acked-lost"):
        predict_grid(qs, {"cluster, acks=1": "exactly-once"}, interactive=False)


def test_headless_the_grid_is_judged_on_what_predictions_gives_and_recorded(tmp_path, capsys):
    qs = grid_questions(GRID)
    sheet = predict_grid(qs, {"plain, driver-crash": "At-least-once"}, interactive=False)
    assert sheet.ready()
    answers = {"plain, driver-crash": GridAnswer("plain, driver-crash", "at-least-once", "0 lost, 7 duplicated of 100",
                                                 "t.csv")}
    verdicts = sheet.verdicts(answers, tmp_path)
    assert [(v.predicted, v.measured, v.right) for v in verdicts] == [("at-least-once", "at-least-once", True),
                                                                      (None, "not run", None)]
    (recorded,) = tmp_path.glob("04-grid-*/predictions.json")
    assert [r["scenario"] for r in json.loads(recorded.read_text())] == [q.name for q in qs]


def test_interactively_the_grid_waits_for_every_row(tmp_path, capsys):
    qs = grid_questions(GRID)
    sheet = predict_grid(qs, None, interactive=True)
    assert not sheet.ready()
    assert "2 of 2 rows have no prediction yet (the first: '00 · plain, driver-crash')" in capsys.readouterr().out
    sheet._buttons["plain, driver-crash"].value = "at-least-once"
    assert "1 of 2 predicted" in sheet._status.value and not sheet.ready()
    sheet._buttons["cluster, acks=1"].value = "acked-lost"
    assert "every row predicted" in sheet._status.value and sheet.ready()
    frozen = sheet.freeze()
    sheet._buttons["cluster, acks=1"].value = "acked-kept"  # locked: a later click does not count
    assert frozen["cluster, acks=1"].outcome == "acked-lost" and frozen["cluster, acks=1"].source == "buttons"
