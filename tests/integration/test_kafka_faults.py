"""The embedded Apache Kafka under a broker crash and aborted transactions.

``broker-crash`` SIGKILLs the broker JVM and restarts it on its data; ``txn-abort``
makes the transactional producer abort transactions (both on the plain pipeline,
no Spark). Spark's own Kafka connector is measured with the Spark pipelines'
runs on the session's Apache Kafka: structured in ``test_structured.py``
(the reader reported, its offset log), direct with offsets in the sink in
notebook 02's test (``check_02``).
"""

import sqlite3

import pytest

from lab.audit.ledger import aborted_event_ids
from lab.config import make_config
from lab.events import read_events
from lab.run.supervisor import run_scenario
from tests.integration.conftest import assert_all_gone, independent_counts, run_pids

pytestmark = pytest.mark.integration


@pytest.mark.own_broker  # the crash kills the broker's JVM: not the session's to kill
def test_broker_crash_loses_nothing_acknowledged_with_an_idempotent_producer(runs_dir):
    result = run_scenario(make_config(events=4000, rate=1000, faults="broker-crash@at=3s:for=3s"))
    r, events = result.report, read_events(result.run_dir)
    crash = [e for e in events if e["type"] == "fault" and e["kind"] == "broker-crash"]
    restart = [e for e in events if e["type"] == "broker-restart"]
    assert len(crash) == 1 and crash[0]["pid"] and len(restart) == 1 and restart[0]["pid"] != crash[0]["pid"]
    assert restart[0]["t"] - crash[0]["t"] >= 3.0  # the broker was really down for the planned time
    assert r["broker_version"].startswith("apache-kafka ") and result.drained
    assert (r["acked"], r["lost"], r["unseen"], r["source_duplicates"]) == (4000, 0, 0, 0), r
    assert {k: r[k] for k in independent_counts(result.run_dir)} == independent_counts(result.run_dir)
    assert_all_gone(run_pids(result.run_dir))


def test_aborted_transactions_never_reach_a_read_committed_pipeline(runs_dir):
    result = run_scenario(make_config(events=3000, rate=1000, transactional=True, sink="idempotent",
                                      faults="txn-abort@at=2s:count=3"))
    r = result.report
    aborted = set(aborted_event_ids(result.run_dir / "ledger.sqlite"))
    assert len(aborted) == r["aborted_sends"] == 300  # three transactions of 100
    assert r["aborted_in_topic"] == 300, "the aborted events are in the topic, read uncommitted"
    in_sink = {
        eid for (eid,) in sqlite3.connect(result.run_dir / "sink.sqlite").execute("SELECT event_id FROM sink_events")}
    assert not aborted & in_sink and r["unexpected"] == 0
    assert (r["acked"], r["exactly_once"], r["lost"]) == (2700, 2700, 0)
    assert [e["sends"] for e in read_events(result.run_dir) if e["type"] == "txn-aborted"] == [100, 100, 100]
