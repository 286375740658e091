"""The share pipeline end to end: confluent-kafka share consumers in one group on Apache Kafka 4.4, real SIGKILLs."""

import pytest

from lab.config import make_config
from lab.events import read_events
from lab.run.supervisor import run_scenario
from lab.share.settings import DELIVERY_LIMIT
from tests.integration.conftest import assert_all_gone, run_pids

pytestmark = pytest.mark.integration

#: The issue's scenario: 3,000 events at 300/s, a 10 s stream, two consumers.
STREAM = dict(pipeline="share", consumers=2, events=3000, rate=300)


@pytest.mark.quick
def test_a_killed_consumers_records_are_delivered_again_to_the_group(runs_dir):
    result = run_scenario(make_config(**STREAM, faults="consumer-crash@at=3s"))
    r, events = result.report, read_events(result.run_dir)
    assert result.drained and result.restarts == 0, r  # one consumer died; its driver lived
    killed = [e for e in events if e["type"] == "consumer-killed"]
    assert len(killed) == 1 and killed[0]["held"]
    exits = [e for e in events if e["type"] == "consumer-exit"]
    assert [e["code"] for e in exits] == [-9] and exits[0]["pid"] == killed[0]["pid"]
    d = r["deliveries"]
    # every record the dead consumer held came again with a higher delivery count; nothing of them was written
    assert d["held_by_killed_consumers"] == len(killed[0]["held"])
    assert sum(d["held_delivery_counts"].values()) == len(killed[0]["held"])
    assert min(int(n) for n in d["held_delivery_counts"]) >= 2
    assert (r["lost"], r["archived"], r["unseen"]) == (0, 0, 0) and r["guarantee"] == "exactly-once", r
    assert all(d["group_settled_offsets"][p] >= 0 for p in d["group_settled_offsets"])
    assert_all_gone(run_pids(result.run_dir))


def test_a_poison_record_is_archived_after_exactly_the_delivery_limit(runs_dir):
    result = run_scenario(make_config(**STREAM, faults="poison@key=7"))
    r, events = result.report, read_events(result.run_dir)
    assert result.drained, r
    kills = [e for e in events if e["type"] == "poison-killed"]
    # one record, delivered 1, 2, ... up to the limit, each delivery killing the consumer that got it
    assert len({(e["partition"], e["offset"]) for e in kills}) == 1
    assert [e["delivery_count"] for e in kills] == list(range(1, DELIVERY_LIMIT + 1))
    archived = r["deliveries"]["archived"]
    assert [(a["partition"], a["offset"], a["delivery_count"]) for a in archived] == [
        (kills[0]["partition"], kills[0]["offset"], DELIVERY_LIMIT)]
    assert r["archived"] == 1 and r["lost"] == 0 and r["acked"] == 3000, r
    # no dead-letter topic (Kafka's default): nothing was moved anywhere
    assert r["settings"]["dlq"] == "off" and r["dead_lettered"] == 0 and "dead_lettered" not in r["deliveries"]
    assert not [e for e in events if e["type"] == "moved-to-dlq"]
    # the broker is done with it: the group's settled offset is beyond the archived record
    assert r["deliveries"]["group_settled_offsets"][str(kills[0]["partition"])] > kills[0]["offset"]
    assert_all_gone(run_pids(result.run_dir))


def test_with_a_dead_letter_topic_the_poison_record_is_moved_after_exactly_the_delivery_limit(runs_dir):
    result = run_scenario(make_config(**STREAM, faults="poison@key=7", dlq="on"))
    r, events = result.report, read_events(result.run_dir)
    assert result.drained, r
    kills = [e for e in events if e["type"] == "poison-killed"]
    assert len({(e["partition"], e["offset"]) for e in kills}) == 1
    assert [e["delivery_count"] for e in kills] == list(range(1, DELIVERY_LIMIT + 1))
    place = (kills[0]["partition"], kills[0]["offset"])
    # the dead-letter topic holds it once: where it came from and its delivery count in the broker's headers, and
    # the event itself (its value copied), the one the ledger acknowledged at that place
    moved = r["deliveries"]["dead_lettered"]
    assert [(m["partition"], m["offset"], m["delivery_count"]) for m in moved] == [(*place, DELIVERY_LIMIT)], moved
    table = result.audit.table
    poison = table[(table["partition"] == place[0]) & (table["kafka_offset"] == place[1])]
    assert moved[0]["event_id"] == poison["event_id"].item() and moved[0]["seq"] == kills[0]["seq"]
    assert poison["status"].item() == "dead-lettered"
    assert (r["dead_lettered"], r["archived"], r["lost"], r["exactly_once"], r["acked"]) == (1, 0, 0, 2999, 3000), r
    # the timeline says the move once, after the last delivery
    said = [e for e in events if e["type"] == "moved-to-dlq"]
    assert [(e["partition"], e["offset"]) for e in said] == [place] and said[0]["t"] > kills[-1]["t"]
    assert_all_gone(run_pids(result.run_dir))


def test_the_panels_poison_button_poisons_an_event_not_yet_sent(runs_dir):
    """A press (``Run.inject("poison")``, as the panel's button calls it) a few seconds into the stream: the event
    ten sends past the producer's count is poison from the press on, and goes the way of a planned one."""
    import threading

    from lab.audit.ledger import sends_frame
    from lab.run.supervisor import Run

    started = threading.Event()

    def on_event(event):
        if event["type"] == "batch-start":
            started.set()

    # 20 s of stream: the press comes while the producer still sends, however late the first batch is
    with Run(make_config(**{**STREAM, "events": 6000}, dlq="on"), on_event=on_event) as run:
        assert started.wait(120), "no batch within 120 s"
        pressed = run.inject("poison")
        result = run.wait(240)
    r, events = result.report, read_events(result.run_dir)
    assert pressed["type"] == "fault" and pressed["by"] == "ui", pressed
    # the protocol's claim: the record was sent after the event naming it was written (the producer waited)
    sends = sends_frame(result.run_dir / "ledger.sqlite")
    assert sends.loc[sends["seq"] == pressed["seq"], "sent_at"].item() > pressed["t"], pressed
    kills = [e for e in events if e["type"] == "poison-killed"]
    # the pressed event, delivered up to the limit, each delivery killing its consumer; no second fault event
    assert {e["seq"] for e in kills} == {pressed["seq"]} and {e["key"] for e in kills} == {f"k{pressed['key']:02d}"}
    assert [e["delivery_count"] for e in kills] == list(range(1, DELIVERY_LIMIT + 1))
    assert len([e for e in events if e["type"] == "fault"]) == 1
    assert result.drained and r["faults_fired"][0]["kind"] == "poison", r
    assert (r["dead_lettered"], r["archived"], r["lost"], r["acked"]) == (1, 0, 0, 6000), r
    # replayed from the timeline: the same record, named by its key and its place among the key's events
    from lab.faults.plan import parse_fault_plan, plan_from_events, poison_seqs

    [again] = parse_fault_plan(plan_from_events(result.run_dir / "events.jsonl"))
    assert poison_seqs(again, result.config.seed, result.config.events) == [pressed["seq"]], again
    assert_all_gone(run_pids(result.run_dir))
