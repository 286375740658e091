"""The producer's ledger: what the broker acknowledged, per event.

One SQLite file per run (``ledger.sqlite``), table ``sends``:

========== ===================================================================
status     meaning
========== ===================================================================
acked      the broker acknowledged it; partition and offset are known
failed     the client gave up before the broker could have stored it
unknown    the request may have reached the broker (timeout, lost
           connection, lost acknowledgement): it may or may not be in the topic
aborted    written inside a transaction the producer aborted: in the topic,
           but a ``read_committed`` reader never returns it; not owed
========== ===================================================================

Each send also keeps the event time the producer stamped on the event
(``event_time_ms``): what a stateful query windows and watermarks by.

Only ``acked`` events are owed to the sink. An ``unknown`` send that did land
shows up in the audit as an unexpected row, which is the truth.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

LEDGER_FILE = "ledger.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS sends (
    seq INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL,
    key TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('acked', 'failed', 'unknown', 'aborted')),
    partition INTEGER,
    kafka_offset INTEGER,
    error TEXT,
    sent_at REAL NOT NULL,
    done_at REAL,
    event_time_ms INTEGER
);
"""


@dataclass(frozen=True)
class LedgerEntry:
    seq: int
    event_id: str
    key: str
    status: str
    partition: int | None
    kafka_offset: int | None
    error: str | None
    sent_at: float
    done_at: float | None
    event_time_ms: int | None = None  # the event time the producer stamped (ms since the epoch)


class Ledger:
    """Writer for a run's ledger. Not thread-safe: one writer thread owns it."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    def record(self, entries: list[LedgerEntry]) -> None:
        """Insert or replace entries in one transaction (a later outcome replaces an earlier one)."""
        if not entries:
            return
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO sends VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [tuple(e.__dict__.values()) for e in entries],
            )

    def close(self) -> None:
        self.db.close()


def max_acked_offsets(path: Path | str) -> dict[int, int]:
    """The highest acknowledged offset per partition (what a drained pipeline must have passed)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT partition, MAX(kafka_offset) FROM sends WHERE status = 'acked' "
                          "AND kafka_offset IS NOT NULL GROUP BY partition").fetchall()
    finally:
        db.close()
    return {int(p): int(o) for p, o in rows}


def place_acks(path: Path | str, locations: dict[str, tuple[int, int]]) -> int:
    """Fill in partition and offset of acknowledged sends that came back without an offset.

    ``locations`` maps event id to ``(partition, offset)`` of its first copy in
    the topic. Returns how many sends were placed.
    """
    db = sqlite3.connect(path)
    try:
        todo = db.execute("SELECT seq, event_id FROM sends WHERE status = 'acked' AND kafka_offset IS NULL").fetchall()
        rows = [(*locations[eid], seq) for seq, eid in todo if eid in locations]
        with db:
            db.executemany("UPDATE sends SET partition = ?, kafka_offset = ? WHERE seq = ?", rows)
    finally:
        db.close()
    return len(rows)
