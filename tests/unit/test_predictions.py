"""Predict, then look: validation of PREDICTIONS, freezing, and verdicts judged on measured counts."""

import json

import pytest

from lab.audit.predictions import (
    TOPIC_OUTCOMES,
    Prediction,
    check_given,
    freeze,
    judge,
    record,
    score,
    topic_outcome_of,
)
from lab.errors import LabError
from lab.outcomes import GUARANTEES


def report(**counts):
    base = dict(acked=100, lost=0, duplicated=0, guarantee="exactly-once", run_dir="/r")
    base.update(counts)
    return base


def test_given_predictions_are_spelled_as_the_choices():
    got = check_given({"a": "Exactly Once", "b": "at_least_once"}, ["a", "b", "c"], GUARANTEES)
    assert got == {"a": "exactly-once", "b": "at-least-once", "c": None}


def test_a_bad_outcome_names_the_scenario_and_the_choices():
    with pytest.raises(LabError, match=r"prediction for 'a'.*'twice'.*at-least-once.*exactly-once"):
        check_given({"a": "twice"}, ["a"], GUARANTEES)


def test_a_key_for_no_run_of_the_cell_is_refused_naming_the_runs():
    with pytest.raises(LabError, match=r"PREDICTIONS key 'reliable WAL'.*reliable, WAL"):
        check_given({"reliable WAL": "at-least-once"}, ["reliable, WAL"], GUARANTEES)


def test_verdict_compares_with_the_measured_guarantee_not_a_stored_answer():
    frozen = freeze({"append": "exactly-once", "txn": "exactly-once", "none": None}, "PREDICTIONS", now=5.0)
    wrong = judge(frozen["append"], report(duplicated=300, guarantee="at-least-once"))
    right = judge(frozen["txn"], report())
    silent = judge(frozen["none"], report(lost=3, guarantee="at-most-once"))
    assert (wrong.right, right.right, silent.right) == (False, True, None)
    assert wrong.measured == "at-least-once" and "300 duplicated of 100" in wrong.sentence()
    assert silent.predicted is None and frozen["none"].source == "none" and "no prediction" in silent.sentence()
    assert score([wrong, right, silent]) == "1 of 2 predictions right"


def test_a_run_whose_planned_fault_never_fired_is_not_judged():
    missed = [{"type": "fault-not-applied", "kind": "driver-crash",
               "reason": "its trigger (driver-crash@batch=3) never came before the run ended"}]
    frozen = freeze({"wal": "at-least-once", "other": "exactly-once"}, "buttons", now=1.0)
    unjudged = judge(frozen["wal"], report(faults_not_applied=missed))
    judged = judge(frozen["other"], report())
    assert unjudged.right is None and unjudged.measured == "exactly-once"
    assert "driver-crash never fired" in unjudged.not_judged and "batch=3" in unjudged.sentence()
    assert score([unjudged, judged]) == "1 of 1 predictions right; 1 not judged: the run could not show its lesson"
    assert score([unjudged]).startswith("no prediction could be judged; 1 not judged")


def test_topic_outcome_is_read_from_the_final_read():
    assert topic_outcome_of({"topic": {"lost": 620, "acked": 3000}}) == (
        TOPIC_OUTCOMES[1], "620 of 3000 acknowledged sends not in the topic")
    assert topic_outcome_of({"topic": {"lost": 0}})[0] == TOPIC_OUTCOMES[0]
    with pytest.raises(LabError, match="no final read"):
        topic_outcome_of({"run_dir": "x"})
    v = judge(Prediction("grid", "acked-lost", "buttons", 1.0), {"topic": {"lost": 5}, "acked": 9},
              topic_outcome_of)
    assert v.right is True


def test_the_verdict_is_recorded_next_to_the_run(tmp_path):
    v = judge(Prediction("append", "at-least-once", "buttons", 7.0), report(duplicated=2, guarantee="at-least-once"))
    path = record(v, tmp_path)
    saved = json.loads(path.read_text())
    assert saved["right"] is True and saved["recorded_at"] == 7.0 and saved["measured"] == "at-least-once"
    assert saved["source"] == "buttons"


def test_sheet_takes_its_own_keys_and_freezes_once():
    from lab.views.predict import predict

    sheet = predict(["a", "b"], {"a": "at-least-once", "other cell": "exactly-once"}, interactive=False)
    first = sheet.freeze()
    assert first["a"].outcome == "at-least-once" and first["b"].outcome is None
    assert sheet.freeze() is first


def test_buttons_lock_when_frozen():
    from lab.views.predict import predict

    sheet = predict(["a"], None, interactive=False)
    box = sheet.widget()
    sheet._buttons["a"].value = "at-most-once"
    frozen = sheet.freeze()
    assert frozen["a"].outcome == "at-most-once" and frozen["a"].source == "buttons"
    assert sheet._buttons["a"].disabled and "recorded" in sheet._status.value
    assert box is not None


def test_predictions_must_be_a_mapping_of_known_outcomes():
    from lab.audit.predictions import check_mapping

    with pytest.raises(LabError, match=r"must be a mapping.*got str.*-y 'PREDICTIONS"):
        check_mapping('{"reliable, WAL": "at-least-once"}')  # what papermill's -p passes
    with pytest.raises(LabError, match=r"prediction for 'later cell' 'twice'.*acked-lost"):
        check_mapping({"later cell": "twice"})  # checked at the first prediction cell, whichever cell it is for
    assert check_mapping(None) == {} and check_mapping({"x": "acked-lost"}) == {"x": "acked-lost"}


def test_running_the_buttons_cell_again_keeps_the_choice(monkeypatch):
    """A click, then Shift-Enter in the buttons' own cell: the new row starts from the click, not empty."""
    from lab.views import predict as pv

    monkeypatch.setattr(pv, "_CHOSEN", {})
    first = pv.predict(["a"], {"a": "exactly-once"}, interactive=False)
    first.widget()
    first._buttons["a"].value = "at-least-once"  # the learner's click
    again = pv.predict(["a"], {"a": "exactly-once"}, interactive=False)
    again.widget()
    assert again._buttons["a"].value == "at-least-once"
    assert again.freeze()["a"].outcome == "at-least-once"
    again._buttons["a"].value = None  # the visible "clear" is the only way back to no choice
    third = pv.predict(["a"], {}, interactive=False)
    third.widget()
    assert third._buttons["a"].value == "at-least-once"  # a frozen sheet's later changes are not remembered
    fresh = pv.predict(["b"], {"b": "at-most-once"}, interactive=False)
    fresh.widget()
    assert fresh._buttons["b"].value == "at-most-once"  # nothing chosen: the PREDICTIONS parameter's value


def test_a_choice_row_takes_only_its_options():
    import traitlets

    from lab.views.choice import choice_row

    row = choice_row(["yes", "no"], "no", label="x", hand_over=True)
    assert (row.value, row.options, row.hand_over) == ("no", ["yes", "no"], True)
    with pytest.raises(traitlets.TraitError, match=r"'maybe' is not a choice; choose one of: yes, no"):
        row.value = "maybe"
    row.value = None
    assert row.value is None
