"""The kafka-eos driver's loop against a fake consumer and producer: commit order, abort-and-rewind on a failed batch
or a failed send, and the bound on every transactional call."""

import json
from collections import namedtuple
from types import SimpleNamespace

import pytest
from kafka.errors import KafkaTimeoutError, ProducerFencedError
from kafka.future import Future

from lab import events as ev
from lab.pipelines import kafka_eos

Record = namedtuple("Record", "partition offset key value")


def event(seq: int) -> bytes:
    return json.dumps({"id": f"{seq:036d}", "seq": seq, "key": "k01"}, separators=(",", ":")).encode()


class FakeConsumer:
    """One partition's records; positions move as poll() returns them, seek() rewinds."""

    def __init__(self, ctx, records, batches_before_stop):
        self.ctx, self.records, self.pos, self.left = ctx, records, {}, batches_before_stop
        self.seeks = []

    def assign(self, tps):
        self.pos = {tp: 0 for tp in tps}

    def position(self, tp, timeout_ms=None):
        assert timeout_ms is not None, "a position look-up without a bound"
        return self.pos[tp]

    def committed(self, tp, metadata=False, timeout_ms=None):
        assert timeout_ms is not None, "a committed-offset look-up without a bound"
        return None

    def seek(self, tp, offset):
        self.seeks.append((tp.partition, offset))
        self.pos[tp] = offset

    def poll(self, timeout_ms, max_records):
        tp = next(iter(self.pos))
        got = self.records[self.pos[tp]:self.pos[tp] + max_records]
        if not got:
            self.left -= 1
            self.ctx.stopping = self.left <= 0
            return {}
        self.pos[tp] += len(got)
        return {tp: got}

    def close(self, autocommit):
        assert autocommit is False


class FakeProducer:
    """A transactional producer that keeps what each transaction sent; commit fails ``fail_commits`` times.

    ``fail_sends``: the sequence numbers whose sends fail (once each) with a delivery timeout, as
    kafka-python fails them, leaving the commit to succeed without them, as kafka-python 3.0.12 does.
    """

    def __init__(self, fail_commits=0, error=KafkaTimeoutError, fail_sends=()):
        self.fail_commits, self.error, self.fail_sends = fail_commits, error, set(fail_sends)
        self.open, self.committed, self.aborted, self.offsets, self.calls = None, [], [], [], []

    def init_transactions(self):
        self.calls.append("init")

    def begin_transaction(self):
        assert self.open is None, "a transaction began while one was open"
        self.open = []
        self.calls.append("begin")

    def send(self, topic, value, key, partition):
        seq, future = json.loads(value)["seq"], Future()
        if seq in self.fail_sends:
            self.fail_sends.discard(seq)
            future.failure(KafkaTimeoutError("Expiring 1 record(s): 45000 ms has passed since batch creation"))
        else:
            self.open.append(seq)
            future.success(None)
        return future

    def flush(self, timeout=None):
        assert timeout is not None, "a flush without a bound"
        self.calls.append("flush")

    def send_offsets_to_transaction(self, offsets, group):
        self.offsets.append(({tp.partition: (o.offset, o.metadata) for tp, o in offsets.items()}, group))
        self.calls.append("offsets")

    def commit_transaction(self):
        if self.fail_commits:
            self.fail_commits -= 1
            raise self.error("the broker was away")
        self.committed += self.open
        self.open = None
        self.calls.append("commit")

    def abort_transaction(self):
        self.aborted += self.open
        self.open = None
        self.calls.append("abort")

    def close(self, timeout):
        pass


@pytest.fixture
def driver(tmp_path, monkeypatch):
    def make(producer, records, batch=2, trust_commit=False):
        written = []
        ctx = SimpleNamespace(
            config=SimpleNamespace(topic="events.r1", partitions=1, max_batch_records=batch, topic_configs={},
                                   query="passthrough", cluster=SimpleNamespace(nodes=1),
                                   kafka=SimpleNamespace(trust_commit=trust_commit, delivery_timeout_s=45.0,
                                                        txn_client="python")),
            run_id="r1",
            bootstrap="127.0.0.1:9", attempt=1, run_dir=tmp_path, stopping=False, points=[], progressed=[],
            events=SimpleNamespace(write=lambda type_, **f: written.append((type_, f))), written=written,
            last_batch=lambda: -1, batch_start=lambda b, ranges, rows, **x: written.append((ev.BATCH_START, b)),
            batch_done=lambda b, rows: written.append((ev.BATCH_DONE, b)),
        )
        ctx.point = lambda name, b: ctx.points.append((name, b))
        ctx.progress = lambda positions, b: ctx.progressed.append((dict(positions), b))
        consumer = FakeConsumer(ctx, records, batches_before_stop=2)
        monkeypatch.setattr(kafka_eos.kafka_tools, "create_topic", lambda *a, **k: None)
        monkeypatch.setattr(kafka_eos.kafka_tools, "consumer", lambda *a, **k: consumer)
        monkeypatch.setattr(kafka_eos, "_producer", lambda *a: producer)
        return ctx, consumer
    return make


def test_each_batch_is_one_transaction_with_its_offsets_and_points_in_order(driver):
    producer = FakeProducer()
    ctx, _ = driver(producer, [Record(0, i, b"k", event(i)) for i in range(4)])
    kafka_eos.run(ctx)
    assert producer.committed == [0, 1, 2, 3] and producer.aborted == []
    # a flush at mid-output and one before the offsets: every record is in the log at after-output-before-commit
    assert producer.calls == ["init", "begin", "flush", "flush", "offsets", "commit", "begin", "flush", "flush",
                              "offsets", "commit"]
    assert producer.offsets == [({0: (2, "batch=0")}, "lab-r1"), ({0: (4, "batch=1")}, "lab-r1")]
    assert ctx.points == [("mid-output", 0), ("after-output-before-commit", 0),
                          ("mid-output", 1), ("after-output-before-commit", 1)]
    assert ({0: 4}, 1) in ctx.progressed
    init = [f for t, f in ctx.written if t == ev.EOS_INIT]
    assert init[0]["transactional_id"] == "lab-r1-eos" and init[0]["same_id_as_attempt"] is None


def test_a_failed_commit_aborts_and_reads_the_batch_again_from_the_last_commit(driver):
    producer = FakeProducer(fail_commits=1)
    ctx, consumer = driver(producer, [Record(0, i, b"k", event(i)) for i in range(4)])
    kafka_eos.run(ctx)
    assert producer.aborted == [0, 1] and producer.committed == [0, 1, 2, 3]  # each once, committed
    assert consumer.seeks == [(0, 0)]
    errors = [f for t, f in ctx.written if t == ev.BATCH_ERROR]
    assert len(errors) == 1 and errors[0]["action"] == "abort-and-rewind" and errors[0]["batch"] == 0
    assert [b for t, b in ctx.written if t == ev.BATCH_DONE] == [0, 1]


def test_a_fenced_producer_ends_the_driver(driver):
    producer = FakeProducer(fail_commits=1, error=ProducerFencedError)
    ctx, _ = driver(producer, [Record(0, i, b"k", event(i)) for i in range(2)])
    with pytest.raises(ProducerFencedError):
        kafka_eos.run(ctx)
    assert producer.committed == [] and producer.aborted == []


def test_a_failed_send_aborts_the_transaction_instead_of_committing_it(driver):
    # seq 1 of batch 0 fails by its delivery timeout; kafka-python would commit the rest: the driver must not
    producer = FakeProducer(fail_sends=[1])
    ctx, consumer = driver(producer, [Record(0, i, b"k", event(i)) for i in range(4)])
    kafka_eos.run(ctx)
    assert producer.aborted == [0] and producer.committed == [0, 1, 2, 3]  # batch 0 again, whole, then batch 1
    assert consumer.seeks == [(0, 0)]
    errors = [f for t, f in ctx.written if t == ev.BATCH_ERROR]
    assert [(e["batch"], e["action"], e["failed_sends"], e["sends"]) for e in errors] == [(0, "abort-and-rewind", 1, 2)]
    assert "KafkaTimeoutError" in errors[0]["error"]
    # the send failed in the second half: no commit call, no offsets for the failed attempt
    assert producer.calls[:5] == ["init", "begin", "flush", "flush", "abort"]


def test_with_trust_commit_the_client_commits_past_a_failed_send_and_the_driver_says_so(driver):
    producer = FakeProducer(fail_sends=[1])
    ctx, consumer = driver(producer, [Record(0, i, b"k", event(i)) for i in range(4)], trust_commit=True)
    kafka_eos.run(ctx)
    assert producer.committed == [0, 2, 3] and producer.aborted == [] and consumer.seeks == []  # seq 1 lost
    said = [f for t, f in ctx.written if t == ev.COMMITTED_WITH_FAILED_SENDS]
    assert [(f["batch"], f["failed_sends"], f["sends"]) for f in said] == [(0, 1, 2)]


def test_a_commit_that_never_returns_ends_the_driver_within_its_bound(driver, monkeypatch):
    import threading

    never = threading.Event()
    producer = FakeProducer()
    producer.commit_transaction = lambda: never.wait()  # kafka-python's wait() without a timeout
    monkeypatch.setattr(kafka_eos, "TXN_CALL_S", 0.2)
    ctx, _ = driver(producer, [Record(0, i, b"k", event(i)) for i in range(2)])
    with pytest.raises(kafka_eos.CallTimedOut, match=r"commit_transaction\(\) did not return within 0.2 s"):
        kafka_eos.run(ctx)
    errors = [f for t, f in ctx.written if t == ev.BATCH_ERROR]
    assert [(e["batch"], e["action"]) for e in errors] == [(0, "exit")]
    never.set()


def test_a_send_refused_as_fenced_ends_the_driver_as_fenced(driver):
    # a newer driver took the id while this one's sends were in flight: the futures fail with the fencing
    producer = FakeProducer()
    real_send = producer.send

    def fenced_send(topic, value, key, partition):
        future = real_send(topic, value, key, partition)
        future.exception, future.value = ProducerFencedError("a newer producer has this transactional id"), None
        return future

    producer.send = fenced_send
    ctx, _ = driver(producer, [Record(0, i, b"k", event(i)) for i in range(2)])
    with pytest.raises(kafka_eos.SendFailed):
        kafka_eos.run(ctx)
    assert [t for t, _ in ctx.written if t in (ev.PRODUCER_FENCED, ev.BATCH_ERROR)] == [ev.PRODUCER_FENCED]
    assert producer.committed == [] and producer.aborted == []
