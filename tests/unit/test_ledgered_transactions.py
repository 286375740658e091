"""The ledgered producer's transactions: committed only when every send in them was acknowledged."""

from types import SimpleNamespace

from kafka.errors import KafkaTimeoutError

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


def producer(tmp_path):
    events = SimpleNamespace(written=[])
    events.write = lambda type_, **f: events.written.append((type_, f))
    return LedgeredProducer(make_config(transactional=True, events=10), "127.0.0.1:9", tmp_path / "ledger.sqlite", events)


def ack(lp, seq):
    from lab.audit.ledger import LedgerEntry

    lp._in_flight[seq] = LedgerEntry(seq, f"id{seq}", "k00", "unknown", None, None, None, 0.0, None, 0)
    lp._on_ack(seq, SimpleNamespace(offset=seq, partition=0))


def fail(lp, seq):
    from lab.audit.ledger import LedgerEntry

    lp._in_flight[seq] = LedgerEntry(seq, f"id{seq}", "k00", "unknown", None, None, None, 0.0, None, 0)
    lp._on_error(seq, KafkaTimeoutError("Expiring 1 record(s): 30000 ms has passed since batch creation"))


def test_a_transaction_whose_sends_all_succeeded_commits(tmp_path):
    lp, fake = producer(tmp_path), FakeProducer()
    for seq in range(3):
        ack(lp, seq)
    lp._end_transaction(fake)
    assert fake.calls == ["flush", "commit"]
    assert [e.status for e in lp._done_entries] == ["acked"] * 3 and lp.stats.acked == 3


def test_a_transaction_with_a_failed_send_is_aborted_and_none_of_its_events_is_owed(tmp_path):
    lp, fake = producer(tmp_path), FakeProducer()
    ack(lp, 0)
    fail(lp, 1)
    ack(lp, 2)
    lp._end_transaction(fake)
    assert fake.calls == ["flush", "abort"]  # never a commit after a failed send
    # the acknowledged ones are in the log, aborted; the failed one keeps its own status
    assert [e.status for e in lp._done_entries] == ["aborted", "unknown", "aborted"]
    assert (lp.stats.aborted, lp.stats.unknown, lp.stats.acked) == (2, 1, 0)
    assert "1 of its sends failed" in lp._done_entries[0].error
