"""The share pipeline's pure parts: poison records, the delivery log, archived and dead-lettered events, the group's
settled offsets."""

import numpy as np
import pytest

from lab.audit.auditor import LedgerView, audit_core
from lab.audit.deliveries import (
    archived_mask,
    dead_letter_mask,
    delivery_report,
    delivery_table,
    poison_outcomes,
)
from lab.config import make_config
from lab.errors import LabError
from lab.faults.catalogue import event_keys
from lab.faults.plan import parse_fault_plan, poison_seqs
from lab.share import dlq
from lab.share.settings import group_configs
from lab.share.state import settled


def test_poison_names_the_first_records_of_its_key_as_the_producer_draws_them():
    keys = event_keys(1, 3000)
    assert keys == event_keys(1, 3000) and set(keys) <= {f"k{n:02d}" for n in range(64)}
    first = [s for s, k in enumerate(keys) if k == "k07"]
    (one,) = parse_fault_plan("poison@key=7")
    (three,) = parse_fault_plan("poison@key=7:count=3")
    assert poison_seqs(one, 1, 3000) == first[:1] and poison_seqs(three, 1, 3000) == first[:3]
    (fifth,) = parse_fault_plan("poison@key=7:nth=5:count=2")
    assert poison_seqs(fifth, 1, 3000) == first[4:6] and fifth.to_text() == "poison@key=7:nth=5:count=2"


@pytest.mark.parametrize("plan, must_name", [
    ("poison@at=3s", ["poison@key=<n>"]), ("poison@key=64", ["k63", "0 to 63"]),
    ("driver-crash@key=3", ["poison", "driver-crash"]), ("poison@key=3:nth=0", ["bad nth", "n >= 1"]),
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
    # a press names its record by its place among its key's events
    log.write_text(json.dumps({"type": "fault", "kind": "poison", "index": -1, "seq": 812, "key": 7, "nth": 14}))
    assert plan_from_events(log) == "poison@key=7:nth=14"


def test_a_poison_press_holds_the_producer_before_the_record_it_names_until_released():
    """LedgeredProducer.hold_unsent against its send loop's protocol, without a broker: the loop sets ``_next_seq``
    before it compares it with ``_hold_at``."""
    import threading

    from lab.run.producer import LedgeredProducer

    class Stub(LedgeredProducer):
        def __init__(self):
            self.config = make_config(pipeline="share", events=100)
            self.stats = type("S", (), {"done": False, "sent": 40})()
            self._keys = event_keys(1, 100)
            self._next_seq, self._hold_at, self._last_held, self._released = 40, -1, -1, threading.Event()

        running = True

    p = Stub()
    assert p.hold_unsent(10) == (50, p._keys[50], p._keys[:51].count(p._keys[50])) and p._hold_at == 50
    assert not p._released.is_set()
    p.release()
    assert p._hold_at == -1 and p._released.is_set()
    assert p.hold_unsent(10)[0] == 51  # the loop has not moved: a second press names the next event
    p.release()
    p._next_seq = 95
    with pytest.raises(LabError, match="no event is left to poison"):
        p.hold_unsent(10)


#: A dead-letter record's headers as Kafka 4.4.0 wrote them (measured: a record released three times, limit 3).
DLQ_HEADERS = [("__dlq.errors.topic", b"events"), ("__dlq.errors.partition", b"1"), ("__dlq.errors.offset", b"0"),
               ("__dlq.errors.group", b"lab-r1"), ("__dlq.errors.delivery.count", b"5"),
               ("__dlq.errors.message", b"Offset delivery count exceeded the threshold.")]


def test_a_dead_letter_record_says_where_it_came_from_in_the_brokers_headers():
    d = dlq.from_headers(DLQ_HEADERS, dlq_offset=0, timestamp_ms=1, value=b'{"id": "c", "seq": 2}')
    assert (d.topic, d.partition, d.offset, d.group, d.delivery_count) == ("events", 1, 0, "lab-r1", 5)
    assert d.message.startswith("Offset delivery count exceeded")
    assert dlq.from_headers([("other", b"x")], 0, 1) is None  # not the broker's: no place to name
    assert dlq.from_headers([*DLQ_HEADERS[:2], ("__dlq.errors.offset", b"x")], 0, 1) is None


def test_the_dead_letter_topic_is_set_on_the_group_only_with_dlq_on():
    on, off = (group_configs(make_config(pipeline="share", dlq=mode)) for mode in ("on", "off"))
    assert on["errors.deadletterqueue.topic.name"] == "dlq.events" == dlq.topic_name("events")
    assert on["errors.deadletterqueue.copy.record.enable"] == "true"
    assert not [k for k in off if k.startswith("errors.")]  # Kafka's default: no dead-letter topic
    assert make_config(pipeline="share", dlq="on").settings["dlq"] == "on"
    assert make_config(pipeline="share").settings["dlq"] == "off"  # stated, as every option of the pipeline
    with pytest.raises(LabError, match=r"unknown --dlq 'yes'; valid choices: off, on"):
        make_config(pipeline="share", dlq="yes")
    with pytest.raises(LabError, match=r"--dlq is the share pipeline's setting.*'plain'"):
        make_config(pipeline="plain", dlq="on")


def test_dead_lettered_events_are_counted_apart_from_archived_lost_and_unseen():
    ledger = LedgerView(seq=np.array([0, 1, 2, 3]), event_id=np.array(["a", "b", "c", "d"], dtype=object),
                        partition=np.array([0, 0, 1, 1]), kafka_offset=np.array([0, 1, 0, 1]))
    rows = np.array([0, 1]), np.array(["a", "b"], dtype=object)
    moved = dead_letter_mask(ledger.partition, ledger.kafka_offset, {(1, 0), (0, 0)})
    assert moved.tolist() == [True, False, True, False]
    # seq 2 moved (and also what archived_mask would say), seq 3 neither, beyond the group's place: unseen
    a = audit_core(ledger, *rows, positions={0: 2, 1: 1}, final=True, archived=np.array([False, False, True, False]),
                   dead_lettered=moved)
    assert a.table["status"].tolist() == ["exactly-once", "exactly-once", "dead-lettered", "unseen"]
    assert (a.dead_lettered, a.archived, a.lost, a.unseen, a.exactly_once) == (1, 0, 0, 1, 2)
    assert a.acked == a.exactly_once + a.duplicated + a.lost + a.unseen + a.late_dropped + a.archived + a.dead_lettered
    assert a.guarantee == "incomplete" and a.counts()["dead_lettered"] == 1  # seq 3 not yet read


def test_the_report_lists_each_dead_letter_record_with_the_event_it_holds():
    table = delivery_table(LINES)
    d = dlq.from_headers(DLQ_HEADERS, dlq_offset=4, timestamp_ms=1, value=b'{"id": "c", "seq": 2}')
    r = delivery_report(table, 5, {0: 2, 1: 1}, [], [], [d])
    assert r["dead_lettered"] == [{"partition": 1, "offset": 0, "delivery_count": 5, "dlq_offset": 4,
                                   "message": "Offset delivery count exceeded the threshold.", "seq": 2,
                                   "deliveries": 5, "event_id": "c"}]
    assert "dead_lettered" not in delivery_report(table, 5, {0: 2, 1: 1}, [], [])  # --dlq off: no such list


def test_the_poison_questions_are_answered_from_the_timeline_and_the_audit():
    kills = [{"type": "poison-killed", "partition": 1, "offset": 0, "seq": 2, "delivery_count": n} for n in range(1, 6)]
    moved = {"type": "moved-to-dlq", "partition": 1, "offset": 0}
    fate, deliveries = poison_outcomes([*kills, moved], {2: "dead-lettered"}, 5)
    assert fate == ("dead-lettered", "the audit counts it dead-lettered; the dead-letter topic holds it")
    assert deliveries[0] == "the delivery limit's times" and "1, 2, 3, 4, 5" in deliveries[1]
    assert poison_outcomes(kills[:3], {2: "archived"}, 5)[1][0] == "fewer than the limit"
    assert poison_outcomes(kills, {2: "duplicated"}, 5)[0][0] == "written"
    with pytest.raises(LabError, match=r"'unseen' in the audit: the run could not show"):
        poison_outcomes(kills, {2: "unseen"}, 5)
    with pytest.raises(LabError, match="no poison record killed a consumer"):
        poison_outcomes([moved], {}, 5)
