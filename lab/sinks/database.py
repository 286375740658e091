"""The database sink: a real database the pipelines write to, in one of three modes.

Backends: a SQLite file per run (default, ``sink.sqlite`` in the run
directory) or PostgreSQL when ``LAB_SINK_URL`` is a ``postgresql://`` URL
(one schema per run). Tables:

``sink_events``    the stored rows (event id, seq, partition, offset, batch key)
``sink_attempts``  one row per event per write attempt, so an idempotent sink
                   shows "written twice, stored once"
``sink_batches``   batch keys committed (transactional mode)
``sink_offsets``   next Kafka offset per partition, committed with the rows
                   when a pipeline stores its offsets in the sink
``sink_windows``   a stateful query's counts per (window, key): each write's
                   running count and its change (``delta``) since the state's
                   previous version

Delivery guarantees by mode
---------------------------
``append``         at-least-once: a replayed batch is stored again.
``idempotent``     exactly-once state: upsert on the event id.
``transactional``  exactly-once per batch key: rows and key commit together;
                   a key already committed is skipped (recorded as attempts).

Counts (``--query window-count``) by mode, as a reader of the sink computes
a window's count (:meth:`Sink.window_counts`):

``append``         one row per write with the batch's change; the reader sums
                   the changes, so a replayed batch is counted twice.
``idempotent``     one row per (window, key), upserted with the running count:
                   a replay rewrites the same value.
``transactional``  change rows committed with their batch key; a replayed key
                   is skipped, so the sum is exact.

On failure
----------
``append`` and ``idempotent`` commit a batch in two halves, like a sink that
commits as it goes, so a crash at ``mid-output`` leaves the first half
stored. ``transactional`` commits once, so the same crash stores nothing.

Two more modes are no database: ``files`` (Spark's file sink, read by
:mod:`lab.sinks.files`) and ``topic`` (the output topic ``<topic>.out`` of the kafka-eos and flink
pipelines, read by :class:`lab.sinks.topic.TopicSink`);
:func:`lab.sinks.reader.open_sink` opens every mode as a :class:`SinkReader`.
"""


from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence

from lab.errors import LabError, choices_error
from lab.sinks.spec import DATABASE_MODES, OffsetMismatch, Row, SinkSpec, WindowRow


def _schema_sql(mode: str) -> list[str]:
    unique = " UNIQUE" if mode == "idempotent" else ""
    return [
        f"""CREATE TABLE IF NOT EXISTS sink_events (
            event_id TEXT NOT NULL{unique}, seq INTEGER, partition INTEGER,
            kafka_offset BIGINT, batch_key TEXT, written_at DOUBLE PRECISION)""",
        """CREATE TABLE IF NOT EXISTS sink_attempts (
            event_id TEXT NOT NULL, seq INTEGER, batch_key TEXT, outcome TEXT NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS sink_batches (
            batch_key TEXT PRIMARY KEY, rows INTEGER, committed_at DOUBLE PRECISION)""",
        """CREATE TABLE IF NOT EXISTS sink_offsets (
            topic TEXT NOT NULL, partition INTEGER NOT NULL, next_offset BIGINT NOT NULL,
            PRIMARY KEY (topic, partition))""",
        """CREATE TABLE IF NOT EXISTS sink_windows (
            window_start BIGINT NOT NULL, window_end BIGINT NOT NULL, key TEXT NOT NULL, count BIGINT NOT NULL,
            delta BIGINT NOT NULL, batch_key TEXT, written_at DOUBLE PRECISION)""",
    ] + (["CREATE UNIQUE INDEX IF NOT EXISTS sink_windows_key ON sink_windows (window_start, key)"]
         if mode == "idempotent" else [])


class Sink:
    """An open connection to a run's database sink (a :class:`SinkReader` that also writes).

    Use :func:`open_sink`. One instance per thread or process; SQLite files
    may be written by several processes at once (Spark tasks), each write
    takes the database lock for its transaction.
    """

    def __init__(self, spec: SinkSpec) -> None:
        if spec.mode not in DATABASE_MODES:
            raise choices_error("sink", spec.mode, DATABASE_MODES)
        self.spec = spec
        self.mode = spec.mode
        if spec.backend == "sqlite":
            self.db = sqlite3.connect(spec.path, timeout=60, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self._ph = "?"
            self._begin = "BEGIN IMMEDIATE"
        elif spec.backend == "postgresql":
            try:
                import psycopg
            except ImportError:
                raise LabError("psycopg is not installed; run `make venv`") from None
            try:
                # client_encoding: a database made without a UTF-8 locale is SQL_ASCII, and psycopg then hands back
                # text as bytes, which match no event id of the ledger (measured: every event audited lost).
                self.db = psycopg.connect(spec.url, autocommit=True, connect_timeout=5, client_encoding="utf8")
            except psycopg.OperationalError as e:
                raise LabError(f"cannot connect to LAB_SINK_URL={spec.url!r}: "
                               f"{str(e).strip().splitlines()[0]}") from None
            self.db.execute(f'CREATE SCHEMA IF NOT EXISTS "{spec.schema}"')
            self.db.execute(f'SET search_path TO "{spec.schema}"')
            self._ph = "%s"
            self._begin = "BEGIN"
        else:
            raise choices_error("sink backend", spec.backend, ("sqlite", "postgresql"))
        for stmt in _schema_sql(self.mode):
            self._exec(stmt)

    # -- plumbing --------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql if self._ph == "?" else sql.replace("?", "%s")

    def _exec(self, sql: str, params=()):
        return self.db.execute(self._sql(sql), params)

    def _many(self, sql: str, rows: Iterable[tuple]) -> None:
        rows = list(rows)
        if not rows:
            return
        if self._ph == "?":
            self.db.executemany(sql, rows)
        else:
            with self.db.cursor() as cur:
                cur.executemany(self._sql(sql), rows)

    def _txn(self, body: Callable[[], None], before_commit: Callable[[], None] | None = None) -> None:
        self._exec(self._begin)
        try:
            body()
            if before_commit:
                before_commit()
        except BaseException:
            self._exec("ROLLBACK")
            raise
        self._exec("COMMIT")

    def _insert_rows(self, rows: Sequence[Row], batch_key: str, outcome: str) -> None:
        now = time.time()
        if self.mode == "idempotent":
            sql = ("INSERT INTO sink_events VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (event_id) DO UPDATE SET "
                   "batch_key = excluded.batch_key, written_at = excluded.written_at")
        else:
            sql = "INSERT INTO sink_events VALUES (?, ?, ?, ?, ?, ?)"
        self._many(sql, [(r[0], r[1], r[2], r[3], batch_key, now) for r in rows])
        self._many("INSERT INTO sink_attempts VALUES (?, ?, ?, ?)", [(r[0], r[1], batch_key, outcome) for r in rows])

    def _advance_offsets(self, topic: str, offsets: dict[int, tuple[int, int]]) -> None:
        for partition, (start, until) in sorted(offsets.items()):
            row = self._exec(
                "SELECT next_offset FROM sink_offsets WHERE topic = ? AND partition = ?", (topic, partition)
            ).fetchone()
            if row is not None and row[0] != start:
                raise OffsetMismatch(
                    f"partition {partition}: the sink's next offset is {row[0]} but the batch starts at {start} "
                    f"({'a repeated range' if start < row[0] else 'a skipped range'})"
                )
            self._exec(
                "INSERT INTO sink_offsets VALUES (?, ?, ?) ON CONFLICT (topic, partition) DO UPDATE SET next_offset = "
                "excluded.next_offset",
                (topic, partition, until),
            )

    # -- the API ---------------------------------------------------------
    def write_batch(
        self,
        rows: Sequence[Row],
        batch_key: str,
        *,
        on_midway: Callable[[], None] | None = None,
        offsets: dict[int, tuple[int, int]] | None = None,
        topic: str = "events",
    ) -> str:
        """Write one batch of rows.

        Parameters
        ----------
        rows : sequence of (event_id, seq, partition, offset)
        batch_key : str
            Identifies the batch (for example ``"batch-7"`` or ``"batch-7-part-2"``);
            the transactional mode commits it with the rows.
        on_midway : callable, optional
            Called once part of the batch has been written (the ``mid-output``
            fault point). Append and idempotent sinks have committed the first
            half by then; the transactional sink has not committed anything.
        offsets : dict, optional
            ``{partition: (from, until)}`` to commit with the rows (offsets
            stored in the sink). Only with ``transactional``.
        topic : str

        Returns
        -------
        str
            ``"written"`` or ``"skipped"`` (transactional, key already committed).

        Raises
        ------
        OffsetMismatch
            When ``offsets`` do not continue the stored ones; nothing is committed.
        """
        if offsets is not None and self.mode != "transactional":
            raise LabError("offsets can be stored in the sink only with --sink transactional")

        def skipped() -> None:
            self._many("INSERT INTO sink_attempts VALUES (?, ?, ?, ?)",
                       [(r[0], r[1], batch_key, "skipped") for r in rows])

        return self._write(rows, batch_key, lambda part: self._insert_rows(part, batch_key, "written"), on_midway,
                           also=(lambda: self._advance_offsets(topic, offsets)) if offsets is not None else None,
                           skipped=skipped)

    def write_windows(self, rows: Sequence[WindowRow], batch_key: str, *,
                      on_midway: Callable[[], None] | None = None) -> str:
        """Write one batch of a stateful query's counts: ``(window_start_ms, window_end_ms, key, count, delta)``.

        ``count`` is the window's running count in the state after the batch,
        ``delta`` its change in this batch. Delivery guarantee: the mode's (see
        the module docstring); ``on_midway`` and the halves as in :meth:`write_batch`.

        Returns
        -------
        str
            ``"written"`` or ``"skipped"`` (transactional, key already committed).
        """
        now = time.time()
        if self.mode == "idempotent":
            sql = ("INSERT INTO sink_windows VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (window_start, key) DO UPDATE "
                   "SET count = excluded.count, delta = excluded.delta, batch_key = excluded.batch_key, "
                   "written_at = excluded.written_at")
        else:
            sql = "INSERT INTO sink_windows VALUES (?, ?, ?, ?, ?, ?, ?)"
        return self._write(rows, batch_key, lambda part: self._many(sql, [(*r, batch_key, now) for r in part]),
                           on_midway)

    def _write(self, rows: Sequence[tuple], batch_key: str, insert: Callable[[Sequence[tuple]], None],
               on_midway: Callable[[], None] | None, also: Callable[[], None] | None = None,
               skipped: Callable[[], None] | None = None) -> str:
        """One batch by the mode's protocol: transactional commits rows, key and ``also`` at once; others in halves."""
        # lesson: transactional-sink
        if self.mode == "transactional":
            if self._exec("SELECT 1 FROM sink_batches WHERE batch_key = ?", (batch_key,)).fetchone():
                if skipped is not None:
                    self._txn(skipped)
                return "skipped"

            def body() -> None:
                insert(rows)
                self._exec("INSERT INTO sink_batches VALUES (?, ?, ?)", (batch_key, len(rows), time.time()))
                if also is not None:
                    also()

            self._txn(body, before_commit=on_midway)
            return "written"
        # end lesson: transactional-sink
        half = len(rows) // 2 if on_midway else len(rows)
        self._txn(lambda: insert(rows[:half]))
        if on_midway:
            on_midway()
        if half < len(rows):
            self._txn(lambda: insert(rows[half:]))
        return "written"

    def window_counts(self) -> list[tuple[int, int, str, int]]:
        """``(window_start_ms, window_end_ms, key, count)`` per window and key, as a reader of the sink computes it.

        Idempotent: the stored running count. Append and transactional: the
        sum of the stored changes (a change stored twice counts twice).
        """
        measure = "MAX(count)" if self.mode == "idempotent" else "SUM(delta)"
        return [(int(a), int(b), k, int(c)) for a, b, k, c in self._exec(
            f"SELECT window_start, MAX(window_end), key, {measure} FROM sink_windows GROUP BY window_start, key")]

    def stored_offsets(self, topic: str = "events") -> dict[int, int]:
        """Next offset per partition as committed with the rows (empty when none)."""
        rows = self._exec("SELECT partition, next_offset FROM sink_offsets WHERE topic = ?", (topic,)).fetchall()
        return {int(p): int(o) for p, o in rows}

    def committed_batches(self) -> set[str]:
        return {r[0] for r in self._exec("SELECT batch_key FROM sink_batches").fetchall()}

    def event_rows(self) -> tuple[np.ndarray, np.ndarray]:  # noqa: F821
        """Every stored row as two aligned arrays: ``seq`` (int64) and ``event_id`` (object)."""
        import numpy as np

        rows = self._exec("SELECT seq, event_id FROM sink_events").fetchall()
        seqs = np.fromiter((-1 if r[0] is None else r[0] for r in rows), dtype=np.int64, count=len(rows))
        return seqs, np.array([r[1] for r in rows], dtype=object)

    def attempt_seqs(self) -> np.ndarray:  # noqa: F821
        """The event sequence number of every write attempt (int64)."""
        import numpy as np

        rows = self._exec("SELECT seq FROM sink_attempts").fetchall()
        return np.fromiter((-1 if r[0] is None else r[0] for r in rows), dtype=np.int64, count=len(rows))

    def event_counts(self) -> list[tuple[str, int]]:
        """``(event_id, stored rows)`` for every event in the sink."""
        return self._exec("SELECT event_id, COUNT(*) FROM sink_events GROUP BY event_id").fetchall()


    def totals(self) -> dict[str, int]:
        return {
            "stored_rows": self._exec("SELECT COUNT(*) FROM sink_events").fetchone()[0],
            "write_attempts": self._exec("SELECT COUNT(*) FROM sink_attempts").fetchone()[0],
            "window_rows": self._exec("SELECT COUNT(*) FROM sink_windows").fetchone()[0],
        }

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Sink:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
