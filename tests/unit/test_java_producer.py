"""The Java producer's Python side (lab.broker.java_producer) against a stand-in server speaking LabTxnServer's
protocol: answers matched by id (a send's after later calls'), errors as kafka-python's, and a server that dies."""

import sys
import textwrap

import pytest
from kafka import OffsetAndMetadata, TopicPartition
from kafka.errors import KafkaConnectionError, KafkaTimeoutError, ProducerFencedError

from lab.broker import java_producer
from lab.broker.java_producer import JavaTxnProducer
from lab.errors import LabError

#: Answers sends only at the next flush, in reverse order; fences the producer at "abort"; dies at "commit" when
#: told to; never answers "begin" when told to.
SERVER = textwrap.dedent("""
    import json, sys
    settings = dict(a.split("=", 1) for a in sys.argv[1:])
    print(json.dumps({"id": 0, "ok": True, "client": "stand-in"}), flush=True)
    sends, epoch = [], 0
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "send":
            sends.append(req)
            continue
        if req["op"] == "begin" and settings.get("mute") == "begin":
            continue
        if req["op"] == "commit" and settings.get("die") == "commit":
            sys.exit(3)
        answer = {"id": req["id"], "ok": True}
        if req["op"] == "flush":
            for i, s in enumerate(reversed(sends)):
                print(json.dumps({"id": s["id"], "ok": True, "partition": s["partition"], "offset": i}), flush=True)
            sends = []
        if req["op"] in ("init", "commit"):
            answer.update(producer_id=7, epoch=epoch)
            epoch += 1
        if req["op"] == "offsets":
            answer["ok"] = req["offsets"] == {"0": [5, "batch=1"]} and req["group"] == "g" and req["topic"] == "in"
        if req["op"] == "abort":
            answer = {"id": req["id"], "ok": False, "error": "ProducerFencedException", "message": "newer",
                      "retriable": False}
        print(json.dumps(answer), flush=True)
        if req["op"] == "close":
            break
""")


def producer(**settings) -> JavaTxnProducer:
    return JavaTxnProducer({"max.block.ms": 2000, **settings}, command=[sys.executable, "-c", SERVER])


def test_a_transaction_s_calls_and_sends_are_answered_each_by_its_id():
    p = producer()
    try:
        assert p.client == "stand-in"
        p.init_transactions()
        assert p.producer_id_and_epoch == (7, 0)
        p.begin_transaction()
        futures = [p.send("out", value=b"v%d" % i, key=None if i else b"k", partition=i % 2) for i in range(3)]
        assert not any(f.is_done for f in futures)  # answered at the flush, not at the send
        p.flush(timeout=5)
        assert all(f.succeeded() and not f.failed() for f in futures)
        assert [f.answer["offset"] for f in futures] == [2, 1, 0]  # the answers came in reverse: matched by id
        p.send_offsets_to_transaction({TopicPartition("in", 0): OffsetAndMetadata(5, "batch=1", -1)}, "g")
        p.commit_transaction()
        assert p.producer_id_and_epoch == (7, 1)
        with pytest.raises(ProducerFencedError, match="ProducerFencedException: newer") as e:
            p.abort_transaction()
        assert e.value.retriable is False
    finally:
        p.close(5)
    assert p._proc.returncode == 0


def test_a_server_that_dies_fails_the_waiting_call_and_every_send_not_answered():
    p = producer(die="commit")
    p.init_transactions()
    p.begin_transaction()
    pending = p.send("out", value=b"v", partition=0)
    with pytest.raises(KafkaConnectionError, match="exited"):
        p.commit_transaction()
    assert pending.failed() and isinstance(pending.exception, KafkaConnectionError)
    p.close(5)


def test_a_call_never_answered_ends_at_its_bound_and_a_send_needs_its_partition(monkeypatch):
    monkeypatch.setattr(java_producer, "ANSWER_SLACK_S", 0.3)
    p = producer(mute="begin")
    try:
        with pytest.raises(KafkaTimeoutError, match="begin not answered by the Java producer within 2.3 s"):
            p.begin_transaction()  # max.block.ms 2 s + the slack
        with pytest.raises(ValueError, match="name their partition"):
            p.send("out", value=b"v")
    finally:
        p.close(5)


def test_a_server_that_does_not_start_is_one_line():
    with pytest.raises(LabError, match="Kafka's Java producer did not start"):
        JavaTxnProducer({}, command=[sys.executable, "-c", "import sys; sys.exit(4)"])
