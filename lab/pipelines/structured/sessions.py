"""``--query session-count``: sessions per key with ``transformWithStateInPandas``, a timer closing each.

A key's **session** is a run of its events whose event times
(``event_time_ms``, stamped by the producer) are no more than ``--session-gap``
apart; a larger gap starts a new session. This is Spark's ``session_window``
rule (a session ends ``gap`` after its last event), written as the arbitrary
stateful processor of Spark 4 (:class:`SessionCounter`, the API that replaces
``mapGroupsWithState``) so that the lab can show its state, its timers and
what a crash does to them.

Protocol
--------
* **State** (one ``ValueState`` per key, ``session``): the key's open session,
  ``(start, last, count)`` in event-time milliseconds. Kept by the RocksDB
  state store (``transformWithState`` runs on no other provider), one version
  per micro-batch under ``checkpoint/state/0/<partition>/``.
* **Input**: a batch's rows of one key, sorted by event time, advance the
  open session (:func:`advance`). Each session the batch touched is one output
  row ``(window_start, window_end, key, count, delta)``: start, last event +
  gap, the running count after the batch, and the events the batch added.
* **Timer** (event time): one per key at ``last + gap``. When the watermark
  passes it, no on-time event can join the session any more; the handler
  clears the key's state and writes nothing. The state stays bounded by the
  keys active within the watermark's delay, which Spark's state reader shows.
* **Late rows**: in event-time mode Spark drops rows whose event time is at
  or behind the previous batch's watermark before the processor sees them
  (:mod:`lab.audit.window` counts them as ``late_dropped``).

The auditor states the same rule on its own, over the ledger
(:func:`lab.audit.window.session_of`), never importing this code: what it
owes each ``(session start, key)`` does not depend on the code it checks.

Delivery guarantee
------------------
The state is exactly once: a batch run again after a crash starts from the
state version of the batch before it, so its rows, counts and deltas are the
same. The output is as the sink makes it: ``append`` stores the replayed
batch's deltas a second time (its sessions over by exactly what that batch
added), ``idempotent`` upserts the same running count per (session, key),
``transactional`` skips a batch key already committed. The output is
hash-partitioned by key, so a replay gives each Spark partition the same keys
and the same batch key.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The processor's output, the columns :func:`lab.pipelines.structured.stateful.window_writer` writes.
SESSION_SCHEMA = "window_start long, window_end long, key string, count long, delta long"
#: The processor's state per key: the open session.
STATE_SCHEMA = "start long, last long, count long"
#: The name Spark's state reader needs (``stateVarName``) to read that state.
STATE_VAR = "session"


@dataclass(frozen=True)
class Session:
    """A key's session: first and last event time (ms) and its events so far."""

    start: int
    last: int
    count: int


def advance(open_session: Session | None, times, gap_ms: int) -> tuple[list[tuple[Session, int]], Session | None]:
    """Add one batch's event times of a key (ascending) to its open session.

    Returns
    -------
    tuple
        ``(touched, open)``: each session the batch added to, as it stands after
        the batch, with the events it added (oldest first); and the session
        left open (the last touched, or ``open_session`` when ``times`` is empty).
    """
    touched: list[tuple[Session, int]] = []
    current, added = open_session, 0
    for t in times:
        t = int(t)
        if current is not None and t - current.last <= gap_ms:
            current, added = Session(current.start, max(current.last, t), current.count + 1), added + 1
            continue
        if current is not None and added:
            touched.append((current, added))
        current, added = Session(t, t, 1), 1
    if current is not None and added:
        touched.append((current, added))
    return touched, current


def session_processor(gap_ms: int):
    """The :class:`SessionCounter` class for ``gap_ms`` (a class Spark's Python workers pickle with the plan)."""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    # lesson: session-count
    class SessionCounter(StatefulProcessor):
        """Counts each key's events per session; an event-time timer at ``last + gap`` clears a closed one."""

        def init(self, handle) -> None:
            self.handle = handle
            self.state = handle.getValueState(STATE_VAR, STATE_SCHEMA)

        def handleInputRows(self, key, rows, timerValues):
            times = np.sort(np.concatenate([df["event_time_ms"].to_numpy(dtype=np.int64) for df in rows]))
            before = self.state.get()
            open_before = Session(*map(int, before)) if before is not None else None
            touched, now_open = advance(open_before, times, gap_ms)
            self.state.update((now_open.start, now_open.last, now_open.count))
            if open_before is None or open_before.last != now_open.last:
                if open_before is not None:
                    self.handle.deleteTimer(open_before.last + gap_ms)
                self.handle.registerTimer(now_open.last + gap_ms)
            yield pd.DataFrame({"window_start": [s.start for s, _ in touched],
                                "window_end": [s.last + gap_ms for s, _ in touched],
                                "key": [key[0]] * len(touched), "count": [s.count for s, _ in touched],
                                "delta": [d for _, d in touched]})

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            # The watermark is past the session's end: no on-time event can join it. Its rows were
            # written by the batches that added to it; what is left is to free the state.
            self.state.clear()
            return iter([])
        # end lesson: session-count

        def close(self) -> None:
            pass

    return SessionCounter


def session_query(timed, gap_ms: int):
    """``session-count``'s output DataFrame from the watermarked event stream ``timed`` (update mode)."""
    return (timed.groupBy("key")
            .transformWithStateInPandas(session_processor(gap_ms)(), SESSION_SCHEMA, "Update", "EventTime"))
