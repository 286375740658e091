"""kafka-eos when a send fails inside an open transaction, on the three-broker cluster.

A send fails by its delivery timeout while the broker stays up: ``leader-unreachable`` cuts the client
proxy of a broker that leads an output partition (not the transaction coordinator) for longer than the
producer's delivery timeout. kafka-python 3.0.12 then commits the transaction without the failed sends
(``--trust-commit`` leaves the commit to it); the driver's own check aborts it and reads the batch again. Kafka's
Java client (``--txn-client java``) refuses that commit itself.
One cluster for the module (``lab broker start --nodes 3``), each run its own topic.
"""

import pytest

from lab.config import make_config
from lab.events import read_events
from lab.run.supervisor import run_scenario
from tests.integration.conftest import assert_all_gone, module_cluster

pytestmark = [pytest.mark.integration, pytest.mark.own_broker,
              pytest.mark.xdist_group("test_kafka_eos_sends")]

#: The cut comes once batch 3's sends are all acknowledged (after-output-before-commit), so the next batch's
#: sends to the cut broker never leave the client (a send that was in flight takes another path in
#: kafka-python: it bumps the producer epoch), and it lasts longer than their delivery timeout.
CUT = dict(pipeline="kafka-eos", nodes=3, events=2000, rate=100, max_batch_records=100, delivery_timeout_s=11,
           faults="leader-unreachable@batch=3:after-output-before-commit:for=15s")


@pytest.fixture(scope="module")
def cluster_runs(tmp_path_factory):
    with module_cluster(tmp_path_factory) as path:
        yield path


def driver_pids(events) -> list[int]:
    return [e["pid"] for e in events if e["type"] in ("driver-start", "standby-start")]


def cut_of(events) -> dict:
    cuts = [e for e in events if e["type"] == "fault" and e["kind"] == "leader-unreachable"]
    assert len(cuts) == 1 and cuts[0].get("node") is not None, cuts  # a broker leading an output partition was cut
    assert cuts[0]["node"] not in cuts[0]["coordinators"] and cuts[0]["leads"], cuts
    assert cuts[0]["client_prefix"].endswith("-eos") and cuts[0]["proxy"]["client_cut_for_s"] > 0, cuts  # the producer
    return cuts[0]


def test_the_driver_aborts_a_transaction_with_a_failed_send_and_the_run_is_exactly_once(cluster_runs):
    result = run_scenario(make_config(**CUT, runs_dir=str(cluster_runs)))
    r, events = result.report, read_events(result.run_dir)
    cut_of(events)
    errors = [e for e in events if e["type"] == "batch-error"]
    assert any(e.get("failed_sends", 0) > 0 for e in errors), errors  # a send failed, and its batch was not committed
    assert not [e for e in events if e["type"] == "committed-with-failed-sends"]
    assert r["acked"] == 2000 and (r["lost"], r["duplicated"], r["unseen"], r["unexpected"]) == (0, 0, 0, 0), r
    assert r["guarantee"] == "exactly-once" and result.drained
    assert_all_gone(driver_pids(events))  # the cluster is the module's


def test_with_trust_commit_the_client_commits_without_the_failed_sends_and_they_are_lost(cluster_runs):
    result = run_scenario(make_config(**CUT, trust_commit=True, runs_dir=str(cluster_runs)))
    r, events = result.report, read_events(result.run_dir)
    cut_of(events)
    let_through = [e for e in events if e["type"] == "committed-with-failed-sends"]
    assert let_through, "no transaction was committed past a failed send: this run could not show the lesson"
    # exactly the events whose sends failed in committed transactions are missing from the output
    assert r["lost"] == sum(e["failed_sends"] for e in let_through) > 0, (r, let_through)
    assert r["exactly_once"] + r["lost"] == r["acked"] == 2000 and r["duplicated"] == 0 and result.drained, r
    assert_all_gone(driver_pids(events))  # the cluster is the module's


def test_kafka_s_java_client_refuses_to_commit_past_a_failed_send_even_when_trusted(cluster_runs):
    """``--txn-client java --trust-commit``: the Java client moves the transaction to an abortable error when a send
    expires (KAFKA-5385), so its commit fails and the driver aborts and reads the batch again."""
    result = run_scenario(make_config(**CUT, trust_commit=True, txn_client="java", runs_dir=str(cluster_runs)))
    r, events = result.report, read_events(result.run_dir)
    cut_of(events)
    assert not [e for e in events if e["type"] == "committed-with-failed-sends"]
    refused = [e for e in events if e["type"] == "batch-error" and e["action"] == "abort-and-rewind"]
    assert refused and all("failed_sends" not in e for e in refused), refused  # the client's refusal, not the check
    assert r["acked"] == 2000 and (r["lost"], r["duplicated"], r["unseen"], r["unexpected"]) == (0, 0, 0, 0), r
    assert r["guarantee"] == "exactly-once" and result.drained
    assert_all_gone(driver_pids(events))
