"""The auditor against synthetic ledgers and sinks whose anomalies are known by construction."""

import numpy as np
from hypothesis import given, settings, strategies as st

from lab.audit.auditor import LedgerView, audit_core
from lab.audit.expectations import satisfies
from lab.sinks.reader import open_sink
from lab.sinks.spec import SinkSpec


def ledger_view(rows):
    """rows: (seq, event_id, status, partition, offset)."""
    acked = [r for r in rows if r[2] == "acked"]
    return LedgerView(
        seq=np.array([r[0] for r in acked], dtype=np.int64),
        event_id=np.array([r[1] for r in acked], dtype=object),
        partition=np.array([r[3] for r in acked], dtype=np.int64),
        kafka_offset=np.array([r[4] for r in acked], dtype=np.int64),
        failed=sum(r[2] == "failed" for r in rows),
        unknown=sum(r[2] == "unknown" for r in rows),
    )


def sink_arrays(stored):
    """stored: list of (seq, event_id) rows."""
    return np.array([s for s, _ in stored], dtype=np.int64), np.array([e for _, e in stored], dtype=object)

event = st.fixed_dictionaries({
    "status": st.sampled_from(["acked", "acked", "acked", "failed", "unknown"]),
    "copies": st.integers(0, 3),
    "partition": st.integers(0, 2),
    "no_offset": st.sampled_from([False, False, False, True]),  # acknowledged without an offset
})


def build(events, positions_shift):
    """A ledger and a sink from per-event choices; offsets grow per partition; -1 is a NULL offset."""
    ledger, stored, next_off = [], [], {0: 0, 1: 0, 2: 0}
    for seq, e in enumerate(events):
        eid = f"e{seq}"
        off = None
        if e["status"] == "acked":
            off = next_off[e["partition"]]
            next_off[e["partition"]] += 1
            if e["no_offset"]:
                off = -1
        ledger.append((seq, eid, e["status"], e["partition"] if off is not None else None, off))
        stored += [(seq, eid)] * e["copies"]
    positions = {p: max(0, n - positions_shift) for p, n in next_off.items()}
    return ledger_view(ledger), sink_arrays(stored), positions


@settings(max_examples=200, deadline=None)
@given(st.lists(event, max_size=60), st.integers(0, 3), st.integers(0, 3), st.booleans())
def test_counts_match_construction(events, shift, forged, final):
    led, (sseq, sids), positions = build(events, shift)
    # forged rows: a real sequence number with a wrong id, and an unknown one
    sseq = np.concatenate([sseq, np.arange(forged, dtype=np.int64)])
    sids = np.concatenate([sids, np.array([f"forged-{i}" for i in range(forged)], dtype=object)])
    a = audit_core(led, sseq, sids, None, positions, final=final)
    # expected, computed independently of the auditor
    exp = dict(exactly_once=0, duplicated=0, extra=0, lost=0, unseen=0, unexpected=0)
    offsets = {}
    for e in events:
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
        elif e["no_offset"]:
            exp["lost" if final else "unseen"] += 1
        elif off >= positions[e["partition"]]:
            exp["unseen"] += 1
        else:
            exp["lost"] += 1
    assert (a.exactly_once, a.duplicated, a.extra_copies, a.lost, a.unseen, a.unexpected) == (
        exp["exactly_once"], exp["duplicated"], exp["extra"], exp["lost"], exp["unseen"], exp["unexpected"] + forged)
    assert a.acked == a.exactly_once + a.duplicated + a.lost + a.unseen
    assert len(a.table) == a.acked
    assert a.failed_sends == sum(e["status"] == "failed" for e in events)
    assert a.acked_without_offset == sum(e["status"] == "acked" and e["no_offset"] for e in events)


def test_guarantee_names():
    led = ledger_view([(0, "a", "acked", 0, 0), (1, "b", "acked", 0, 1)])
    seq_of = {"a": 0, "b": 1}

    def g(copies, pos=2):
        rows = [(seq_of[k], k) for k, v in copies.items() for _ in range(v)]
        return audit_core(led, *sink_arrays(rows), None, {0: pos}).guarantee
    assert g({"a": 1, "b": 1}) == "exactly-once"
    assert g({"a": 2, "b": 1}) == "at-least-once"
    assert g({"a": 1}) == "at-most-once"
    assert g({"a": 2}) == "loss and duplicates"
    assert g({"a": 1}, pos=1) == "incomplete"  # b not read yet: never called lost


def test_rows_no_send_explains_are_their_own_outcome():
    """A sink holding each acknowledged event once plus a row nobody was promised is neither exactly-once nor
    at-least-once: nothing reached it twice."""
    led = ledger_view([(0, "a", "acked", 0, 0), (1, "b", "acked", 0, 1)])
    stray = (7, "aborted-7")  # an aborted transaction's event, read uncommitted: never acknowledged
    a = audit_core(led, *sink_arrays([(0, "a"), (1, "b"), stray]), None, {0: 2})
    assert (a.lost, a.duplicated, a.unexpected, a.guarantee) == (0, 0, 1, "unexpected rows")
    counts = {"lost": 0, "duplicated": 0, "unexpected": 1, "unseen": 0}
    assert [satisfies(e, counts) for e in ("unexpected rows", "no-loss", "at-least-once", "exactly-once", "loss")] \
        == [True, True, False, False, False]
    lost_too = audit_core(led, *sink_arrays([(0, "a"), stray]), None, {0: 2})
    assert lost_too.guarantee == "at-most-once" and lost_too.unexpected == 1  # loss names it; the count stays


def test_written_twice_stored_once_is_visible(tmp_path):
    spec = SinkSpec(mode="idempotent", backend="sqlite", path=str(tmp_path / "s.sqlite"))
    with open_sink(spec) as sink:
        sink.write_batch([("a", 0, 0, 0), ("b", 1, 0, 1)], "batch-1")
        sink.write_batch([("a", 0, 0, 0)], "batch-1-replay")
        sseq, sids = sink.event_rows()
        attempts = sink.attempt_seqs()
    led = ledger_view([(0, "a", "acked", 0, 0), (1, "b", "acked", 0, 1)])
    a = audit_core(led, sseq, sids, attempts, {0: 2})
    assert (a.exactly_once, a.duplicated, a.write_attempts, a.stored_rows, a.absorbed_rewrites) == (2, 0, 3, 2, 1)


def test_ledger_read_while_the_producer_writes_is_one_snapshot(tmp_path):
    """The live panel audits a ledger the producer is still writing: its columns must stay aligned."""
    import threading

    from lab.audit.auditor import read_ledger
    from lab.audit.ledger import Ledger, LedgerEntry

    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path)
    stop = threading.Event()

    def produce():
        seq = 0
        while not stop.is_set() and seq < 20_000:
            ledger.record([LedgerEntry(s, f"e{s}", "k", "acked", 0, s, None, 0.0, 0.0) for s in range(seq, seq + 50)])
            seq += 50

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        sizes = set()
        while writer.is_alive():
            view = read_ledger(path)
            assert len(view.seq) == len(view.event_id) == len(view.partition) == len(view.kafka_offset)
            assert list(view.event_id[-3:]) == [f"e{s}" for s in view.seq[-3:]]
            sizes.add(len(view.seq))
    finally:
        stop.set()
        writer.join()
        ledger.close()
    assert len(sizes) > 1  # the reads did overlap the writes


def test_acks_without_offset_audit_from_the_ledger_file(tmp_path):
    """NULL offsets in ledger.sqlite: unseen while the run may still place them, lost once it cannot; never a crash."""
    import json

    from lab.audit.auditor import audit_run
    from lab.audit.ledger import Ledger, LedgerEntry

    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path)
    ledger.record([
        LedgerEntry(0, "a", "k", "acked", 0, 0, None, 0.0, 0.0),
        LedgerEntry(1, "b", "k", "acked", 0, None, None, 0.0, 0.0),      # deduplicated retry: offset -1
        LedgerEntry(2, "c", "k", "acked", None, None, None, 0.0, 0.0),   # neither partition nor offset
        LedgerEntry(3, "d", "k", "acked", 1, None, None, 0.0, 0.0),      # no offset, but it did reach the sink
    ])
    ledger.close()
    spec = SinkSpec(mode="append", backend="sqlite", path=str(tmp_path / "s.sqlite"))
    with open_sink(spec) as sink:
        sink.write_batch([("a", 0, 0, 0), ("d", 3, 1, 0)], "batch-0")
        live = audit_run(path, sink, {0: 5, 1: 5})
        final = audit_run(path, sink, {0: 5, 1: 5}, final=True)
    assert live.acked_without_offset == final.acked_without_offset == 3
    assert (live.exactly_once, live.lost, live.unseen) == (2, 0, 2)
    assert (final.exactly_once, final.lost, final.unseen) == (2, 2, 0)
    assert final.guarantee == "at-most-once"
    assert json.loads(json.dumps(final.counts()))["acked_without_offset"] == 3
    assert list(final.table.loc[final.table.event_id.isin(["b", "c"]), "status"]) == ["lost", "lost"]
