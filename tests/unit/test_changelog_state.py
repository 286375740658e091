"""The key-count state's pure core (last value wins, the per-key audit), its local store, and the driver loop with
it."""

import json
import sqlite3
from types import SimpleNamespace

import pytest
from kafka.future import Future

from lab import events as ev
from lab.pipelines import kafka_eos
from lab.sinks import changelog as cs
from tests.unit.test_kafka_eos_driver import FakeConsumer, FakeProducer, Record


def change(partition, offset, key, count, batch=0):
    return cs.ChangelogRecord(partition, offset, key.encode(), cs.change_value(count, batch, 1))


# -- last value wins -----------------------------------------------------------------

def test_restore_keeps_the_last_value_of_each_key_in_read_order():
    records = [change(0, 0, "k01", 1), change(1, 0, "k02", 5), change(0, 1, "k01", 3, batch=1),
               change(0, 2, "k03", 2, batch=1), change(0, 3, "k01", 4, batch=2)]
    values = cs.last_values(records)
    assert {k: v["count"] for k, v in values.items()} == {"k01": 4, "k02": 5, "k03": 2}
    assert values["k01"]["batch"] == 2


def test_a_tombstone_deletes_its_key_and_a_later_value_brings_it_back():
    records = [change(0, 0, "k01", 1), cs.ChangelogRecord(0, 1, b"k01", None), change(0, 2, "k02", 2)]
    assert set(cs.last_values(records)) == {"k02"}
    assert cs.last_values([*records, change(0, 3, "k01", 7)])["k01"]["count"] == 7


def test_an_empty_changelog_restores_nothing():
    assert cs.last_values([]) == {}


@pytest.mark.parametrize("value", [b"not json", b'{"count":"3"}', b"[1]"])
def test_a_record_that_is_not_a_count_names_its_place(value):
    with pytest.raises(ValueError, match="changelog record 1@7 is not a count"):
        cs.last_values([cs.ChangelogRecord(1, 7, b"k01", value)])


def test_a_record_without_a_key_names_its_place():
    with pytest.raises(ValueError, match="1@7 has no key"):
        cs.last_values([cs.ChangelogRecord(1, 7, None, cs.change_value(1, 0, 1))])


def test_a_batch_adds_its_events_per_key_to_the_stored_counts():
    assert cs.batch_changes(["a", "b", "a", "c"], {"a": 10, "z": 4}) == {"a": 12, "b": 1, "c": 1}
    assert cs.batch_changes([], {"a": 1}) == {}


# -- the audit's arithmetic -------------------------------------------------------------

def test_every_key_exact():
    a = cs.changelog_audit_core({"a": 3, "b": 1}, {"a": 3, "b": 1})
    assert a == cs.ChangelogAudit(keys=2, keys_exact=2, keys_over=0, keys_under=0, overcount=0, undercount=0)


def test_over_and_under_counts_are_summed_per_direction():
    # a counted twice too many (a replayed batch), b one short, c never counted, d counted but owed nothing
    a = cs.changelog_audit_core({"a": 3, "b": 4, "c": 2, "e": 1}, {"a": 5, "b": 3, "d": 1, "e": 1})
    assert a == cs.ChangelogAudit(keys=5, keys_exact=1, keys_over=2, keys_under=2, overcount=3, undercount=3)


def test_a_key_zero_on_both_sides_is_not_counted():
    assert cs.changelog_audit_core({"a": 0}, {"a": 0}).keys == 0


# -- the local store ---------------------------------------------------------------------

def test_a_new_attempts_store_starts_empty_even_over_an_old_file(tmp_path):
    path = cs.store_path(tmp_path, 2)
    assert path == tmp_path / "state" / "attempt-2.sqlite"
    first = cs.LocalStore(path)
    first.put({"a": 3}, batch=0)
    first.close()
    second = cs.LocalStore(path)
    assert second.all() == {}
    second.put({"a": 1, "b": 2}, batch=4)
    second.put({"a": 5}, batch=5)
    assert second.counts(["a", "b", "x"]) == {"a": 5, "b": 2} and second.counts([]) == {}
    second.close()


def test_restore_loads_the_committed_changelogs_last_values(tmp_path, monkeypatch):
    records = [change(0, 0, "a", 1), change(0, 1, "a", 2, batch=1), change(1, 0, "b", 6, batch=1)]
    asked = []
    monkeypatch.setattr(cs, "read_changelog", lambda b, t, level, timeout: asked.append(level) or records)
    store = cs.LocalStore(cs.store_path(tmp_path, 1))
    got = cs.restore(store, "127.0.0.1:9", "events.x.changelog")
    assert asked == ["read_committed"] and store.all() == {"a": 2, "b": 6}
    assert (got["records"], got["keys"]) == (3, 2) and got["bytes"] == sum(len(r.key) + len(r.value) for r in records)
    store.close()


# -- the driver loop with key-count --------------------------------------------------------

class ChangelogProducer(FakeProducer):
    """FakeProducer that keeps each transaction's changelog writes apart from its output."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.changes_open, self.changes_committed, self.changes_aborted = [], [], []

    def send(self, topic, value, key, partition):
        if topic.endswith(cs.CHANGELOG_SUFFIX):
            self.changes_open.append((key.decode(), json.loads(value)["count"], partition))
            self.calls.append("change")
            future = Future()
            future.success(None)
            return future
        return super().send(topic, value, key, partition)

    def commit_transaction(self):
        super().commit_transaction()
        self.changes_committed += self.changes_open
        self.changes_open = []

    def abort_transaction(self):
        super().abort_transaction()
        self.changes_aborted += self.changes_open
        self.changes_open = []


def event(seq: int, key: str) -> bytes:
    return json.dumps({"id": f"{seq:036d}", "seq": seq, "key": key}, separators=(",", ":")).encode()


@pytest.fixture
def driver(tmp_path, monkeypatch):
    """A kafka-eos driver context over one partition of ``keys`` (batches of 2), with the fakes of
    test_kafka_eos_driver."""
    def make(producer, keys, query="key-count"):
        written = []
        ctx = SimpleNamespace(
            config=SimpleNamespace(topic="events.r1", partitions=1, max_batch_records=2, topic_configs={},
                                   query=query, cluster=SimpleNamespace(nodes=1),
                                   kafka=SimpleNamespace(trust_commit=False, delivery_timeout_s=45.0,
                                                         txn_client="python")),
            run_id="r1", bootstrap="127.0.0.1:9", attempt=1, run_dir=tmp_path, stopping=False, written=written,
            events=SimpleNamespace(write=lambda type_, **f: written.append((type_, f))), last_batch=lambda: -1,
            batch_start=lambda b, ranges, rows, **x: None, batch_done=lambda b, rows: None,
            point=lambda name, b: None, progress=lambda positions, b: None)
        consumer = FakeConsumer(ctx, [Record(0, i, k.encode(), event(i, k)) for i, k in enumerate(keys)], 2)
        monkeypatch.setattr(kafka_eos.kafka_tools, "create_topic", lambda *a, **k: None)
        monkeypatch.setattr(kafka_eos.kafka_tools, "consumer", lambda *a, **k: consumer)
        monkeypatch.setattr(kafka_eos, "_producer", lambda *a: producer)
        monkeypatch.setattr(cs, "read_changelog", lambda *a, **k: [change(0, 0, "k1", 10)])  # an earlier attempt's
        return ctx
    return make


def test_each_batch_sends_its_changed_counts_in_its_transaction_before_its_output(driver, tmp_path):
    producer = ChangelogProducer()
    ctx = driver(producer, ["k1", "k2", "k1", "k1"])
    kafka_eos.run(ctx)
    # restored k1=10 from the changelog, then batch 0 (k1, k2) and batch 1 (k1, k1)
    assert producer.changes_committed == [("k1", 11, 0), ("k2", 1, 0), ("k1", 13, 0)]
    assert producer.calls[:4] == ["init", "begin", "change", "change"]  # in the log by mid-output
    restore = [f for t, f in ctx.written if t == ev.CHANGELOG_RESTORE]
    assert len(restore) == 1 and (restore[0]["records"], restore[0]["keys"], restore[0]["attempt"]) == (1, 1, 1)
    db = sqlite3.connect(cs.store_path(tmp_path, 1))  # not LocalStore(): that would empty it
    assert dict(db.execute("SELECT key, count FROM store").fetchall()) == {"k1": 13, "k2": 1}
    db.close()


def test_an_aborted_batch_never_reaches_the_store_and_its_changes_are_sent_again(driver):
    producer = ChangelogProducer(fail_commits=1)
    ctx = driver(producer, ["k1", "k2", "k1", "k1"])
    kafka_eos.run(ctx)
    assert producer.changes_aborted == [("k1", 11, 0), ("k2", 1, 0)]
    # the replayed batch counts from the store as it was before the abort: no double count
    assert producer.changes_committed == [("k1", 11, 0), ("k2", 1, 0), ("k1", 13, 0)]


def test_passthrough_writes_no_changelog_and_restores_nothing(driver):
    producer = ChangelogProducer()
    ctx = driver(producer, ["k1", "k1"], query="passthrough")
    kafka_eos.run(ctx)
    assert producer.changes_committed == [] and not [t for t, _ in ctx.written if t == ev.CHANGELOG_RESTORE]
