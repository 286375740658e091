"""The kafka-eos pipeline end to end: a real driver kill inside an open Kafka transaction, audited in both views."""

import pytest

from lab.config import make_config
from lab.events import read_events
from lab.run.supervisor import run_scenario
from tests.integration.conftest import assert_all_gone, batch_rows, run_pids

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("point", [pytest.param("mid-output", marks=pytest.mark.quick), "after-output-before-commit"])
def test_a_driver_killed_inside_its_transaction_is_exactly_once_read_committed(runs_dir, point):
    result = run_scenario(make_config(pipeline="kafka-eos", events=600, rate=0, max_batch_records=100,
                                      faults=f"driver-crash@batch=2:{point}"))
    r, events = result.report, read_events(result.run_dir)
    # read_committed: every acknowledged event once, none lost
    assert r["acked"] == 600 and (r["lost"], r["duplicated"], r["unseen"], r["unexpected"]) == (0, 0, 0, 0), r
    assert r["guarantee"] == "exactly-once" and r["read_committed_records"] == 600 and result.drained
    # read_uncommitted: the killed attempt's copies of batch 2 are in the log too (aborted)
    sent = batch_rows(result.run_dir, 2)
    sent = (sent + 1) // 2 if point == "mid-output" else sent
    assert sent > 0 and r["read_uncommitted_records"] == 600 + sent > r["acked"], r
    assert (r["read_uncommitted_duplicated"], r["read_uncommitted_extra_copies"]) == (sent, sent)
    assert (r["write_attempts"], r["stored_rows"], r["absorbed_rewrites"]) == (600 + sent, 600, sent)
    # the crash happened at the point; the restart initialised the same transactional id, fencing the dead producer
    assert [(e["point"], e["batch"]) for e in events if e["type"] == "fault-point"] == [(point, 2)]
    inits = [e for e in events if e["type"] == "eos-init"]
    assert [e["attempt"] for e in inits] == [1, 2] and result.restarts == 1
    assert inits[1]["transactional_id"] == inits[0]["transactional_id"] and inits[1]["same_id_as_attempt"] == 1
    assert inits[1]["producer_id"] == inits[0]["producer_id"] and inits[1]["epoch"] > inits[0]["epoch"]
    assert all(0 < e["took_s"] < 10 for e in inits)
    assert_all_gone(run_pids(result.run_dir))



def test_kafka_s_java_client_as_the_driver_s_producer_is_exactly_once_with_a_new_epoch_per_transaction(runs_dir):
    """``--txn-client java``: the same crash inside a transaction, with Kafka's Java client (transactions v2)."""
    from lab.sinks.topic import output_topic

    result = run_scenario(make_config(pipeline="kafka-eos", txn_client="java", events=600, rate=0,
                                      max_batch_records=100, faults="driver-crash@batch=2:mid-output"))
    r, events = result.report, read_events(result.run_dir)
    assert r["acked"] == 600 and (r["lost"], r["duplicated"], r["unseen"], r["unexpected"]) == (0, 0, 0, 0), r
    sent = (batch_rows(result.run_dir, 2) + 1) // 2  # the killed attempt's half of batch 2, aborted
    assert sent > 0 and r["read_uncommitted_records"] == 600 + sent, r
    assert r["settings"]["txn_client"] == "java"
    inits = [e for e in events if e["type"] == "eos-init"]
    assert [e["client"] for e in inits] == ["kafka-clients 4.4.0"] * 2, inits
    assert inits[1]["producer_id"] == inits[0]["producer_id"] and inits[1]["epoch"] > inits[0]["epoch"], inits
    # the broker's log of the output: one producer id; each transaction's end marker one epoch above its records
    # (transactions v2), so no two committed transactions share an epoch
    (out,) = r["transactions_in_log"][output_topic(result.config.topic)].values()
    assert out["new_epoch_per_transaction"] and out["markers_above_data"] == out["markers"] > 0, out
    assert_all_gone(run_pids(result.run_dir))
