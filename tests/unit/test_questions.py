"""Questions that are not a run's guarantee: their buttons, the measures that answer them, the recorded verdicts."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from lab import events as ev
from lab.audit.predictions import ALL_OUTCOMES, QUESTIONS, check_mapping, uncommitted_reader_outcome
from lab.errors import LabError
from lab.lessons.fencing import FencingResult
from lab.views.flink import bigger_checkpoints
from lab.views.predict import answers, ask
from lab.views.run_files import same_counts


def fencing(**kw):
    base = dict(broker="apache-kafka 4.4.0", records=20, successor_records=10, killed_epoch=[1, 0],
                killed_successor_epoch=[1, 1], killed_read_uncommitted=30, killed_read_committed=0,
                killed_successor_read_uncommitted=10, killed_successor_read_committed=10, zombie_epoch=[2, 0],
                zombie_successor_epoch=[2, 1], zombie_error="ProducerFencedError", zombie_error_module="kafka.errors",
                zombie_message="epoch 0 fenced", zombie_read_uncommitted=30, zombie_read_committed=0,
                zombie_successor_read_uncommitted=10, zombie_successor_read_committed=10)
    return FencingResult(**{**base, **kw})


def test_every_question_word_may_be_given_as_a_prediction():
    for choices in QUESTIONS.values():
        assert set(choices) <= set(ALL_OUTCOMES)
        check_mapping({"q": choices[0]})


def test_the_open_transaction_is_read_from_what_read_committed_returns():
    assert fencing().open_transaction()[0] == "aborted by its successor"
    assert fencing(killed_read_committed=20).open_transaction()[0] == "committed"
    assert fencing(killed_successor_read_committed=0).open_transaction()[0] == "still open"
    assert fencing().zombie_commit() == ("refused", "kafka.errors.ProducerFencedError: epoch 0 fenced")
    assert fencing(zombie_error="").zombie_commit()[0] == "accepted"


def test_an_uncommitted_reader_is_judged_on_its_extra_copies():
    got = uncommitted_reader_outcome({"read_uncommitted_records": 650, "read_uncommitted_extra_copies": 50,
                                      "aborted_output_records": 50})
    assert got == ("some events more than once",
                   "650 records for a read_uncommitted reader, 50 of them extra copies (50 in aborted transactions)")
    assert uncommitted_reader_outcome({"read_uncommitted_extra_copies": 0})[0] == "each event once"
    with pytest.raises(LabError, match="read no output topic"):
        uncommitted_reader_outcome({"run_dir": "x"})


def flink_run(tmp_path, name, sizes):
    run_dir = tmp_path / name
    run_dir.mkdir()
    log = ev.EventLog(run_dir, "driver")
    log.write(ev.RUN_START)
    for n, size in enumerate(sizes, 1):
        log.write(ev.FLINK_CHECKPOINT, checkpoint=n, status="completed", checkpointed_size=size * 1024, duration_ms=5)
    log.write(ev.FLINK_CHECKPOINT, checkpoint=99, status="completed", checkpointed_size=10**9, savepoint=True)
    return SimpleNamespace(run_dir=run_dir)


def test_the_bigger_checkpoints_are_the_largest_completed_ones_savepoints_aside(tmp_path):
    aligned, unaligned = flink_run(tmp_path, "a", [2.1, 1.0]), flink_run(tmp_path, "u", [613.2, 3.0])
    assert bigger_checkpoints(aligned, unaligned) == (
        "unaligned's", "largest completed checkpoint: aligned 2.1 KB, unaligned 613.2 KB")
    assert bigger_checkpoints(unaligned, aligned)[0] == "aligned's"


def test_state_stores_agree_only_when_every_window_of_every_run_is_exact():
    run = lambda exact, windows: SimpleNamespace(report={"windows_exact": exact, "windows": windows})  # noqa: E731
    assert same_counts({"hdfs": run(64, 64), "rocksdb": run(64, 64)}) == (
        "the same counts", "hdfs: 64/64 windows exact; rocksdb: 64/64 windows exact")
    assert same_counts({"hdfs": run(64, 64), "rocksdb": run(63, 64)})[0] == "different counts"


def test_a_question_is_asked_judged_and_recorded(tmp_path, capsys):
    with pytest.raises(LabError, match=r"unknown question 'sizes'.*bigger checkpoints"):
        ask({"q": "sizes"}, interactive=False)
    with pytest.raises(LabError, match=r"prediction for 'q' 'accepted'.*aligned's, unaligned's"):
        ask({"q": "bigger checkpoints"}, {"q": "accepted"}, interactive=False)
    sheet = ask({"q": "bigger checkpoints", "z": "zombie commit"}, {"q": "unaligned's"}, interactive=False)
    answers(sheet, {"q": ("unaligned's", "sizes"), "z": ("refused", "fenced")}, tmp_path)
    q = json.loads((tmp_path / "question-q.json").read_text())
    z = json.loads((tmp_path / "question-z.json").read_text())
    assert ((q["predicted"], q["measured"], q["right"], q["source"])
            == ("unaligned's", "unaligned's", True, "PREDICTIONS"))
    assert (z["predicted"], z["right"]) == (None, None)
    out = capsys.readouterr().out
    assert "✔ q: you predicted unaligned's, measured unaligned's (sizes): right" in out
    assert "· z: no prediction; measured refused (fenced)" in out
