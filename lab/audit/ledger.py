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

import itertools
import queue
import sqlite3
import threading
from pathlib import Path
from typing import NamedTuple

LEDGER_FILE = "ledger.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS sends (
    seq INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL,
    key TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status = 'acked' OR status = 'failed' OR status = 'unknown' OR status = 'aborted'),
    partition INTEGER,
    kafka_offset INTEGER,
    error TEXT,
    sent_at REAL NOT NULL,
    done_at REAL,
    event_time_ms INTEGER
);
"""
#: Acknowledged rows per INSERT statement in :meth:`Ledger.record_acked` (8 values each: 16,384 of SQLite's
#: 32,766 variables a statement).
ROWS_PER_INSERT = 2048
_ACKED_ONE = "(?, ?, ?, 'acked', ?, ?, NULL, ?, ?, ?)"
_ACKED_MANY = "INSERT OR REPLACE INTO sends VALUES " + ", ".join([_ACKED_ONE] * ROWS_PER_INSERT)
_ACKED_ONE = "INSERT OR REPLACE INTO sends VALUES " + _ACKED_ONE
# The status check is written as ORs, not ``status IN (...)``: the same constraint, but SQLite evaluates an IN list
# per inserted row at a cost that doubled the insert (3.9 against 1.9 us a row, 200,000 rows); a ledgered producer
# writes one row per event.


class LedgerEntry(NamedTuple):
    """One send's row of ``sends``, in the table's column order (a tuple: :meth:`Ledger.record` takes it as it is)."""

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

    def record(self, entries: list[LedgerEntry] | list[tuple]) -> None:
        """Insert or replace entries in one transaction (a later outcome replaces an earlier one).

        ``entries``: :class:`LedgerEntry` rows, or plain tuples in its field order (what the producer builds:
        no object per send beyond the row itself).
        """
        if not entries:
            return
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO sends VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", entries)

    def record_acked(self, rows: list[tuple]) -> None:
        """Insert or replace acknowledged sends that carry no error note, as :meth:`record` would write them.

        ``rows``: ``(seq, event_id, key, partition, kafka_offset, sent_at, done_at, event_time_ms)``, in one
        transaction. The status (``acked``) and the empty error are in the statement, two values fewer to bind a
        row (1.5 against 2.1 us a row, 200,000 rows), and rows go :data:`ROWS_PER_INSERT` to a statement: one
        SQLite step inserts them all (1.2 us a row), and Python's sqlite3 lets other threads run meanwhile.
        """
        if not rows:
            return
        whole = len(rows) - len(rows) % ROWS_PER_INSERT
        with self.db:
            for start in range(0, whole, ROWS_PER_INSERT):
                self.db.execute(_ACKED_MANY, list(itertools.chain.from_iterable(rows[start:start + ROWS_PER_INSERT])))
            self.db.executemany(_ACKED_ONE, rows[whole:])

    def close(self) -> None:
        self.db.close()


class LedgerWriter:
    """A run's ledger written by a thread of its own: :meth:`record` and :meth:`record_acked` queue their rows and
    return, and the thread writes them in the order given (a later outcome still replaces an earlier one).

    The producing thread then goes on while SQLite inserts (the GIL is released for each statement): the
    ledgered producer on confluent-kafka sent 112k events/s against 105k/s writing the ledger itself (200,000
    events, the median of three in turns).
    :meth:`close` waits until every row is written; a write that failed raises there, or at the next call.
    """

    def __init__(self, path: Path | str) -> None:
        self.ledger = Ledger(path)
        self.error: BaseException | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write, name="lab-ledger", daemon=True)
        self._thread.start()

    def record(self, entries: list) -> None:
        self._put(self.ledger.record, entries)

    def record_acked(self, rows: list[tuple]) -> None:
        self._put(self.ledger.record_acked, rows)

    def _put(self, write, rows: list) -> None:
        if self.error is not None:
            raise self.error
        if rows:
            self._queue.put((write, rows))

    def _write(self) -> None:
        while (item := self._queue.get()) is not None:
            if self.error is None:
                try:
                    item[0](item[1])
                except BaseException as exc:  # handed to the producer's thread
                    self.error = exc

    def close(self) -> None:
        """Write what is queued, wait for it, close the file."""
        self._queue.put(None)
        self._thread.join()
        self.ledger.close()
        if self.error is not None:
            raise self.error


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


# -- the readers: every query of ``sends`` outside the producer is one of these --------------------------------

def _read_only(path: Path | str, **kwargs) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, **kwargs)


def acked_snapshot(path: Path | str) -> tuple[list[tuple[int, int, int]], list[str], dict[str, int]]:
    """The acknowledged sends as ``(seq, partition, offset)`` and their event ids, in sequence order, and the count
    of every other status: one snapshot even while the producer still writes (one read transaction; WAL).

    An acknowledgement that came back without a partition or offset reads as ``-1`` there.
    """
    db = _read_only(path, isolation_level=None)  # BEGIN/COMMIT as written: the three queries see the same rows
    try:
        db.execute("BEGIN")
        ints = db.execute("SELECT seq, COALESCE(partition, -1), COALESCE(kafka_offset, -1) FROM sends "
                          "WHERE status = 'acked' ORDER BY seq").fetchall()
        ids = [r[0] for r in db.execute("SELECT event_id FROM sends WHERE status = 'acked' ORDER BY seq")]
        other = dict(db.execute("SELECT status, COUNT(*) FROM sends WHERE status != 'acked' GROUP BY "
                                "status").fetchall())
        db.execute("COMMIT")
    finally:
        db.close()
    return ints, ids, other


def acked_event_times(path: Path | str) -> list[tuple[int, str, int, int, int]]:
    """``(seq, key, partition, offset, event_time_ms)`` of every acknowledged send, in sequence order (-1, 0
    unknown)."""
    db = _read_only(path)
    try:
        return db.execute("SELECT seq, key, COALESCE(partition, -1), COALESCE(kafka_offset, -1), "
                          "COALESCE(event_time_ms, 0) FROM sends WHERE status = 'acked' ORDER BY seq").fetchall()
    finally:
        db.close()


def acked_per_key(path: Path | str) -> dict[str, int]:
    """The acknowledged sends per key: what a running count per key owes."""
    db = _read_only(path)
    try:
        return dict(db.execute("SELECT key, COUNT(*) FROM sends WHERE status = 'acked' GROUP BY key").fetchall())
    finally:
        db.close()


def acked_input_offsets(path: Path | str) -> dict[str, tuple[int, int]]:
    """Each acknowledged event's ``(partition, offset)`` in the input topic, where the acknowledgement gave one."""
    db = _read_only(path)
    try:
        return {eid: (p, o) for eid, p, o in db.execute(
            "SELECT event_id, partition, kafka_offset FROM sends WHERE status = 'acked' AND kafka_offset IS NOT NULL")}
    finally:
        db.close()


def aborted_event_ids(path: Path | str) -> list[str]:
    """Event ids of the sends the producer aborted (``txn-abort``): in the topic, not owed."""
    db = _read_only(path)
    try:
        return [r[0] for r in db.execute("SELECT event_id FROM sends WHERE status = 'aborted'")]
    finally:
        db.close()


def sends_frame(path: Path | str):
    """Every send with its status, as a ``pandas.DataFrame`` (pandas imported here: the audit's callers need it)."""
    import pandas as pd

    db = _read_only(path)
    try:
        return pd.read_sql_query(
            "SELECT event_id, status, seq, key, partition, kafka_offset, sent_at, done_at FROM sends", db)
    finally:
        db.close()
