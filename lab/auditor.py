"""The auditor: per acknowledged event, how many times did it reach the sink?

It joins the producer's ledger with the sink:

* ``0`` copies, at an offset the pipeline has already passed: **lost**
* ``0`` copies, at an offset the pipeline has not reached yet: **unseen**
  (slowness is never called loss)
* ``1`` copy: **exactly once**
* ``>1`` copies: **duplicated** (``extra_copies`` counts the surplus rows)
* rows whose event id no acknowledged send explains: **unexpected**
  (for example a send whose acknowledgement was lost, that did land)

It also compares write attempts with stored rows, so an idempotent sink shows
"written twice, stored once" (``absorbed_rewrites``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

STATUS_ORDER = ("exactly-once", "duplicated", "lost", "unseen")


@dataclass(frozen=True)
class Audit:
    """Counts of one audit. ``acked == exactly_once + duplicated + lost + unseen`` always holds."""

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
    table: pd.DataFrame = field(repr=False, compare=False, default=None)

    @property
    def guarantee(self) -> str:
        """The delivery guarantee these counts show."""
        if self.unseen:
            return "incomplete"
        if self.lost and (self.duplicated or self.unexpected):
            return "loss and duplicates"
        if self.lost:
            return "at-most-once"
        if self.duplicated or self.unexpected:
            return "at-least-once"
        return "exactly-once"

    def counts(self) -> dict:
        """The counts as a plain dict (no per-event table)."""
        d = {k: v for k, v in asdict(self).items() if k != "table"}
        d["guarantee"] = self.guarantee
        return d


def read_ledger(ledger_path) -> pd.DataFrame:
    """All sends: ``seq, event_id, status, partition, kafka_offset``."""
    db = sqlite3.connect(f"file:{ledger_path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT seq, event_id, status, partition, kafka_offset FROM sends ORDER BY seq").fetchall()
    finally:
        db.close()
    return pd.DataFrame(rows, columns=["seq", "event_id", "status", "partition", "kafka_offset"])


def audit_frames(
    ledger: pd.DataFrame,
    stored: pd.DataFrame,
    attempts: pd.DataFrame | None = None,
    positions: dict[int, int] | None = None,
) -> Audit:
    """Audit from plain tables (the core; :func:`audit_run` feeds it from files).

    Parameters
    ----------
    ledger : DataFrame
        ``seq, event_id, status, partition, kafka_offset`` per send.
    stored : DataFrame
        ``event_id, copies``: stored rows per event id in the sink.
    attempts : DataFrame, optional
        ``event_id, attempts``: write attempts per event id.
    positions : dict, optional
        ``{partition: next offset}`` the pipeline has durably passed. An
        undelivered event at or beyond its partition's position is unseen.
        Missing partitions count as position 0 (nothing read yet).
    """
    positions = positions or {}
    acked = ledger[ledger["status"] == "acked"]
    copies = stored.set_index("event_id")["copies"]
    delivered = acked["event_id"].map(copies).fillna(0).astype("int64").to_numpy()
    part = acked["partition"].fillna(-1).astype("int64").to_numpy()
    offs = acked["kafka_offset"].fillna(-1).astype("int64").to_numpy()
    lookup = np.zeros(max([*positions, int(part.max()) if len(part) else 0]) + 1, dtype="int64")
    for p, o in positions.items():
        lookup[p] = o
    pos = lookup[np.clip(part, 0, None)]
    zero = delivered == 0
    unseen = zero & (offs >= pos)
    lost = zero & ~unseen
    dup = delivered > 1
    status = pd.Series("exactly-once", index=acked.index)
    status[dup] = "duplicated"
    status[lost] = "lost"
    status[unseen] = "unseen"
    table = pd.DataFrame({
        "seq": acked["seq"].to_numpy(),
        "event_id": acked["event_id"].to_numpy(),
        "partition": part,
        "kafka_offset": offs,
        "delivered": delivered,
        "status": status.to_numpy(),
    })
    acked_ids = set(acked["event_id"])
    unexpected = stored[~stored["event_id"].isin(acked_ids)]
    if attempts is not None and len(attempts):
        att = attempts.set_index("event_id")["attempts"]
        table["attempts"] = table["event_id"].map(att).fillna(0).astype("int64")
        write_attempts = int(attempts["attempts"].sum())
        absorbed = int(((table["attempts"] > 1) & (table["delivered"] == 1)).sum())
    else:
        write_attempts = int(stored["copies"].sum())
        absorbed = 0
    return Audit(
        acked=int(len(acked)),
        exactly_once=int((delivered == 1).sum()),
        duplicated=int(dup.sum()),
        extra_copies=int((delivered[dup] - 1).sum()),
        lost=int(lost.sum()),
        unseen=int(unseen.sum()),
        unexpected=int(unexpected["copies"].sum()),
        unexpected_events=int(len(unexpected)),
        failed_sends=int((ledger["status"] == "failed").sum()),
        unknown_sends=int((ledger["status"] == "unknown").sum()),
        write_attempts=write_attempts,
        stored_rows=int(stored["copies"].sum()),
        absorbed_rewrites=absorbed,
        table=table,
    )


def audit_run(ledger_path, sink, positions: dict[int, int] | None = None) -> Audit:
    """Audit a run from its ledger file and its open :class:`lab.sinks.Sink`."""
    ledger = read_ledger(ledger_path)
    stored = pd.DataFrame(sink.event_counts(), columns=["event_id", "copies"])
    attempts = pd.DataFrame(sink.attempt_counts(), columns=["event_id", "attempts"])
    return audit_frames(ledger, stored, attempts, positions)
