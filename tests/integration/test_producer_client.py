"""The ledgered producer on confluent-kafka (``producer_client="confluent"``): the plain pipeline under a lost
acknowledgement, and transactions; the audit's relations as with kafka-python (test_production.py)."""

import sqlite3

import pytest

from lab.config import make_config
from lab.events import read_events
from lab.run.supervisor import run_scenario
from tests.integration.conftest import independent_counts

pytestmark = pytest.mark.integration


def client_of(result) -> str:
    """The client the run's producer says it sent with (its ``producer-start`` event)."""
    return next(e["producer_client"] for e in read_events(result.run_dir) if e["type"] == "producer-start")


@pytest.mark.parametrize("idempotence", [True, False])
def test_lost_acknowledgements_with_confluent(runs_dir, idempotence):
    result = run_scenario(make_config(events=2000, rate=1000, idempotence=idempotence, sink="idempotent",
                                      producer_client="confluent", faults="ack-loss@at=0.5s:count=4"))
    rep = result.report
    assert rep["settings"]["producer_client"] == "confluent" == client_of(result)
    assert rep["faults_fired"][0]["proxy"]["ok"]
    # Every send has its outcome; a batch librdkafka retried after its first attempt's answer was lost can come
    # back "out of order sequence" (possibly written): unknown, never acknowledged.
    assert rep["acked"] + rep["failed_sends"] + rep["unknown_sends"] == 2000 and rep["failed_sends"] == 0
    assert rep["lost"] == 0 and rep["unseen"] == 0 and result.drained
    if idempotence:  # the retries after the lost answers were deduplicated by the broker
        assert rep["source_duplicates"] == 0
    else:  # retried after request_timeout_ms (socket.timeout.ms), as kafka-python does: written twice
        assert rep["source_duplicates"] > 0 and rep["acked"] == 2000
    # an event-id keyed sink stores each acknowledged event once, whatever the topic holds
    assert rep["exactly_once"] == rep["acked"]
    assert {k: rep[k] for k in independent_counts(result.run_dir)} == independent_counts(result.run_dir)


def test_confluent_transactions_commit_what_was_acknowledged(runs_dir):
    # No ack-loss here: librdkafka's transactional producer can take a retried batch's "out of order sequence"
    # as fatal and stop (lab.kafka.confluent_producer); a driver crash is the fault instead.
    result = run_scenario(make_config(events=2000, rate=1000, transactional=True, sink="idempotent",
                                      producer_client="confluent",
                                      faults="txn-abort@at=1s:count=1,driver-crash@at=1.5s"))
    rep = result.report
    assert rep["settings"]["transactional"] is True and client_of(result) == "confluent"
    assert rep["acked"] + rep["failed_sends"] + rep["unknown_sends"] + rep["aborted_sends"] == 2000
    # the one transaction txn-abort aborted, whole; every other send committed
    assert (rep["aborted_sends"] == result.config.producer.transaction_size
            and rep["acked"] == 2000 - rep["aborted_sends"])
    assert sorted(f["kind"] for f in rep["faults_fired"]) == ["driver-crash", "txn-abort"] and rep["restarts"] == 1
    # read_committed: every acknowledged (committed) event is in the topic once, and nothing else
    assert rep["topic_records"] == rep["acked"] and rep["source_duplicates"] == 0
    assert rep["exactly_once"] == rep["acked"] and rep["lost"] == 0 and rep["unseen"] == 0
    aborted = {eid for (eid,) in sqlite3.connect(result.run_dir / "ledger.sqlite").execute(
        "SELECT event_id FROM sends WHERE status = 'aborted'")}
    in_sink = {
        eid for (eid,) in sqlite3.connect(result.run_dir / "sink.sqlite").execute("SELECT event_id FROM sink_events")}
    assert len(aborted) == 100 and not aborted & in_sink and rep["unexpected"] == 0
