"""The share pipeline's pure parts: poison records, the delivery log, archived events, the group's settled offsets."""

import numpy as np
import pytest

from lab.audit.auditor import LedgerView, audit_core
from lab.audit.deliveries import archived_mask, delivery_report, delivery_table
from lab.config import make_config
from lab.errors import LabError
from lab.faults.catalogue import event_keys
from lab.faults.plan import parse_fault_plan, poison_seqs
from lab.share.state import settled


def test_poison_names_the_first_records_of_its_key_as_the_producer_draws_them():
    keys = event_keys(1, 3000)
    assert keys == event_keys(1, 3000) and set(keys) <= {f"k{n:02d}" for n in range(64)}
    first = [s for s, k in enumerate(keys) if k == "k07"]
    (one,) = parse_fault_plan("poison@key=7")
    (three,) = parse_fault_plan("poison@key=7:count=3")
    assert poison_seqs(one, 1, 3000) == first[:1] and poison_seqs(three, 1, 3000) == first[:3]


@pytest.mark.parametrize("plan, must_name", [
    ("poison@at=3s", ["poison@key=<n>"]), ("poison@key=64", ["k63", "0 to 63"]),
    ("driver-crash@key=3", ["poison", "driver-crash"]),
])
def test_a_bad_poison_plan_names_the_value_and_the_choices(plan, must_name):
    with pytest.raises(LabError) as e:
        parse_fault_plan(plan)
    assert all(word in str(e.value) for word in must_name), str(e.value)


def test_share_settings_are_refused_where_they_mean_nothing():
    with pytest.raises(LabError, match="--consumers is the share pipeline's setting"):
        make_config(pipeline="plain", consumers=3)
    with pytest.raises(LabError, match="valid are 1 to 8"):
        make_config(pipeline="share", consumers=0)
    with pytest.raises(LabError, match="does not apply to pipeline 'plain'"):
        make_config(pipeline="plain", faults="consumer-crash@at=3s")
    assert make_config(pipeline="share", consumers=3, faults="poison@key=7").option("consumers") == 3


LINES = [  # seq 0 written once; seq 1 held by a killed consumer, then written; seq 2 the poison, 5 deliveries
    {"p": 0, "o": 0, "n": 1, "seq": 0, "fate": "written"},
    {"p": 0, "o": 1, "n": 1, "seq": 1, "fate": "held"}, {"p": 0, "o": 1, "n": 2, "seq": 1, "fate": "written"},
    *({"p": 1, "o": 0, "n": n, "seq": 2, "fate": "poison"} for n in range(1, 6)),
]


def test_an_event_delivered_the_limit_of_times_and_never_written_is_archived_once_the_group_settled_it():
    table = delivery_table(LINES)
    seq = np.array([0, 1, 2])
    assert archived_mask(seq, table, 5, {0: 2, 1: 1}).tolist() == [False, False, True]
    assert archived_mask(seq, table, 5, {0: 2, 1: 0}).tolist() == [False, False, False]  # not settled yet
    assert archived_mask(seq, table, 6, {0: 2, 1: 1}).tolist() == [False, False, False]  # below a higher limit
    kill = [{"type": "consumer-killed", "held": [[0, 1, 1]]}]
    r = delivery_report(table, 5, {0: 2, 1: 1}, kill, [2])
    assert r["histogram"] == {"1": 1, "2": 1, "5": 1} and r["redelivered"] == 2
    assert r["held_by_killed_consumers"] == 1 and r["held_delivery_counts"] == {"2": 1}
    assert r["archived"] == [{"seq": 2, "partition": 1, "offset": 0, "deliveries": 5, "delivery_count": 5}]


def test_archived_events_are_counted_apart_from_the_lost():
    ledger = LedgerView(seq=np.array([0, 1, 2]), event_id=np.array(["a", "b", "c"], dtype=object),
                        partition=np.array([0, 0, 1]), kafka_offset=np.array([0, 1, 0]))
    rows = np.array([0, 1]), np.array(["a", "b"], dtype=object)
    plain = audit_core(ledger, *rows, positions={0: 2, 1: 1}, final=True)
    shelved = audit_core(ledger, *rows, positions={0: 2, 1: 1}, final=True, archived=np.array([False, False, True]))
    assert (plain.lost, plain.archived, plain.guarantee) == (1, 0, "at-most-once")
    assert (shelved.lost, shelved.archived, shelved.guarantee) == (0, 1, "exactly-once")
    assert shelved.table["status"].tolist() == ["exactly-once", "exactly-once", "archived"]


def test_the_group_is_settled_at_the_end_less_its_lag_never_below_its_start_offset():
    m = {"start": {"0": 692, "1": 900}, "lag": {"0": 0, "1": 30}, "end": {"0": 842, "1": 1000}}
    assert settled(m) == {0: 842, 1: 970}
    assert settled({"start": {"0": 10}, "lag": {}, "end": {}}) == {0: 10}


def test_a_poison_fault_replays_from_its_event(tmp_path):
    import json

    from lab.faults.plan import plan_from_events

    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps({"type": "fault", "kind": "poison", "index": 0, "batch": 0, "key": 7, "count": 3}) + "\n"
                   + json.dumps({"type": "fault", "kind": "consumer-crash", "index": 1, "elapsed_s": 3.04}) + "\n")
    assert plan_from_events(log) == "poison@key=7:count=3,consumer-crash@at=3s"
