"""The auditor: per acknowledged event, how many times did it reach the sink?

It joins the producer's ledger with the sink:

* ``0`` copies, at an offset the pipeline has already passed: **lost**
* ``0`` copies, at an offset the pipeline has not reached yet: **unseen**
  (slowness is never called loss)
* ``1`` copy: **exactly once**
* ``>1`` copies: **duplicated** (``extra_copies`` counts the surplus rows)
* rows that no acknowledged send explains: **unexpected** (for example a
  send whose acknowledgement was lost, that did land)

A sink row counts for an event only when both its sequence number and its
event id match the ledger's acknowledged send, so a corrupted or forged row
is unexpected, never a delivery. The join runs on integer sequence numbers
(numpy ``bincount``), which keeps a 1,000,000-event audit to about a second.

It also compares write attempts with stored rows, so an idempotent sink shows
"written twice, stored once" (``absorbed_rewrites``).

Acknowledged sends without an offset
------------------------------------
A broker may acknowledge a send without an offset (offset -1). The
supervisor places such
sends from the topic after the run (:func:`lab.audit.ledger.place_acks`). Any still
without an offset at audit time are counted in ``acked_without_offset``; with
no sink row, they are unseen in a live audit (the run may still place them)
and lost in the final one: the topic was read to its end and does not hold
them, so the acknowledged write is gone.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from lab.audit.ledger import acked_snapshot
from lab.outcomes import classify

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported where the table is built: ``lab run`` imports this module before it starts its first
# driver, which starts 0.4 s sooner without pandas (bench/README.md, Past experiments;
# lab.run.result.start_audit_imports).


@dataclass(frozen=True)
class Audit:
    """Counts of one audit.

    Per event, ``acked == exactly_once + duplicated + lost + unseen + late_dropped + archived + dead_lettered``
    always holds (``late_dropped``: events a stateful query dropped behind its
    watermark, expected to be missing; ``archived``: events a share group dropped
    after its delivery limit, :mod:`lab.audit.deliveries`; ``dead_lettered``: events its broker moved to the
    group's dead-letter topic instead, :mod:`lab.share.dlq`). For ``--query window-count`` the counts
    come from the window audit (:mod:`lab.audit.window`): ``lost`` and
    ``duplicated`` (= ``extra_copies``) are then the undercount and overcount
    in events, ``exactly_once`` the events of exact windows, and ``windows``
    holds the per-window counts.
    """

    acked: int
    exactly_once: int
    duplicated: int
    extra_copies: int
    lost: int
    unseen: int
    unexpected: int
    unexpected_events: int
    failed_sends: int
    unknown_sends: int
    write_attempts: int
    stored_rows: int
    absorbed_rewrites: int
    acked_without_offset: int = 0
    aborted_sends: int = 0
    late_dropped: int = 0
    archived: int = 0
    dead_lettered: int = 0
    windows: dict | None = None
    table: pd.DataFrame = field(repr=False, compare=False, default=None)

    @property
    def guarantee(self) -> str:
        """The delivery guarantee these counts show (:func:`classify`)."""
        return classify(self.lost, self.duplicated, self.unexpected, self.unseen)

    def counts(self) -> dict:
        """The counts as a plain dict (no per-event table; a window audit's counts at the top level)."""
        d = {k: v for k, v in asdict(self).items() if k not in ("table", "windows")}
        d.update(self.windows or {})
        d["guarantee"] = self.guarantee
        return d


@dataclass(frozen=True)
class LedgerView:
    """The acknowledged sends as aligned arrays, plus the other outcomes' counts."""

    seq: np.ndarray
    event_id: np.ndarray
    partition: np.ndarray
    kafka_offset: np.ndarray
    failed: int = 0
    unknown: int = 0
    aborted: int = 0


def read_ledger(ledger_path) -> LedgerView:
    """Read a run's ledger file, as one snapshot even while the producer is still writing to it."""
    # One snapshot: -1 for an acknowledgement that came back without a partition or offset (module docstring).
    ints, ids, other = acked_snapshot(ledger_path)
    flat = np.fromiter(itertools.chain.from_iterable(ints), dtype=np.int64, count=3 * len(ints)).reshape(-1, 3)
    return LedgerView(
        seq=flat[:, 0], partition=flat[:, 1], kafka_offset=flat[:, 2],
        event_id=np.array(ids, dtype=object),
        failed=other.get("failed", 0), unknown=other.get("unknown", 0), aborted=other.get("aborted", 0),
    )


def audit_core(
    ledger: LedgerView,
    sink_seq: np.ndarray,
    sink_ids: np.ndarray,
    attempt_seq: np.ndarray | None = None,
    positions: dict[int, int] | None = None,
    final: bool = False,
    late: np.ndarray | None = None,
    archived: np.ndarray | None = None,
    dead_lettered: np.ndarray | None = None,
) -> Audit:
    """Audit from arrays (the core; :func:`audit_run` feeds it from a run's files).

    Parameters
    ----------
    ledger : LedgerView
    sink_seq, sink_ids : arrays
        One entry per stored row: its sequence number and event id.
    attempt_seq : array, optional
        One entry per write attempt: the event's sequence number. Without it,
        attempts are taken to equal stored rows.
    positions : dict, optional
        ``{partition: next offset}`` the pipeline has durably passed. An
        undelivered event at or beyond its partition's position is unseen;
        missing partitions count as position 0 (nothing read yet).
    final : bool
        The run is over and its topic was read to the end: an acknowledged send
        still without an offset (``-1``) and without a sink row is lost, not unseen.
    late : bool array, optional
        Aligned with the ledger: events a stateful query drops behind its
        watermark (:func:`lab.audit.window.late_mask`). Undelivered, they are
        ``late_dropped``, never lost.
    archived : bool array, optional
        Aligned with the ledger: events a share group archived after its delivery limit
        (:func:`lab.audit.deliveries.archived_mask`). Undelivered, they are ``archived``, never lost.
    dead_lettered : bool array, optional
        Aligned with the ledger: events the share group's dead-letter topic holds
        (:func:`lab.audit.deliveries.dead_letter_mask`). Undelivered, they are ``dead-lettered``: moved, never
        lost, archived or unseen (the topic is the broker's record that it reached and gave up on them).
    """
    positions = positions or {}
    n = len(ledger.seq)
    top = int(max(ledger.seq.max() if n else 0, sink_seq.max() if len(sink_seq) else 0)) + 1
    ids_by_seq = np.full(top, None, dtype=object)
    ids_by_seq[ledger.seq] = ledger.event_id
    in_range = (sink_seq >= 0) & (sink_seq < top)
    genuine = np.zeros(len(sink_seq), dtype=bool)
    genuine[in_range] = ids_by_seq[sink_seq[in_range]] == sink_ids[in_range]
    delivered = np.bincount(sink_seq[genuine], minlength=top)[ledger.seq]

    lookup = np.zeros(max([*positions, int(ledger.partition.max()) if n else 0, 0]) + 1, dtype=np.int64)
    for p, o in positions.items():
        lookup[p] = o
    unplaced = (ledger.kafka_offset < 0) | (ledger.partition < 0)
    zero = delivered == 0
    moved = zero & (dead_lettered if dead_lettered is not None else False)
    beyond = ledger.kafka_offset >= lookup[np.where(unplaced, 0, ledger.partition)]
    unseen = zero & ~moved & np.where(unplaced, not final, beyond)
    dropped = zero & ~moved & ~unseen & (late if late is not None else False)
    shelved = zero & ~moved & ~unseen & ~dropped & (archived if archived is not None else False)
    lost = zero & ~moved & ~unseen & ~dropped & ~shelved
    dup = delivered > 1
    status = np.full(n, "exactly-once", dtype=object)
    status[dup] = "duplicated"
    status[lost] = "lost"
    status[unseen] = "unseen"
    status[dropped] = "late"
    status[shelved] = "archived"
    status[moved] = "dead-lettered"
    import pandas as pd

    table = pd.DataFrame({
        "seq": ledger.seq, "event_id": ledger.event_id, "partition": ledger.partition,
        "kafka_offset": ledger.kafka_offset, "delivered": delivered, "status": status,
    })
    if attempt_seq is not None:
        ok = (attempt_seq >= 0) & (attempt_seq < top)
        attempts = np.bincount(attempt_seq[ok], minlength=top)[ledger.seq]
        table["attempts"] = attempts
        write_attempts = int(len(attempt_seq))
        absorbed = int(((attempts > 1) & (delivered == 1)).sum())
    else:
        write_attempts, absorbed = int(len(sink_seq)), 0
    stray = sink_ids[~genuine]
    return Audit(
        acked=n,
        exactly_once=int((delivered == 1).sum()),
        duplicated=int(dup.sum()),
        extra_copies=int((delivered[dup] - 1).sum()),
        lost=int(lost.sum()),
        unseen=int(unseen.sum()),
        unexpected=int(len(stray)),
        unexpected_events=int(len(set(stray))),
        failed_sends=int(ledger.failed),
        unknown_sends=int(ledger.unknown),
        write_attempts=write_attempts,
        stored_rows=int(len(sink_seq)),
        absorbed_rewrites=absorbed,
        acked_without_offset=int(unplaced.sum()),
        aborted_sends=int(ledger.aborted),
        late_dropped=int(dropped.sum()),
        archived=int(shelved.sum()),
        dead_lettered=int(moved.sum()),
        table=table,
    )


def audit_run(ledger_path, sink, positions: dict[int, int] | None = None, final: bool = False,
              late: np.ndarray | None = None, archived=None, dead_lettered=None) -> Audit:
    """Audit a run from its ledger file and its open :class:`lab.sinks.spec.SinkReader`.

    ``archived``: ``archived(ledger_seq) -> bool array``, the share group's archived events, when it has any;
    ``dead_lettered``: ``dead_lettered(ledger) -> bool array``, the events its dead-letter topic holds.
    Never raises on a ledger it can read, NULL offsets included.
    """
    seqs, ids = sink.event_rows()
    ledger = read_ledger(ledger_path)
    return audit_core(ledger, seqs, ids, sink.attempt_seqs(), positions, final=final, late=late,
                      archived=archived(ledger.seq) if archived else None,
                      dead_lettered=dead_lettered(ledger) if dead_lettered else None)
