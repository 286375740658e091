"""The auditor against synthetic ledgers and sinks whose anomalies are known by construction."""

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.auditor import audit_frames
from lab.sinks import SinkSpec, open_sink

event = st.fixed_dictionaries({
    "status": st.sampled_from(["acked", "acked", "acked", "failed", "unknown"]),
    "copies": st.integers(0, 3),
    "partition": st.integers(0, 2),
})


def build(events, positions_shift):
    """A ledger and a sink from per-event choices; offsets grow per partition."""
    ledger, stored, next_off = [], [], {0: 0, 1: 0, 2: 0}
    for seq, e in enumerate(events):
        eid = f"e{seq}"
        off = None
        if e["status"] == "acked":
            off = next_off[e["partition"]]
            next_off[e["partition"]] += 1
        ledger.append((seq, eid, e["status"], e["partition"] if off is not None else None, off))
        stored += [eid] * e["copies"]
    positions = {p: max(0, n - positions_shift) for p, n in next_off.items()}
    led = pd.DataFrame(ledger, columns=["seq", "event_id", "status", "partition", "kafka_offset"])
    st_ = pd.Series(stored, dtype=object).value_counts().rename_axis("event_id").reset_index(name="copies")
    return led, st_, positions


@settings(max_examples=200, deadline=None)
@given(st.lists(event, max_size=60), st.integers(0, 3))
def test_counts_match_construction(events, shift):
    led, stored, positions = build(events, shift)
    a = audit_frames(led, stored, None, positions)
    # expected, computed independently of the auditor
    exp = dict(exactly_once=0, duplicated=0, extra=0, lost=0, unseen=0, unexpected=0)
    offsets = {}
    for seq, e in enumerate(events):
        if e["status"] != "acked":
            exp["unexpected"] += e["copies"]
            continue
        off = offsets.setdefault(e["partition"], 0)
        offsets[e["partition"]] += 1
        if e["copies"] == 1:
            exp["exactly_once"] += 1
        elif e["copies"] > 1:
            exp["duplicated"] += 1
            exp["extra"] += e["copies"] - 1
        elif off >= positions[e["partition"]]:
            exp["unseen"] += 1
        else:
            exp["lost"] += 1
    assert (a.exactly_once, a.duplicated, a.extra_copies, a.lost, a.unseen, a.unexpected) == (
        exp["exactly_once"], exp["duplicated"], exp["extra"], exp["lost"], exp["unseen"], exp["unexpected"])
    assert a.acked == a.exactly_once + a.duplicated + a.lost + a.unseen
    assert len(a.table) == a.acked
    assert a.failed_sends == sum(e["status"] == "failed" for e in events)


def test_guarantee_names():
    led = pd.DataFrame([(0, "a", "acked", 0, 0), (1, "b", "acked", 0, 1)],
                       columns=["seq", "event_id", "status", "partition", "kafka_offset"])
    def g(copies, pos=2):
        s = pd.DataFrame([(k, v) for k, v in copies.items() if v], columns=["event_id", "copies"])
        return audit_frames(led, s, None, {0: pos}).guarantee
    assert g({"a": 1, "b": 1}) == "exactly-once"
    assert g({"a": 2, "b": 1}) == "at-least-once"
    assert g({"a": 1}) == "at-most-once"
    assert g({"a": 2}) == "loss and duplicates"
    assert g({"a": 1}, pos=1) == "incomplete"  # b not read yet: never called lost


def test_written_twice_stored_once_is_visible(tmp_path):
    spec = SinkSpec(mode="idempotent", backend="sqlite", path=str(tmp_path / "s.sqlite"))
    with open_sink(spec) as sink:
        sink.write_batch([("a", 0, 0, 0), ("b", 1, 0, 1)], "batch-1")
        sink.write_batch([("a", 0, 0, 0)], "batch-1-replay")
        stored = pd.DataFrame(sink.event_counts(), columns=["event_id", "copies"])
        attempts = pd.DataFrame(sink.attempt_counts(), columns=["event_id", "attempts"])
    led = pd.DataFrame([(0, "a", "acked", 0, 0), (1, "b", "acked", 0, 1)],
                       columns=["seq", "event_id", "status", "partition", "kafka_offset"])
    a = audit_frames(led, stored, attempts, {0: 2})
    assert (a.exactly_once, a.duplicated, a.write_attempts, a.stored_rows, a.absorbed_rewrites) == (2, 0, 3, 2, 1)
