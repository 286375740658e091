"""The kafka-eos pipeline's pure parts: its record transform, batch metadata, configuration, and the topic sink's
audit."""

import json

import numpy as np
import pytest

from lab.audit.auditor import LedgerView, audit_core
from lab.config import make_config
from lab.errors import LabError
from lab.kafka.read import NotALabEvent, event_fields
from lab.kafka.transactions import transactional_id
from lab.pipelines.kafka_eos import batch_from_metadata, batch_metadata, transform
from lab.sinks import topic as topic_sink
from lab.sinks.reader import open_sink
from lab.sinks.spec import SinkSpec, sink_spec_for_run

EVENT = b'{"id":"0b6e2a4c-1111-4222-8333-944455556666","seq":17,"key":"k03","event_time_ms":1700000000000}'


def test_transform_keeps_the_event_readable_and_marks_it_processed():
    out = transform(EVENT, 2, 40, batch=3, attempt=2)
    assert event_fields(out, 2, 40) == ("0b6e2a4c-1111-4222-8333-944455556666", 17, "k03")
    value = json.loads(out)
    assert {k: v for k, v in value.items() if k != "processed"} == json.loads(EVENT)
    assert value["processed"] == {"by": "kafka-eos", "batch": 3, "attempt": 2, "source": [2, 40]}
    assert topic_sink.event_key(out) == (17, "0b6e2a4c-1111-4222-8333-944455556666")


def test_transform_refuses_what_is_not_a_lab_event():
    with pytest.raises(NotALabEvent, match="1@9"):
        transform(b"hello", 1, 9, batch=0, attempt=1)
    assert topic_sink.event_key(b"hello") == (-1, "b'hello'")  # in the output topic: an unexpected row


def test_batch_numbers_travel_with_the_committed_offsets():
    assert batch_from_metadata(batch_metadata(12)) == 12
    for other in (None, "", "batch=", "batch=x", "something else"):
        assert batch_from_metadata(other) == -1
    assert transactional_id("20260101-run") == "lab-20260101-run-eos"
    assert topic_sink.output_topic("events.r1") == "events.r1.out"


def test_view_counts():
    assert topic_sink.view_counts(["a", "b", "a", "c", "a", "b"], "read_uncommitted") == {
        "read_uncommitted_records": 6, "read_uncommitted_duplicated": 2, "read_uncommitted_extra_copies": 3}
    assert topic_sink.view_counts([], "x") == {"x_records": 0, "x_duplicated": 0, "x_extra_copies": 0}


def test_kafka_eos_takes_the_topic_sink_and_reads_committed(runs_dir):
    c = make_config(pipeline="kafka-eos", faults="driver-crash@batch=2:mid-output")
    assert (c.sink, c.name, c.isolation_level) == ("topic", "kafka-eos-topic", "read_committed")
    assert c.settings["sink_backend"] == "kafka" and c.settings["isolation"] == "read_committed"
    assert make_config(pipeline="kafka-eos", sink="topic", isolation="read_committed").sink == "topic"
    assert make_config().sink == "append"  # other pipelines keep their default


@pytest.mark.parametrize("params, words", [
    (dict(pipeline="kafka-eos", sink="append"), ["'append'", "kafka-eos", "valid choices: topic"]),
    (dict(pipeline="kafka-eos", sink="files"), ["'files'", "valid choices: topic"]),
    (dict(pipeline="plain", sink="topic"), ["'topic'", "valid pipelines for it: kafka-eos"]),
    (dict(pipeline="kafka-eos", isolation="read_uncommitted"), ["read_committed", "auto"]),
    (dict(pipeline="kafka-eos", faults="driver-crash@batch=2:after-commit-before-output"),
     ["after-commit-before-output", "mid-output", "after-output-before-commit"]),
    (dict(pipeline="kafka-eos", faults="task-failure@batch=2"), ["task-failure", "driver-crash"]),
])
def test_bad_kafka_eos_combinations_are_one_line(runs_dir, monkeypatch, params, words):
    monkeypatch.delenv("LAB_KAFKA_BOOTSTRAP", raising=False)
    with pytest.raises(LabError) as e:
        make_config(**params)
    assert all(w in str(e.value) for w in words) and "\n" not in str(e.value)


def test_topic_sink_opens_before_the_broker_runs(tmp_path):
    spec = sink_spec_for_run("topic", tmp_path, "postgresql://ignored")
    spec.save(tmp_path)
    with open_sink(tmp_path) as sink:  # what Run.start does: no config.json or broker.json needed yet
        assert isinstance(sink, topic_sink.TopicSink) and SinkSpec.load(tmp_path) == spec
        assert sink.totals() == {"stored_rows": 0, "write_attempts": 0, "window_rows": 0}
        assert len(sink.event_rows()[0]) == 0


def test_topic_sink_audits_read_committed_and_counts_aborted_copies_as_attempts(tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text(json.dumps({"topic": "events.r1"}))
    (tmp_path / "broker.json").write_text(json.dumps({"bootstrap": "127.0.0.1:9"}))
    ids = [f"e{i}" for i in range(6)]
    # e1 and e2 were written by a transaction that was aborted, then again by one that committed.
    views = {"read_committed": [0, 1, 2, 3, 4], "read_uncommitted": [0, 1, 2, 1, 2, 3, 4]}
    asked = []

    def fake_read_view(bootstrap, topic, isolation_level, timeout_s):
        asked.append((bootstrap, topic, isolation_level))
        seqs = views[isolation_level]
        return (np.array(seqs, dtype=np.int64), np.array([ids[s] for s in seqs], dtype=object),
                np.zeros(len(seqs), dtype=np.int64))

    monkeypatch.setattr(topic_sink, "read_view", fake_read_view)
    ledger = LedgerView(seq=np.arange(6, dtype=np.int64), event_id=np.array(ids, dtype=object),
                        partition=np.zeros(6, dtype=np.int64), kafka_offset=np.arange(6, dtype=np.int64))
    with topic_sink.TopicSink(sink_spec_for_run("topic", tmp_path, None)) as sink:
        a = audit_core(ledger, *sink.event_rows(), sink.attempt_seqs(), positions={0: 5}, final=True)
        counts = sink.view_counts()
    assert (a.exactly_once, a.duplicated, a.lost, a.unseen) == (5, 0, 0, 1)
    assert (a.stored_rows, a.write_attempts, a.absorbed_rewrites) == (5, 7, 2)  # written twice, stored once
    assert counts == {"output_topic": "events.r1.out", "read_committed_records": 5, "read_uncommitted_records": 7,
                      "read_uncommitted_duplicated": 2, "read_uncommitted_extra_copies": 2, "aborted_output_records": 2}
    # each view read once per open sink, from the broker and topic of the run directory
    assert sorted(asked) == [("127.0.0.1:9", "events.r1.out", "read_committed"),
                             ("127.0.0.1:9", "events.r1.out", "read_uncommitted")]


def test_the_final_audits_snapshot_is_the_finished_runs_sink(tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text(json.dumps({"topic": "events.r1"}))
    (tmp_path / "broker.json").write_text(json.dumps({"bootstrap": "127.0.0.1:9"}))
    views = {"read_committed": ([3, 4], ["e3", "e4"]), "read_uncommitted": ([3, 3, 4], ["e3", "e3", "e4"])}
    monkeypatch.setattr(topic_sink, "read_view", lambda b, t, level, timeout_s: (
        np.array(views[level][0], dtype=np.int64), np.array(views[level][1], dtype=object),
        np.array([1000 + s for s in views[level][0]], dtype=np.int64)))
    spec = sink_spec_for_run("topic", tmp_path, None)
    with topic_sink.TopicSink(spec) as sink:
        assert sink.save() == tmp_path / topic_sink.SNAPSHOT_FILE

    def broker_gone(*args):
        raise AssertionError("the topic must not be read once the snapshot exists")

    monkeypatch.setattr(topic_sink, "read_view", broker_gone)
    with topic_sink.TopicSink(spec) as sink:
        assert sink.event_counts() == [("e3", 1), ("e4", 1)] and sink.attempt_seqs().tolist() == [3, 3, 4]
        assert sink.totals() == {"stored_rows": 2, "write_attempts": 3, "window_rows": 0}
        assert sink.timestamps().tolist() == [1003, 1004]  # the records' timestamps are kept for the latency
