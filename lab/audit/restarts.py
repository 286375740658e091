"""How long each driver restart kept a run from its work, read from the run's timeline.

A restart's time is what a learner waits for after a crash: from the moment
the previous driver ended (the ``fault`` event of the ``driver-crash`` that
killed it, written just after the kill, or its ``driver-exit`` when it died
on its own) to the restarted driver's first ``batch-done``. That span holds
the restart delay, the new driver's start (or a standby's turn), its
recovery from the checkpoint or offsets, and its first batch. ``lab run``
prints it next to the restarts, ``report.json`` has it as ``restart_s``, the
timeline shades it and the panel shows the latest one.

A restart has no time when the restarted driver did no batch: it died
first, or the run ended first (a crash after the last events had passed
leaves the next driver nothing to do).

A ``batch-done`` marked ``recovered`` (the structured driver logging, at
start-up, a commit its killed predecessor left unlogged: that batch's work
was done before the crash) does not end a restart. The receiver's
``recovered`` mark is on its ``batch-start`` and means the opposite, a batch
run again from the write-ahead log: real work, whose ``batch-done`` counts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lab import events as ev

#: Events that end a run's pipeline work (the supervisor's loop ends with one of the first four, then ``run-end``).
_RUN_OVER = (ev.DRAINED, ev.NO_MORE_BATCHES, ev.DEADLINE, ev.RUN_ERROR, ev.RUN_END)


@dataclass(frozen=True)
class Restart:
    """One driver restart, in the timeline's wall-clock seconds (the events' ``t``)."""

    attempt: int  #: the restarted driver's attempt (2 for a run's first restart)
    cause: str  #: ``crash`` (a ``driver-crash``, planned or pressed) or ``exit`` (the driver exited on its own)
    down_t: float  #: when the previous driver was killed or exited
    start_t: float  #: this attempt's ``driver-start``
    back_t: float | None  #: this attempt's first ``batch-done`` (not a ``recovered`` one); None: it did no batch
    #: When it did no batch: when that became final (its own death, or the run's end); None while it may still
    over_t: float | None = None

    @property
    def back_s(self) -> float | None:
        """Seconds from the previous driver's end to this driver's first batch done (None: no batch)."""
        return None if self.back_t is None else round(self.back_t - self.down_t, 3)


def driver_restarts(events: list[dict]) -> list[Restart]:
    """Every driver restart of a timeline, in order (pure: no I/O).

    A restart is a ``driver-start`` with ``attempt`` above 1. Its start of
    downtime is the last ``driver-crash`` fault or ``driver-exit`` before
    it; without either (a timeline cut short), the ``driver-start`` itself.
    """
    down: tuple[str, float] | None = None
    started: list[tuple[int, float, str, float]] = []  # attempt, start, cause, down
    deaths: list[float] = []
    back: dict[int, float] = {}
    over: float | None = None
    for e in events:
        kind = e.get("type")
        if kind == ev.FAULT and e.get("kind") == "driver-crash":
            down = ("crash", e["t"])
            deaths.append(e["t"])
        elif kind == ev.DRIVER_EXIT:
            down = ("exit", e["t"])
            deaths.append(e["t"])
        elif kind == ev.DRIVER_START and e.get("attempt", 1) > 1:
            cause, at = down or ("crash", e["t"])
            started.append((e["attempt"], e["t"], cause, at))
            down = None
        elif kind == ev.BATCH_DONE and not e.get("recovered"):
            back.setdefault(e.get("attempt", 1), e["t"])
        elif kind in _RUN_OVER and over is None:
            over = e["t"]
    out = []
    for attempt, start, cause, at in started:
        back_t = back.get(attempt)
        ended = [t for t in [*deaths, *([over] if over is not None else [])] if t > start]
        out.append(Restart(attempt=attempt, cause=cause, down_t=at, start_t=start, back_t=back_t,
                           over_t=None if back_t is not None or not ended else min(ended)))
    return out


def restart_line(restart: Restart, now: float) -> str:
    """Words for ``restart`` at wall-clock ``now``: back after how long, restarting for how long, or no batch."""
    after = "the crash" if restart.cause == "crash" else "the driver's exit"
    if restart.back_s is not None:
        return f"driver #{restart.attempt} back {restart.back_s:.1f} s after {after}"
    if restart.over_t is not None:
        return (f"driver #{restart.attempt} did no batch (restarted {restart.start_t - restart.down_t:.1f} s after "
                f"{after})")
    return f"driver #{restart.attempt} restarting, {max(0.0, now - restart.down_t):.1f} s since {after}"


def restart_cell(value) -> str:
    """A results row's restart times as a table cell: ``2.3``, ``2.3, 4.1``, ``no batch, 4.1``.

    ``value`` is a report's ``restart_s`` list, or the JSON text of one as a
    matrix's results table holds it (its ``restart_s`` column). Empty for a run
    without restarts, and for a table written before the column existed
    (missing, NaN or unreadable).
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return ""
    if not isinstance(value, list):
        return ""
    return ", ".join("no batch" if v is None else f"{float(v):.1f}" for v in value)
