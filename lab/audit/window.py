"""The window audit: per (window, key), the count the ledger owes against the count the sink shows.

For ``--query window-count`` the sink holds counts, not events, so the
per-event audit (:mod:`lab.audit.auditor`) cannot say which event reached it. This
one checks the invariant people check on a stateful job after a crash (the
Flink operations playground's "every window holds exactly 1,000 events"),
per window and per key:

* **expected**: the acknowledged events (the ledger's ``acked`` sends, with
  the key and event time the producer stamped) in the tumbling window of
  their event time, minus the events behind the watermark;
* **measured**: the sink's count, as a reader of the sink computes it
  (:meth:`lab.sinks.database.Sink.window_counts`; for Spark's Kafka sink the
  last update of each (window, key), :meth:`lab.sinks.topic.TopicSink.window_counts`);
* a window is **exact**, **over** (``overcount`` events too many) or
  **under** (``undercount`` too few).

Events behind the watermark
---------------------------
A stateful query drops rows that are late for its watermark; they are
expected to be missing, counted in ``late_dropped`` and never as lost. The
audit decides it as Spark does, from what Spark recorded: each event belongs
to the micro-batch whose offset range holds it (``batch-start`` in the
timeline), and Spark filters a batch's late rows with the watermark of the
batch *before* it (``batchWatermarkMs`` of the previous entry of the
checkpoint's offset log; Spark 3.4+ uses the previous batch's watermark for
late rows and the current one for eviction, SPARK-40925). A row is late when

* ``window-count``: the end of its window ``<=`` that watermark;
* ``dedupe`` and ``session-count``: its event time ``<=`` that watermark.

Sessions
--------
``--query session-count`` is audited the same way with sessions for windows:
the ledger's on-time events of each key split where two event times are more
than ``--session-gap`` apart (:func:`session_of`),
each ``(session start, key)`` owed its events; the sink's rows carry the same
start.

The pure core is :func:`late_mask` and :func:`window_audit_core`; the rest
reads a run's files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lab import events as ev
from lab.audit.ledger import acked_event_times
from lab.queries import COUNT_QUERIES
from lab.registry import PIPELINES

if TYPE_CHECKING:
    from lab.audit.auditor import Audit


@dataclass(frozen=True)
class EventTimes:
    """The acknowledged sends with what a stateful query groups by (aligned arrays)."""

    seq: np.ndarray
    key: np.ndarray
    partition: np.ndarray
    kafka_offset: np.ndarray
    event_time_ms: np.ndarray


@dataclass(frozen=True)
class WindowAudit:
    """Counts of one window audit; ``table`` has one row per (window, key)."""

    windows: int
    windows_exact: int
    windows_over: int
    windows_under: int
    overcount: int
    undercount: int
    late_dropped: int
    unseen: int
    counted_exactly: int
    table: pd.DataFrame = field(repr=False, compare=False, default=None)

    def counts(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "table"}


def read_event_times(ledger_path) -> EventTimes:
    """The acknowledged sends of a run's ledger, with key and event time, in sequence order."""
    rows = acked_event_times(ledger_path)
    cols = list(zip(*rows)) if rows else [(), (), (), (), ()]
    return EventTimes(seq=np.array(cols[0], dtype=np.int64), key=np.array(cols[1], dtype=object),
                      partition=np.array(cols[2], dtype=np.int64), kafka_offset=np.array(cols[3], dtype=np.int64),
                      event_time_ms=np.array(cols[4], dtype=np.int64))


def below(events: EventTimes, ends: dict[int, int]) -> np.ndarray:
    """The acknowledged events at offsets below ``ends`` (``{partition: offset}``, e.g. a batch's end offsets)."""
    limit = np.array([ends.get(int(p), 0) for p in events.partition], dtype=np.int64)
    return (events.kafka_offset >= 0) & (events.kafka_offset < limit)


def ledger_window_counts(events: EventTimes, owed: np.ndarray, window_ms: int) -> dict[tuple[int, str], int]:
    """``{(window_start_ms, key): events}`` of the ``owed`` events in tumbling windows of ``window_ms``."""
    from collections import Counter

    times = events.event_time_ms[owed]
    return Counter(zip((times - times % window_ms).tolist(), events.key[owed].tolist()))


def batch_of(partition: np.ndarray, offset: np.ndarray, ranges: dict[int, dict[int, tuple[int, int]]]) -> np.ndarray:
    """The micro-batch whose offset range holds each event (``-1``: in none yet)."""
    out = np.full(len(partition), -1, dtype=np.int64)
    for batch, per_partition in ranges.items():
        for p, (start, end) in per_partition.items():
            out[(partition == int(p)) & (offset >= start) & (offset < end)] = batch
    return out


def late_mask(event_time_ms: np.ndarray, batch: np.ndarray, watermarks: dict[int, int], query: str,
              window_ms: int) -> np.ndarray:
    """Which events a stateful query drops as late (see the module docstring for the rule).

    ``watermarks``: ``{batch: batchWatermarkMs}`` from the offset log; an event
    read by batch ``b`` is filtered with the watermark of batch ``b - 1`` (0
    before the first). Events in no batch (``-1``) are not late.
    """
    prev = np.array([watermarks.get(int(b) - 1, 0) if b >= 0 else 0 for b in batch], dtype=np.int64)
    if query == "window-count":
        moment = event_time_ms - event_time_ms % window_ms + window_ms  # the window's end
    else:  # dedupe and session-count: Spark filters the input rows by their own event time
        moment = event_time_ms
    return (batch >= 0) & (prev > 0) & (moment <= prev)


def window_audit_core(events: EventTimes, late: np.ndarray, seen: np.ndarray, measured: list[tuple],
                      window_ms: int, sessions: tuple[np.ndarray, np.ndarray] | None = None) -> WindowAudit:
    """Compare expected and measured counts per (window, key).

    Parameters
    ----------
    events : EventTimes
        The acknowledged sends.
    late : bool array
        Events the query drops as late (:func:`late_mask`).
    seen : bool array
        Events the pipeline has read (a live audit's unread events are unseen,
        owed to no window yet; in a final audit every event is seen).
    measured : list of ``(window_start_ms, window_end_ms, key, count)``
        The sink's counts (:meth:`lab.sinks.database.Sink.window_counts`).
    window_ms : int
        0: one window for the whole run (running counts per key).
    sessions : tuple of int arrays, optional
        ``(start, end)`` of each event's session (``session-count``), in place
        of tumbling windows; only the owed events' entries are read.
    """
    owed = seen & ~late
    if sessions is not None:
        starts = sessions[0]
    else:
        starts = events.event_time_ms - events.event_time_ms % window_ms if window_ms else np.zeros_like(events.seq)
    expected = (pd.DataFrame({"window_start": starts[owed], "key": events.key[owed]})
                .groupby(["window_start", "key"]).size().rename("expected"))
    got = pd.DataFrame(measured, columns=["window_start", "window_end", "key", "measured"]) \
        .set_index(["window_start", "key"])["measured"].astype(np.int64)  # an empty sink's column is object
    table = pd.concat([expected, got], axis=1).fillna(0).astype(np.int64).reset_index()
    late_by_window = (pd.DataFrame({"window_start": starts[late], "key": events.key[late]})
                      .groupby(["window_start", "key"]).size().rename("late"))
    table = table.merge(late_by_window.reset_index(), on=["window_start", "key"], how="outer").fillna(0)
    table = table.astype({"expected": np.int64, "measured": np.int64, "late": np.int64})
    if sessions is not None:
        ends = pd.DataFrame({"window_start": starts[owed], "key": events.key[owed], "window_end": sessions[1][owed]}) \
            .groupby(["window_start", "key"])["window_end"].max()
        table = table.merge(ends.reset_index(), on=["window_start", "key"], how="left")
        table["window_end"] = table["window_end"].fillna(table["window_start"]).astype(np.int64)
    else:
        table["window_end"] = table["window_start"] + window_ms
    diff = table["measured"] - table["expected"]
    table["status"] = np.where(diff > 0, "over", np.where(diff < 0, "under", "exact"))
    table = table.sort_values(["window_start", "key"]).reset_index(drop=True)
    counted = table["expected"] > 0
    exact = (diff == 0) & (counted | (table["measured"] > 0))
    return WindowAudit(
        windows=int((counted | (table["measured"] > 0)).sum()),
        windows_exact=int(exact.sum()),
        windows_over=int((diff > 0).sum()),
        windows_under=int((diff < 0).sum()),
        overcount=int(diff[diff > 0].sum()),
        undercount=int(-diff[diff < 0].sum()),
        late_dropped=int(late.sum()),
        unseen=int((~seen).sum()),
        counted_exactly=int(table.loc[exact, "expected"].sum()),
        table=table[["window_start", "window_end", "key", "expected", "measured", "late", "status"]],
    )


# -- a run's files ----------------------------------------------------------------
def batch_ranges(events: list[dict]) -> dict[int, dict[int, tuple[int, int]]]:
    """Each micro-batch's offset ranges, from its newest ``batch-start`` (a replay logs the same ranges)."""
    out: dict[int, dict[int, tuple[int, int]]] = {}
    for e in events:
        if e.get("type") == ev.BATCH_START and e.get("ranges") is not None:
            out[int(e["batch"])] = {int(p): (int(a), int(b)) for p, (a, b) in e["ranges"].items()}
    return out


def watermarks(checkpoint: Path) -> dict[int, int]:
    """``{batch: batchWatermarkMs}`` from a structured query's offset log (empty when there is none)."""
    out = {}
    d = Path(checkpoint) / "offsets"
    if not d.is_dir():
        return out
    for f in d.iterdir():
        if f.name.isdigit():
            try:
                meta = json.loads(f.read_text().splitlines()[1])
            except (IndexError, ValueError, OSError):  # an entry being written: read next time
                continue
            out[int(f.name)] = int(meta.get("batchWatermarkMs", 0))
    return out


def late_events(run_dir: Path, config, events: EventTimes, timeline: list[dict]) -> np.ndarray:
    """The late mask of a run's acknowledged events (all ``False`` for a query without a watermark)."""
    if config.query not in ("dedupe", *COUNT_QUERIES) or not PIPELINES[config.pipeline].watermarks:
        return np.zeros(len(events.seq), dtype=bool)
    batch = batch_of(events.partition, events.kafka_offset, batch_ranges(timeline))
    return late_mask(events.event_time_ms, batch, watermarks(Path(run_dir) / "checkpoint"), config.query,
                     window_ms_of(config))


def window_ms_of(config) -> int:
    """The window in ms; 0 for the receiver's running counts per key (one window, ``[0, 0)``, for the whole run)."""
    if PIPELINES[config.pipeline].running_counts:
        return 0
    return max(1, int(round(config.event_time.window_s * 1000)))


def session_of(keys: np.ndarray, times: np.ndarray, gap_ms: int) -> tuple[np.ndarray, np.ndarray]:
    """Each event's session: ``(start, end)`` per event, aligned with the input.

    A key's events in event-time order; one more than ``gap_ms`` after the
    previous starts a new session (Spark's ``session_window`` rule, and
    :func:`lab.pipelines.structured.sessions.advance`'s). ``end`` is the
    session's last event time plus ``gap_ms``, as the pipeline writes
    ``window_end``.
    """
    n = len(times)
    starts = np.zeros(n, dtype=np.int64)
    ends = np.zeros(n, dtype=np.int64)
    if n == 0:
        return starts, ends
    order = np.lexsort((times, keys.astype(str)))
    k, t = keys[order].astype(str), times[order].astype(np.int64)
    new = np.ones(n, dtype=bool)
    new[1:] = (k[1:] != k[:-1]) | (t[1:] - t[:-1] > gap_ms)
    session = np.cumsum(new) - 1
    first = t[new]
    last = np.maximum.reduceat(t, np.flatnonzero(new))
    starts[order] = first[session]
    ends[order] = last[session] + gap_ms
    return starts, ends


def session_state_check(state_sessions: list, events: EventTimes, upto: np.ndarray, gap_ms: int) -> pd.DataFrame:
    """Each key of a ``session-count`` state snapshot against the ledger's last session of that key.

    Parameters
    ----------
    state_sessions : list of ``[key, start, last, count]``
        The state as one batch committed it (:mod:`lab.spark.state_reader`'s ``sessions``).
    events : EventTimes
        The acknowledged sends.
    upto : bool array
        The events that batch had read (below its end offsets).

    Returns
    -------
    pandas.DataFrame
        One row per key in the state: ``state_start``, ``state_count``, the ledger's ``ledger_start`` and
        ``ledger_count`` for the key's last session among ``upto``, and ``exact`` when both agree.
    """
    starts, _ = session_of(events.key[upto], events.event_time_ms[upto], gap_ms)
    ledger = (pd.DataFrame({"key": events.key[upto], "start": starts}).groupby(["key", "start"]).size()
              .rename("count").reset_index().sort_values(["key", "start"]).groupby("key").last())
    state = pd.DataFrame(state_sessions, columns=["key", "state_start", "state_last", "state_count"]).set_index("key")
    table = state[["state_start", "state_count"]].join(
        ledger.rename(columns={"start": "ledger_start", "count": "ledger_count"}), how="left")
    table = table.fillna(-1).astype(np.int64)
    table["exact"] = (table["state_start"] == table["ledger_start"]) & (table["state_count"] == table["ledger_count"])
    return table.reset_index()


def ledger_sessions(events: EventTimes, owed: np.ndarray, gap_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Each event's session ``(start, end)`` among the ``owed`` events (the rest: zeros, never read)."""
    starts = np.zeros(len(events.seq), dtype=np.int64)
    ends = np.zeros(len(events.seq), dtype=np.int64)
    s, e = session_of(events.key[owed], events.event_time_ms[owed], int(round(gap_s * 1000)))
    starts[owed], ends[owed] = s, e
    return starts, ends


def audit_stateful(run_dir: Path, config, sink, positions: dict[int, int], final: bool = False) -> Audit:
    """Audit a run of a stateful query from its ledger, timeline, checkpoint and open sink.

    ``dedupe``: the per-event audit, with the events behind the watermark as
    ``late_dropped``. ``window-count`` and ``session-count``: the window audit, in an
    :class:`lab.audit.auditor.Audit` (see its docstring for what its fields then
    hold). ``positions``: the next offset per partition the pipeline has
    passed (events at or beyond it are unseen).
    """
    from lab.audit.auditor import Audit, audit_run, read_ledger
    from lab.audit.ledger import LEDGER_FILE
    from lab.events import read_events

    ledger_path = Path(run_dir) / LEDGER_FILE
    events = read_event_times(ledger_path)
    late = late_events(run_dir, config, events, read_events(run_dir))
    if config.query not in COUNT_QUERIES:
        return audit_run(ledger_path, sink, positions, final=final, late=late)
    position = np.array([positions.get(int(p), 0) for p in events.partition], dtype=np.int64)
    seen = (events.kafka_offset >= 0) & (events.kafka_offset < position)
    measured = sink.window_counts()
    sessions = None
    if config.query == "session-count":
        sessions = ledger_sessions(events, seen & ~late, config.event_time.session_gap_s)
    w = window_audit_core(events, late, seen, measured, window_ms_of(config), sessions)
    other = read_ledger(ledger_path)
    stored = len(measured)
    return Audit(
        acked=len(events.seq), exactly_once=w.counted_exactly, duplicated=w.overcount, extra_copies=w.overcount,
        lost=w.undercount, unseen=w.unseen, unexpected=0, unexpected_events=0, failed_sends=other.failed,
        unknown_sends=other.unknown, write_attempts=sink.totals().get("window_rows", stored), stored_rows=stored,
        absorbed_rewrites=0, acked_without_offset=int((events.kafka_offset < 0).sum()), aborted_sends=other.aborted,
        late_dropped=w.late_dropped, windows={k: v for k, v in w.counts().items()
                                              if k not in ("unseen", "counted_exactly", "late_dropped")},
        table=w.table)
