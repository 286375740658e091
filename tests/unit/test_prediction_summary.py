"""``lab predictions``: the verdicts a laptop's runs recorded, counted per scenario; which notebook asked each.

No JVM, no broker: each run is a directory in tmp_path holding the ``prediction.json`` that
``lab.audit.predictions.record`` writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import cli
from lab.audit import prediction_summary as ps
from lab.audit.predictions import Verdict, record
from tests.conftest import ROOT

NOTEBOOKS = ps.notebooks(ROOT / "notebooks")


def recorded(runs: Path, name: str, scenario: str, predicted: str | None, measured: str, at: float,
             not_judged: str = "") -> Path:
    """One run's directory with its judged prediction, as a notebook's ``nb.verdicts`` leaves it."""
    run = runs / name
    run.mkdir(parents=True)
    right = None if predicted is None or not_judged else predicted == measured
    record(Verdict(scenario, predicted, measured, right, "0 lost, 0 duplicated of 3000", str(run), at,
                   "buttons" if predicted else "none", not_judged), run)
    return run


@pytest.fixture
def runs(tmp_path) -> Path:
    runs = tmp_path / "runs"
    recorded(runs, "r1", "offsets in checkpoint, append sink", "exactly-once", "at-least-once", 1.0)
    recorded(runs, "r2", "offsets in the sink's transaction", "exactly-once", "exactly-once", 2.0)
    recorded(runs, "r3", "reliable, WAL (seed 1)", "at-least-once", "at-least-once", 3.0)
    recorded(runs, "r4", "reliable, WAL (seed 2)", None, "at-least-once", 4.0)
    recorded(runs, "r5", "append", "at-least-once", "exactly-once", 5.0, "the planned driver-crash never fired")
    recorded(runs, "cluster/r6", "acks=1 · min.insync=1 · unclean on", "acked-lost", "acked-lost", 6.0)
    (runs / "r7").mkdir()
    (runs / "r7" / "prediction.json").write_text('{"scenario": "half written')
    (runs / "r8").mkdir()  # a run without a prediction (a panel's, lab run's)
    return runs


def test_each_scenario_counts_its_predictions_measured_outcomes_and_right_ones(runs):
    found = ps.read_verdicts(runs)
    assert len(found.verdicts) == 6 and found.unreadable == (str(runs / "r7" / "prediction.json"),)
    summary = ps.summarise(found.verdicts, unreadable=found.unreadable)
    by = {t.scenario: t for t in summary.tallies}
    assert list(by) == ["offsets in checkpoint, append sink", "offsets in the sink's transaction", "reliable, WAL",
                        "append", "acks=1 · min.insync=1 · unclean on"]  # first run first; seeds are one question
    wal = by["reliable, WAL"]
    assert (wal.runs, wal.predicted, wal.unpredicted, wal.measured) == (2, (("at-least-once", 1),), 1,
                                                                      (("at-least-once", 2),))
    assert (wal.right, wal.judged, wal.not_judged) == (1, 1, 0)
    assert (by["append"].right, by["append"].judged, by["append"].not_judged) == (0, 0, 1)
    assert by["offsets in checkpoint, append sink"].row() == (
        "offsets in checkpoint, append sink", "exactly-once", "at-least-once", "0 of 1")
    assert wal.row()[1:] == ("at-least-once 1, no prediction 1", "at-least-once 2", "1 of 1")
    assert by["append"].row()[3] == "1 not judged"
    assert summary.rows()[0] == ps.HEADER
    assert summary.total() == "total: 6 runs of 5 scenarios, 5 predicted, 3 of 4 right, 1 not judged"


def test_a_room_of_predictions_lists_the_most_predicted_first():
    vs = [Verdict("s", p, "at-least-once", p == "at-least-once", "", "", t) for t, p in
          enumerate(["exactly-once", "at-least-once", "at-least-once", "at-most-once"])]
    [tally] = ps.summarise(vs).tallies
    assert tally.row()[1] == "at-least-once 2, exactly-once 1, at-most-once 1"
    assert tally.row()[3] == "2 of 4"


def test_one_run_directory_is_read_as_itself(runs):
    assert [v.scenario for v in ps.read_verdicts(runs / "r2").verdicts] == ["offsets in the sink's transaction"]


NOTEBOOK = {"cells": [
    {"cell_type": "markdown", "source": ["nb.predict(['not code'])"]},
    {"cell_type": "code", "source": ["SINKS: list = [\"idempotent\", \"files\"]\n",
                                     "def label(acks, elr=\"on\"):\n",
                                     "    return f\"acks={acks} · unclean\" + (\"\" if elr == \"on\" else \" · ELR "
                                     "off\")\n"]},
    {"cell_type": "code",
     "source": ["%%time\n", "combos = nb.choose({\"reliable, WAL\": 1, \"unreliable, WAL\": 2}, C, \"C\")\n",
                                     "a = nb.predict(list(combos), PREDICTIONS)\n",
                                     "b = nb.predict([\"append\"] + SINKS, PREDICTIONS)\n",
                                     "c = nb.predict([f\"real-time {i:g}s\" for i in X], PREDICTIONS)\n",
                                     "d = nb.predict([label(*row) for row in rows], PREDICTIONS)\n",
                                     "e = other.predict([\"not the notebook's\"])\n"]},
    {"cell_type": "code", "source": ["x = nb.predict([\"half a cell\""]},
]}


@pytest.mark.parametrize("scenario, asked", [
    ("reliable, WAL", True), ("unreliable, WAL", True), ("append", True), ("files", True), ("idempotent", True),
    ("real-time 5s", True), ("real-time s", False), ("acks=all · unclean", True), ("acks=1 · unclean · ELR off", True),
    ("not code", False), ("not the notebook's", False), ("half a cell", False), ("appended", False),
])
def test_a_notebooks_questions_are_the_labels_its_predict_calls_name(scenario, asked):
    assert ps.asks(ps.questions(json.dumps(NOTEBOOK)), scenario) is asked


def test_each_notebook_that_asks_for_predictions_has_questions_of_its_own():
    asked = {n: ps.questions(p.read_text()) for n, p in NOTEBOOKS.items()}
    calls = {n for n, p in NOTEBOOKS.items() if "nb.predict(" in p.read_text()}
    assert calls and all(asked[n] for n in calls), {n: asked[n] for n in calls}
    written_out = {n: [q.pattern for q in qs if ".+?" not in q.pattern] for n, qs in asked.items()}
    shared = [(n, pattern, other) for n, patterns in written_out.items() for pattern in patterns
              for other, qs in asked.items() if other != n and ps.asks(qs, pattern.replace("\\", ""))]
    assert not shared, f"a question two notebooks ask, so --notebook could not tell them apart: {shared}"


@pytest.mark.parametrize("scenario, number", [
    ("reliable, WAL", "01"), ("append", "03"), ("real-time 10s", "03"), ("aligned, exactly-once sink", "08"),
    ("share group, a poison record", "09"),
])
def test_a_label_of_the_notebooks_tests_belongs_to_its_notebook(scenario, number):
    owners = [n for n, p in NOTEBOOKS.items() if ps.asks(ps.questions(p.read_text()), scenario)]
    assert owners == [number]


@pytest.mark.parametrize("given, number", [("2", "02"), ("02", "02"), ("02_direct_kafka", "02")])
def test_a_notebook_is_named_by_its_number(given, number):
    assert ps.notebook_number(given, NOTEBOOKS) == number


def run_cli(capsys, *args) -> tuple[int, list[str], list[str]]:
    status = cli.main(["predictions", *args])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def test_the_command_prints_a_line_per_scenario_and_the_total(runs, capsys):
    status, out, err = run_cli(capsys, str(runs))
    assert status == 0 and not err
    assert out[0] == f"predictions in {runs}:" and out[1].split() == ["scenario", "predicted", "measured", "right"]
    assert out[2].startswith("offsets in checkpoint, append sink") and out[2].endswith("0 of 1")
    assert out[-2].startswith("total: 6 runs of 5 scenarios") and out[-1].startswith("not read (1")


def test_the_command_keeps_one_notebooks_scenarios(runs, capsys):
    status, out, _ = run_cli(capsys, str(runs), "--notebook", "02")
    assert status == 0 and out[0] == f"predictions of notebook 02_direct_kafka in {runs}:"
    assert [line.split("  ")[0] for line in out[2:4]] == ["offsets in checkpoint, append sink",
                                                          "offsets in the sink's transaction"]
    assert out[4] == "total: 2 runs of 2 scenarios, 2 predicted, 1 of 2 right"


def test_no_prediction_yet_says_so(tmp_path, capsys):
    status, out, err = run_cli(capsys, str(tmp_path))
    assert status == 1 and not err and out == [f"no predictions recorded in {tmp_path}: run a notebook's "
                                               "prediction cells first"]


@pytest.mark.parametrize("args, words", [
    (["/no/such/runs"], ["'/no/such/runs'", "does not exist", "LAB_RUNS_DIR"]),
    (["--notebook", "12"], ["'12'", "00", "09"]),
    (["--notebook", "direct"], ["'direct'", "02"]),
])
def test_bad_input_is_one_line_naming_it_and_the_choices(args, words, runs, capsys):
    status, out, err = run_cli(capsys, *(args if args[0].startswith("/") else [str(runs), *args]))
    assert status == 2 and not out and len(err) == 1 and err[0].startswith("error: ")
    assert all(w in err[0] for w in words), err[0]


def test_a_file_given_for_the_runs_directory_is_refused(runs, capsys):
    status, _, err = run_cli(capsys, str(runs / "r1" / "prediction.json"))
    assert status == 2 and "is not a directory" in err[0]


@pytest.mark.parametrize("scenario, number", [
    ("receiver, unreliable ack, no WAL, driver-crash", "04"),  # a row of notebook 04's grid
    ("the paused producer's commit", "05"),  # a question of nb.ask
    ("the driver killed mid-stream", "00"),  # the panel's label
    ("exercise 06.2", "06"),  # an exercise's run
])
def test_grid_rows_questions_panels_and_exercises_belong_to_their_notebook(scenario, number):
    from lab.matrix.grid import load_grid

    rows = [s.name for s in load_grid(None).scenarios]
    owners = [n for n, p in NOTEBOOKS.items() if ps.asks(ps.questions(p.read_text(), rows), scenario)]
    assert owners == [number]


def test_the_grid_list_and_a_question_file_are_read_with_the_runs(runs):
    from lab.audit.predictions import record_all

    grid = [Verdict(f"row {i}", "exactly-once", m, m == "exactly-once", "", "ref.csv", 10.0 + i, "buttons")
            for i, m in enumerate(("exactly-once", "at-least-once"))]
    record_all(grid, runs / "04-grid-20261206-120000")
    record(Verdict("the bigger checkpoints", "aligned's", "unaligned's", False, "", "", 20.0, "buttons"),
           runs / "r2", name="question-the-bigger-checkpoints.json")
    got = {v.scenario: v.right for v in ps.read_verdicts(runs).verdicts}
    assert {k: got[k] for k in ("row 0", "row 1", "the bigger checkpoints")} == {
        "row 0": True, "row 1": False, "the bigger checkpoints": False}
