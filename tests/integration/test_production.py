"""Duplicates born at the source: lost acknowledgements with and without an idempotent producer."""

import pytest

from lab.config import make_config
from lab.run.supervisor import run_scenario

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("idempotence", [False, True])
def test_ack_loss(runs_dir, idempotence):
    r = run_scenario(make_config(events=2000, rate=1000, idempotence=idempotence, sink="idempotent",
                                 faults="ack-loss@at=0.5s:count=4"))
    rep = r.report
    assert rep["faults_fired"][0]["proxy"]["ok"]
    assert rep["acked"] == 2000 and rep["lost"] == 0 and rep["unseen"] == 0
    # counted from the topic itself, independently of the sink
    assert rep["source_extra_copies"] == rep["topic_records"] - 2000
    if idempotence:
        assert rep["source_duplicates"] == 0
    else:
        assert rep["source_duplicates"] > 0
    # an event-id keyed sink stores each event once whatever the topic holds
    assert rep["exactly_once"] == 2000 and rep["stored_rows"] == 2000


def test_source_duplicates_flow_through_an_append_sink(runs_dir):
    rep = run_scenario(make_config(events=2000, rate=1000, idempotence=False, faults="ack-loss@at=0.5s:count=4")).report
    assert rep["source_duplicates"] > 0 and rep["duplicated"] >= rep["source_duplicates"]


def test_broker_outage_loses_no_acknowledged_event(runs_dir):
    rep = run_scenario(make_config(events=3000, rate=1000, faults="broker-outage@at=1s:for=3s")).report
    assert rep["faults_fired"][0]["proxy"]["ok"] and rep["faults_fired"][0]["duration_s"] == 3.0
    assert rep["acked"] + rep["failed_sends"] + rep["unknown_sends"] == 3000
    assert rep["lost"] == 0 and rep["unseen"] == 0 and rep["drained"]


def test_transactional_producer_under_ack_loss(runs_dir):
    rep = run_scenario(make_config(events=2000, rate=1000, transactional=True, sink="idempotent",
                                   faults="ack-loss@at=0.5s:count=4")).report
    assert rep["settings"]["transactional"] is True
    # read_committed: only committed transactions count, in the topic and in the sink
    assert rep["source_duplicates"] == 0 and rep["topic_records"] == rep["acked"]
    assert rep["acked"] + rep["failed_sends"] + rep["unknown_sends"] + rep["aborted_sends"] == 2000
    assert rep["lost"] == 0 and rep["unseen"] == 0
