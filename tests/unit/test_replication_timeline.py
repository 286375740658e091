"""Notebook 07's pure parts: the replica timeline read back from events, the documented claims, the verdicts."""

import pandas as pd
import pytest

from lab.audit import expectations
from lab.audit.claims import claim
from lab.kafka.replication import leaderless_s, node_down_intervals, replica_intervals
from lab.matrix import grid as matrix, table as matrix_table
from lab.views import plots


def state(t, p, leader, isr, epoch=0):
    return {"t": t, "type": "partition-state", "partition": p, "leader": leader, "isr": isr, "replicas": [1, 2, 3],
            "epoch": epoch}


#: Partition 0 led by 2; followers out of the ISR at 5; 2 killed at 7; 3 elected (unclean) at 8.5; 2 back at 10;
#: partition 1 without a leader from 8 to 9.
EVENTS = [
    {"t": 0.0, "type": "run-start"},
    state(0.1, 0, 2, [1, 2, 3]), state(0.1, 1, 3, [1, 2, 3]),
    {"t": 2.0, "type": "fault", "kind": "follower-lag", "duration_s": 8.0},
    state(5.0, 0, 2, [2]),
    {"t": 7.0, "type": "fault", "kind": "leader-crash", "node": 2, "pid": 11, "leads": [0]},
    state(8.0, 1, None, [3], epoch=1), state(9.0, 1, 3, [3], epoch=2),
    state(8.5, 0, 3, [3], epoch=1),
    {"t": 10.0, "type": "node-restart", "node": 2, "pid": 12},
    state(12.0, 0, 3, [1, 2, 3], epoch=1),
    {"t": 20.0, "type": "run-end"},
]


def spans(p, node):
    return [(s["role"], s["start"], s["end"], s["epoch"]) for s in replica_intervals(EVENTS)
            if (s["partition"], s["node"]) == (p, node)]


def test_each_replica_has_one_role_at_a_time_until_the_run_ends():
    assert spans(0, 2) == [("leader", 0.1, 8.5, 0), ("out-of-sync", 8.5, 12.0, 1), ("in-sync", 12.0, 20.0, 1)]
    assert spans(0, 3) == [("in-sync", 0.1, 5.0, 0), ("out-of-sync", 5.0, 8.5, 0), ("leader", 8.5, 20.0, 1)]
    assert spans(0, 1) == [("in-sync", 0.1, 5.0, 0), ("out-of-sync", 5.0, 8.5, 0), ("out-of-sync", 8.5, 12.0, 1),
                           ("in-sync", 12.0, 20.0, 1)]
    assert spans(1, 3) == [("leader", 0.1, 8.0, 0), ("in-sync", 8.0, 9.0, 1), ("leader", 9.0, 20.0, 2)]
    assert replica_intervals([]) == []


def test_time_without_a_leader_and_the_killed_broker():
    # partition 0: its killed leader (7.0) still named until the election (8.5); partition 1: leader -1 for 1 s
    assert leaderless_s(EVENTS) == {0: 1.5, 1: 1.0}
    assert node_down_intervals(EVENTS) == [{"node": 2, "start": 7.0, "end": 10.0}]
    never_back = [e for e in EVENTS if e["type"] != "node-restart"]
    assert node_down_intervals(never_back) == [{"node": 2, "start": 7.0, "end": 20.0}]


def test_the_timeline_figure_marks_every_lost_ack_and_the_hold():
    lost = pd.DataFrame({"event_id": ["a", "b"], "seq": [1, 2], "key": ["k", "k"], "partition": [0, 0],
                         "kafka_offset": [5, 6], "sent_at": [3.0, 4.0], "done_at": [3.1, 4.1]})
    fig = plots.replication_timeline(EVENTS, lost)
    names = [t.name for t in fig.data]
    assert names == ["leader", "in-sync", "out-of-sync", "broker killed", "acknowledged, then lost (2)"]
    assert list(fig.data[-1].x) == [3.1, 4.1]
    assert [s.x0 for s in fig.layout.shapes if s.type == "rect"] == [2.0]  # the follower-lag window
    assert "p1 · broker 3" in fig.layout.yaxis.categoryarray and "lost acks" == fig.layout.yaxis.categoryarray[0]
    assert plots.replication_timeline(EVENTS, None).data[-1].name == "broker killed"


@pytest.mark.parametrize("acks, min_insync, unclean, expect", [
    ("1", 1, "on", "acked-lost"), ("1", 2, "on", "acked-lost"), ("all", 1, "on", "acked-lost"),
    ("all", 2, "on", "acked-kept"), ("all", 3, "on", "acked-kept"), ("1", 1, "off", "acked-kept"),
    ("all", 1, "off", "acked-kept"),
])
def test_the_documented_claim_per_setting(acks, min_insync, unclean, expect):
    c = claim(acks, min_insync, unclean)
    assert c.expect == expect and c.why


def test_topic_verdicts_use_the_final_read_not_the_sink():
    kept = {"lost": 0, "duplicated": 300, "topic": {"lost": 0}}
    gone = {"lost": 0, "duplicated": 0, "topic": {"lost": 612}}  # the sink read them before the truncation
    assert expectations.satisfies("acked-kept", kept) and not expectations.satisfies("acked-lost", kept)
    assert expectations.satisfies("acked-lost", gone) and not expectations.satisfies("acked-kept", gone)
    assert not expectations.satisfies("acked-kept", {"lost": 0})  # no final read: no verdict either way
    # a sink that never read the truncated offsets (unseen) does not change what the topic kept
    assert expectations.satisfies("acked-lost", {"topic": {"lost": 600}, "unseen": 4})


def test_the_default_grid_cluster_rows_expect_what_the_documentation_says():
    rows = [s for s in matrix.load_grid(None).scenarios if s.params.get("nodes") == 3]
    # the four settings of notebook 07, and the eligible-leader-replicas pair; each sets ELR (a cluster-wide feature)
    assert len(rows) == 6 and all(s.params.get("elr") in ("on", "off") for s in rows)
    for s in rows:
        p = s.params
        assert s.expect == claim(p["acks"], p.get("min_insync", 1), p["unclean"]).expect, s.name


def test_the_report_recomputes_cluster_verdicts_from_the_final_read_column():
    from lab.matrix.report import matrix_view, table_html

    rows = pd.DataFrame([
        # the sink read the events before the truncation: exactly once there, 600 gone from the topic
        {"name": "acks=1", "seed": 1, "expect": "acked-lost", "guarantee": "exactly-once", "lost": 0, "duplicated": 0,
         "unexpected": 0, "unseen": 0, "source_duplicates": 0, "topic_lost": 600},
        {"name": "no final read", "seed": 1, "expect": "acked-kept", "guarantee": "exactly-once", "lost": 0,
         "duplicated": 0, "unexpected": 0, "unseen": 0, "source_duplicates": 0, "topic_lost": float("nan")},
        {"name": "direct", "seed": 1, "expect": "exactly-once", "guarantee": "exactly-once", "lost": 0, "duplicated": 0,
         "unexpected": 0, "unseen": 0, "source_duplicates": 0, "topic_lost": float("nan")},
    ])
    view = matrix_view(rows)
    assert list(view["verdict"]) == ["as expected", "MISMATCH", "as expected"]
    assert list(view["measured"]) == ["acked-lost", "error", "exactly-once"]
    assert "0 (topic: 600)" in table_html(view)
    first, second = matrix_table.summary_lines(view)[1:3]
    assert "acked-lost" in first and " 600 " in first and first.endswith("as expected")
    assert "error" in second and second.endswith("MISMATCH")


def test_a_prediction_is_right_only_when_it_says_what_the_final_read_measured():
    from lab.views.replication_picker import PREDICTIONS, prediction_right

    kept, lost = PREDICTIONS  # the lab's words (lab.outcomes.TOPIC_WORDS): the choice itself decides
    assert (kept, lost) == ("acked-kept", "acked-lost")
    assert prediction_right(lost, 600) and not prediction_right(lost, 0)
    assert prediction_right(kept, 0) and not prediction_right(kept, 600)


def test_eligible_leader_replicas_change_the_reason_not_the_claim():
    off, on = claim("all", 2, "off", elr="off"), claim("all", 2, "off", elr="on")
    assert off.expect == on.expect == "acked-kept"
    assert "waits for the old leader" in off.why and "KIP-966" in on.why
    assert claim("1", 1, "on", elr="on") == claim("1", 1, "on", elr="off")
