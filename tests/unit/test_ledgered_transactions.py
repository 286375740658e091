"""The ledgered producer's transactions: committed only when every send in it was acknowledged."""

from types import SimpleNamespace

from kafka.errors import KafkaTimeoutError

from lab.audit.ledger import LedgerEntry
from lab.config import make_config
from lab.run.producer import LedgeredProducer


class FakeProducer:
    def __init__(self):
        self.calls = []

    def flush(self, timeout=None):
        assert timeout is not None, "a flush without a bound"
        self.calls.append("flush")

    def commit_transaction(self):
        self.calls.append("commit")

    def abort_transaction(self):
        self.calls.append("abort")


class Ledger:
    """Takes what the producer writes."""

    def __init__(self):
        self.rows = []

    def record(self, rows):
        self.rows += [LedgerEntry(*r) for r in rows]


def producer(tmp_path):
    events = SimpleNamespace(written=[])
    events.write = lambda type_, **f: events.written.append((type_, f))
    lp = LedgeredProducer(make_config(transactional=True, events=10), "127.0.0.1:9", tmp_path / "ledger.sqlite", events)
    lp._ids, lp._keys = [f"id{s}" for s in range(10)], ["k00"] * 10
    return lp


def ack(lp, seq):
    lp._pending[seq] = (0.0, 0)
    lp._kafka_python_report()(seq, SimpleNamespace(offset=seq, partition=0))


def fail(lp, seq):
    lp._pending[seq] = (0.0, 0)
    lp._kafka_python_report()(seq, KafkaTimeoutError("Expiring 1 record(s): 30000 ms has passed since batch creation"))


def ended(lp, fake):
    lp._end_transaction(fake)
    ledger = Ledger()
    lp._drain_to(ledger)
    return ledger.rows


def test_a_transaction_whose_sends_all_succeeded_commits(tmp_path):
    lp, fake = producer(tmp_path), FakeProducer()
    for seq in range(3):
        ack(lp, seq)
    assert lp._done == [] and len(lp._held) == 3  # held until the transaction ends
    rows = ended(lp, fake)
    assert fake.calls == ["flush", "commit"]
    assert [e.status for e in rows] == ["acked"] * 3 and lp.stats.acked == 3
    assert [e.kafka_offset for e in rows] == [0, 1, 2] and lp._held == []


def test_a_transaction_with_a_failed_send_is_aborted_and_none_of_its_events_is_owed(tmp_path):
    lp, fake = producer(tmp_path), FakeProducer()
    ack(lp, 0)
    fail(lp, 1)
    ack(lp, 2)
    rows = ended(lp, fake)
    assert fake.calls == ["flush", "abort"]  # never a commit after a failed send
    # the acknowledged ones are in the log, aborted; the failed one keeps its own status
    assert [e.status for e in rows] == ["aborted", "unknown", "aborted"]
    assert (lp.stats.aborted, lp.stats.unknown, lp.stats.acked) == (2, 1, 0)
    assert "1 of its sends failed" in rows[0].error
    assert "KafkaTimeoutError" in rows[1].error  # the failed send keeps its own error


def test_a_txn_abort_fault_aborts_a_clean_transaction_and_says_so(tmp_path):
    lp, fake = producer(tmp_path), FakeProducer()
    lp.abort_next(1)
    ack(lp, 0)
    ack(lp, 1)
    rows = ended(lp, fake)
    assert fake.calls == ["flush", "abort"] and [e.status for e in rows] == ["aborted"] * 2
    assert lp.events.written[-1] == ("txn-aborted", {"sends": 2, "first_seq": 0, "last_seq": 1})


def test_a_transaction_with_a_send_still_without_an_outcome_after_the_flush_is_aborted(tmp_path):
    lp, fake = producer(tmp_path), FakeProducer()
    ack(lp, 0)
    lp._pending[1] = (0.0, 0)  # its future never completed: no acknowledgement to commit past
    ack(lp, 2)
    rows = ended(lp, fake)
    assert fake.calls == ["flush", "abort"]
    assert [(e.seq, e.status) for e in rows] == [(0, "aborted"), (2, "aborted")]
    assert "1 of its sends had no outcome after the flush" in rows[0].error and 1 in lp._pending  # unknown at the end


def test_a_send_left_from_an_earlier_transaction_does_not_abort_the_next(tmp_path):
    lp, fake = producer(tmp_path), FakeProducer()
    lp._pending[1] = (0.0, 0)  # an earlier transaction's, ended (aborted) without it
    lp._txn_first = 5
    ack(lp, 5)
    assert ended(lp, fake)[0].status == "acked" and fake.calls == ["flush", "commit"]
