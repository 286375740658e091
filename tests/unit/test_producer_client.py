"""The ledgered producer's client setting, its confluent-kafka settings and how each client's outcomes become
ledger rows. No broker: the clients' reports are made by hand."""

import json
import sqlite3
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka.errors import KafkaTimeoutError, for_code

from lab.audit.ledger import Ledger, LedgerEntry
from lab.config import PRODUCER_KEYS, RunConfig, make_config
from lab.errors import LabError
from lab.kafka.confluent_producer import confluent_config, is_definite_rejection
from lab.kafka.producer_settings import PRODUCER_CLIENTS, ProducerSettings
from lab.run.produced_events import SEQ_AT, LateEvents, event_ids, event_value
from lab.run.producer import LedgeredProducer

# -- the setting ----------------------------------------------------------------------------------------

def test_kafka_python_is_the_default_client_and_confluent_a_choice():
    assert ProducerSettings().producer_client == "kafka-python" == make_config().producer.producer_client
    assert PRODUCER_CLIENTS == ("kafka-python", "confluent") and "producer_client" in PRODUCER_KEYS
    cfg = make_config(producer_client="confluent", transactional=True)
    assert cfg.producer.producer_client == "confluent" and cfg.option("producer_client") == "confluent"
    assert cfg.flat()["producer"]["producer_client"] == "confluent"  # config.json states it
    assert RunConfig.from_json(cfg.to_json()).producer.producer_client == "confluent"


def test_an_unknown_client_is_one_line_naming_the_choices():
    with pytest.raises(LabError) as e:
        make_config(producer_client="librdkafka")
    assert str(e.value) == "unknown producer client 'librdkafka'; valid choices: confluent, kafka-python"


def test_the_report_names_the_client():
    from lab.run.result import RunResult, build_report

    audit = SimpleNamespace(counts=lambda: {})
    for client in PRODUCER_CLIENTS:
        result = RunResult(make_config(producer_client=client), None, audit, {}, [], 0, True, 0)
        assert build_report(result, [])["settings"]["producer_client"] == client


# -- confluent-kafka's settings ----------------------------------------------------------------------------

def lab_producer(tmp_path, **params) -> LedgeredProducer:
    events = SimpleNamespace(written=[])
    events.write = lambda type_, **f: events.written.append((type_, f))
    return LedgeredProducer(make_config(events=6, **params), "127.0.0.1:9", tmp_path / "ledger.sqlite", events)


def test_every_semantic_setting_is_stated_in_librdkafka_names(tmp_path):
    lp = lab_producer(tmp_path, producer_client="confluent", transactional=True, name="n")
    p = lp.config.producer
    c = confluent_config(p, lp.bootstrap, f"lab-n-{lp.config.seed}", lp._delivery_timeout_ms())
    assert {k: c[k] for k in ("acks", "retries", "enable.idempotence", "max.in.flight.requests.per.connection",
                              "request.timeout.ms", "socket.timeout.ms", "message.timeout.ms", "linger.ms",
                              "transactional.id")} == {
        "acks": "all", "retries": 5, "enable.idempotence": True, "max.in.flight.requests.per.connection": 5,
        # the client's own wait for an answer too, as kafka-python's request_timeout_ms (ack-loss is retried)
        "request.timeout.ms": 3000, "socket.timeout.ms": 3000, "message.timeout.ms": 30000, "linger.ms": 5,
        "transactional.id": f"lab-n-{lp.config.seed}"}  # the kafka-python producer's id
    assert c["partitioner"] == "murmur2_random"  # keys on kafka-python's partitions
    assert c["retry.backoff.ms"] == c["retry.backoff.max.ms"] == 100
    plain = confluent_config(make_config(acks="1", idempotence=False).producer, "b:1", None, 30000)
    assert plain["acks"] == "1" and plain["enable.idempotence"] is False and "transactional.id" not in plain


def test_librdkafka_accepts_the_settings():
    from confluent_kafka import Producer

    for params in ({}, {"acks": "0", "idempotence": False}, {"transactional": True}):
        config = confluent_config(make_config(**params).producer, "127.0.0.1:9", "t" if params.get("transactional")
                                  else None, 30000)
        Producer({**config, "log_level": 0})  # a bad name or value raises here


# -- outcomes -> ledger rows ------------------------------------------------------------------------------

@pytest.mark.parametrize("code, status", [
    (KafkaError._MSG_TIMED_OUT, "unknown"),  # may have been written before the timeout
    (KafkaError._TRANSPORT, "unknown"),
    (KafkaError._TIMED_OUT, "unknown"),
    (KafkaError._PURGE_INFLIGHT, "unknown"),
    (KafkaError.NOT_LEADER_FOR_PARTITION, "unknown"),  # retriable: retries ran out
    (KafkaError.NOT_ENOUGH_REPLICAS, "unknown"),
    (KafkaError.MSG_SIZE_TOO_LARGE, "failed"),  # the broker's definite no
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, "failed"),
    (KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, "unknown"),  # a retry after a lost answer: possibly written
])
def test_a_confluent_delivery_error_is_failed_only_when_the_broker_refused_for_good(code, status):
    assert ("failed" if is_definite_rejection(KafkaError(code)) else "unknown") == status
    if code > 0 and code != KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER:  # the word kafka-python's error gets
        assert getattr(for_code(code), "retriable", False) == (status == "unknown")


class Msg:
    """A delivery report's message: what confluent-kafka hands the callback."""

    def __init__(self, value: bytes, partition: int, offset: int) -> None:
        self._value, self._partition, self._offset = value, partition, offset

    def value(self):
        return self._value

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset


def reported(lp, client: str, outcomes: list) -> list[LedgerEntry]:
    """The ledger rows of sends 0..n-1 whose client reported ``outcomes`` (offset, or an error), in that order."""
    lp._ids, lp._keys = event_ids(1, len(outcomes)), [f"k{s:02d}" for s in range(len(outcomes))]
    rows = Ledger(lp.ledger_path)
    for seq, outcome in enumerate(outcomes):
        lp._pending[seq] = (100.0 + seq, 5000 + seq)
        error = outcome if isinstance(outcome, BaseException | KafkaError) else None
        if client == "confluent":
            value = event_value(lp._ids[seq], seq, lp._keys[seq], 5000 + seq, 100.0 + seq)
            lp._confluent_report()(error, Msg(value, 2, -1001 if error else outcome))
        else:
            lp._kafka_python_report()(seq, error or SimpleNamespace(partition=2, offset=outcome))
    lp._drain_to(rows)
    got = [LedgerEntry(*r) for r in sqlite3.connect(lp.ledger_path).execute("SELECT * FROM sends ORDER BY seq")]
    rows.close()
    return got


@pytest.mark.parametrize("client", PRODUCER_CLIENTS)
def test_both_clients_write_the_same_rows(tmp_path, client):
    if client == "confluent":
        errors = [KafkaError(KafkaError._MSG_TIMED_OUT), KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)]
    else:
        errors = [KafkaTimeoutError("expired"), for_code(KafkaError.MSG_SIZE_TOO_LARGE)()]
    lp = lab_producer(tmp_path)
    rows = reported(lp, client, [7, -1, *errors])
    assert [(r.seq, r.status, r.partition, r.kafka_offset, r.sent_at, r.event_time_ms) for r in rows] == [
        (0, "acked", 2, 7, 100.0, 5000),
        (1, "acked", 2, None, 101.0, 5001),  # acknowledged without an offset (offset -1)
        (2, "unknown", None, None, 102.0, 5002),  # a timeout: it may be in the topic
        (3, "failed", None, None, 103.0, 5003),  # the broker refused it
    ]
    assert rows[1].error == "acknowledged without an offset" and rows[0].error is None
    assert all(r.event_id == lp._ids[r.seq] and r.done_at for r in rows)
    assert (lp.stats.acked, lp.stats.unknown, lp.stats.failed) == (2, 1, 1)


@pytest.mark.parametrize("client", PRODUCER_CLIENTS)
def test_with_acks_0_an_answer_without_offset_proves_nothing(tmp_path, client):
    lp = lab_producer(tmp_path, acks="0", idempotence=False)
    assert [r.status for r in reported(lp, client, [-1, 3])] == ["unknown", "acked"]


def test_a_report_after_the_send_was_given_up_is_ignored(tmp_path):
    lp = lab_producer(tmp_path, producer_client="confluent")
    lp._ids, lp._keys = event_ids(1, 1), ["k00"]
    lp._confluent_report()(None, Msg(event_value(lp._ids[0], 0, "k00", 1, 1.0), 0, 5))  # never pending
    assert lp._done == []


class Flaky(Msg):
    """A report whose first ``failures`` reads raise, as confluent-kafka's does with an exception left set."""

    def __init__(self, value, partition, offset, failures):
        super().__init__(value, partition, offset)
        self.failures = failures

    def value(self):
        if self.failures:
            self.failures -= 1
            raise SystemError("<method 'index' of 'bytes' objects> returned a result with an exception set")
        return super().value()


def test_a_report_that_cannot_be_read_at_first_is_read_again_and_else_left_unknown(tmp_path):
    lp = lab_producer(tmp_path, producer_client="confluent")
    lp._ids, lp._keys = event_ids(1, 2), ["k00", "k01"]
    report = lp._confluent_report()
    for seq, failures in ((0, 1), (1, 2)):
        lp._pending[seq] = (1.0, 1000)
        report(None, Flaky(event_value(lp._ids[seq], seq, lp._keys[seq], 1000, 1.0), 0, 9, failures))
    assert [r[0] for r in lp._acked] == [0] and list(lp._pending) == [1]  # read the second time; 1 stays unknown
    assert lp.events.written[-1][0] == "producer-error" and "SystemError" in lp.events.written[-1][1]["error"]


def test_an_event_value_is_json_dumps_of_its_fields():
    ids, late = event_ids(3, 2000), LateEvents(3, 0.5, 60.0)
    for seq in range(2000):
        now = 1_796_594_000.0 + seq * 0.0137
        etm = late.event_time_ms(now)
        value = event_value(ids[seq], seq, f"k{seq % 64:02d}", etm, now)
        assert value == json.dumps({"id": ids[seq], "seq": seq, "key": f"k{seq % 64:02d}", "event_time_ms": etm,
                                    "produced_at": now}, separators=(",", ":")).encode()
        assert int(value[SEQ_AT:value.index(b",", SEQ_AT)]) == seq


def test_the_ledger_takes_plain_rows_and_still_checks_the_status(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.record([(0, "e0", "k0", "acked", 0, 0, None, 1.0, 1.1, 5), LedgerEntry(1, "e1", "k1", "failed", None, None,
                                                                               "x", 1.0, 1.1, 5)])
    with pytest.raises(sqlite3.IntegrityError):
        ledger.record([(2, "e2", "k0", "lost", 0, 0, None, 1.0, 1.1, 5)])
    assert [r[3] for r in ledger.db.execute("SELECT * FROM sends ORDER BY seq")] == ["acked", "failed"]
    ledger.close()


# -- the confluent send loop against a stand-in client ---------------------------------------------------

class FakeConfluent:
    """A confluent-kafka producer that stores every send (offsets per partition) and reports it when polled."""

    def __init__(self, full_once=(), refuse=()):
        self.reports, self.offsets, self.full_once, self.refuse = [], [0, 0], set(full_once), set(refuse)

    def produce(self, topic, value, key, on_delivery):
        seq = int(value[SEQ_AT:value.index(b",", SEQ_AT)])
        if seq in self.full_once:
            self.full_once.discard(seq)
            raise BufferError("Local: Queue full")
        if seq in self.refuse:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC))
        partition = seq % 2
        self.reports.append((on_delivery, Msg(value, partition, self.offsets[partition])))
        self.offsets[partition] += 1

    def produce_waiting(self, *args, **kwargs):
        self.poll(0)
        self.produce(*args, **kwargs)

    def poll(self, timeout=0):
        reports, self.reports = self.reports, []
        for callback, msg in reports:
            callback(None, msg)

    def flush(self, timeout):
        self.poll()

    def close(self, timeout):
        pass


def test_the_confluent_loop_ledgers_every_send_through_backpressure_and_refusals(tmp_path):
    lp = lab_producer(tmp_path, producer_client="confluent", rate=0)
    fake = FakeConfluent(full_once={2}, refuse={4})
    lp._make_confluent = lambda: fake
    lp._run()
    rows = [LedgerEntry(*r) for r in sqlite3.connect(lp.ledger_path).execute("SELECT * FROM sends ORDER BY seq")]
    assert [(r.status, r.partition, r.kafka_offset) for r in rows] == [
        ("acked", 0, 0), ("acked", 1, 0), ("acked", 0, 1), ("acked", 1, 1),
        ("failed", None, None),  # refused by the client: nothing left it
        ("acked", 1, 2)]
    assert "_UNKNOWN_TOPIC" in rows[4].error
    assert [r.event_id for r in rows] == event_ids(lp.config.seed, 6)
    assert (lp.stats.sent, lp.stats.acked, lp.stats.failed, lp.stats.done) == (5, 5, 1, True)
    assert lp.events.written[0][1]["producer_client"] == "confluent"  # producer-start names the client


def test_event_ids_are_the_seeds_uuid4s():
    import random
    import uuid

    for seed in (1, 7, 12345):
        rng = random.Random(seed)
        assert event_ids(seed, 3000) == [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(3000)]


def test_record_acked_writes_the_rows_record_writes(tmp_path):
    from lab.audit.ledger import ROWS_PER_INSERT

    n = 2 * ROWS_PER_INSERT + 5  # two whole statements and a rest
    rows = [(s, f"e{s}", "k01", "acked", s % 3, 10 + s, None, 1.5 + s / 7, 2.25 + s, 1000 + s) for s in range(n)]
    full, short = Ledger(tmp_path / "full.sqlite"), Ledger(tmp_path / "short.sqlite")
    full.record(rows)
    short.record_acked([r[:3] + r[4:6] + r[7:] for r in rows])
    written = full.db.execute("SELECT * FROM sends ORDER BY seq").fetchall()
    assert len(written) == n and written == short.db.execute("SELECT * FROM sends ORDER BY seq").fetchall()
    full.close()
    short.close()


def test_the_ledger_writer_writes_in_order_and_reports_a_failed_write(tmp_path):
    from lab.audit.ledger import LedgerWriter

    writer = LedgerWriter(tmp_path / "l.sqlite")
    writer.record([(0, "e0", "k0", "unknown", None, None, None, 1.0, None, 5)])
    writer.record_acked([(1, "e1", "k1", 0, 4, 1.0, 1.1, 5)])
    writer.record([(0, "e0", "k0", "failed", None, None, "x", 1.0, 1.2, 5)])  # a later outcome replaces
    writer.close()
    db = sqlite3.connect(tmp_path / "l.sqlite")
    assert db.execute("SELECT seq, status, kafka_offset FROM sends ORDER BY seq").fetchall() == [
        (0, "failed", None), (1, "acked", 4)]
    broken = LedgerWriter(tmp_path / "b.sqlite")
    broken.record([(0, "e0", "k0", "lost", None, None, None, 1.0, None, 5)])  # the status check refuses it
    with pytest.raises(sqlite3.IntegrityError):
        broken.close()
