"""When a run may end: drained, or waiting for a batch that will not come.

The supervisor's monitor thread (:mod:`lab.run.supervisor`) asks every half second.
This module holds the two rules and the little state they need; it reads the
topic's end offsets and the ledger, and learns the driver's attempt, start
time and liveness from the supervisor's ``DriverProcess``.

Rules
-----
* **Drained** (:meth:`EndWatch.drained`): the producer is done, no fault is left
  to come (:attr:`lab.run.injector.FaultInjector.busy`), no restart is pending, and
  the live, settled driver is past the topic's end offsets and past every offset
  the ledger acknowledged (see :meth:`EndWatch.passed_everything`).
* **No more batches** (:meth:`EndWatch.batchless_s`): the same, except that
  faults are left, all of them waiting for a batch (``@batch=N``) or for an
  ISR to shrink (``@isr=N``: once nothing is written, none will); besides, no
  batch of the live driver is open (submitted or started, not done), that driver
  has started a batch of its own, and no batch event came for :data:`IDLE_END_S`
  (at least five batch intervals). The run then stops undrained and says which
  faults waited. Before this rule such a run sat out the whole deadline (120 s
  by default). Anything less certain (a restarted driver yet to start a batch, a
  receiver's queued batches) is left to the deadline.

Neither rule changes what a run measures: both only decide when to stop it, and
the audit then counts every acknowledged event against the sink.
"""

from __future__ import annotations

import time
from pathlib import Path

from lab import events as ev
from lab.audit.ledger import LEDGER_FILE, max_acked_offsets
from lab.kafka import tools as kafka_tools

#: Seconds a restarted driver gets to report progress of its own before the run may count as drained.
RESTART_SETTLE_S = 45.0
#: Seconds a driver must stay at a cluster's end offsets, short of offsets the ledger acknowledged,
#: before those offsets count as truncated away (an unclean election) rather than not yet visible.
TRUNCATED_SETTLE_S = 3.0
#: Seconds without a batch event, once every event has passed, after which a planned fault that waits for a
#: batch counts as never coming (at least five batch intervals). Every pipeline but flink (whose checkpoints go
#: on) numbers a batch only when records come, so a plan such as ``driver-crash@batch=6`` on a run that fits in
#: two batches waited the whole deadline (120 s; 150 s in the matrix).
IDLE_END_S = 15.0
#: The events that restart the idle clock; the first three open or close a batch.
_BATCH_EVENTS = (ev.BATCH_SUBMITTED, ev.BATCH_START, ev.BATCH_DONE, ev.DRIVER_READY)


class EndWatch:
    """The end-of-run rules of one run (see the module docstring).

    Parameters
    ----------
    config : lab.config.RunConfig
        The run's configuration (its topic, partitions and batch interval).
    run_dir : path
        The run directory (its ledger).
    """

    def __init__(self, config, run_dir: Path) -> None:
        self.config = config
        self.run_dir = Path(run_dir)
        #: The topic's end offsets at the last check (shown live by ``Run.status``).
        self.end_offsets: dict[int, int] = {}
        self._at_end: tuple = (None, 0.0)  # (positions and end offsets, since when) for TRUNCATED_SETTLE_S
        self._last_batch_at = 0.0  # monotonic time of the last batch event or driver ready
        self._open: set[tuple] = set()  # (attempt, batch) submitted or started, not done
        self._started: set = set()  # attempts that started a batch
        self.idle_s: float | None = None  # seconds without a batch when the run ended for want of one

    def on_event(self, event: dict) -> None:
        """Follow the run's batches (any event may be passed; only batch events and driver-ready count)."""
        kind = event.get("type")
        if kind not in _BATCH_EVENTS:
            return
        self._last_batch_at = time.monotonic()
        key = (event.get("attempt"), event.get("batch"))
        if kind == ev.BATCH_DONE:
            self._open.discard(key)
        elif kind != ev.DRIVER_READY:
            self._open.add(key)
        if kind == ev.BATCH_START:
            self._started.add(event.get("attempt"))

    def ended(self, progress: dict, write, elapsed_s: float, **where) -> str | None:
        """Why the run ends now, having written the event that says so: ``drained``, ``no-more-batches``
        (:attr:`idle_s` then holds the seconds without a batch), or ``None`` while it goes on. ``where``: what
        :meth:`drained` and :meth:`batchless_s` read."""
        if self.drained(progress, **where):
            write(ev.DRAINED, elapsed_s=round(elapsed_s, 3))
            return ev.DRAINED
        self.idle_s = self.batchless_s(progress, **where)
        if self.idle_s is not None:
            write(ev.NO_MORE_BATCHES, elapsed_s=round(elapsed_s, 3), idle_s=round(self.idle_s, 3),
                  waiting=[f.to_text() for f in where["faults"].pending])
            return ev.NO_MORE_BATCHES
        return None

    def drained(self, progress: dict, *, driver, faults, producer_done: bool, restart_pending: bool,
                bootstrap: str, on_cluster: bool) -> bool:
        """Whether the run has drained (see the module docstring)."""
        if not producer_done or faults.busy or restart_pending:
            return False
        return self.passed_everything(progress, driver=driver, bootstrap=bootstrap, on_cluster=on_cluster)

    def batchless_s(self, progress: dict, *, driver, faults, producer_done: bool, restart_pending: bool,
                    bootstrap: str, on_cluster: bool) -> float | None:
        """Seconds without a batch start when only batch- or ISR-triggered faults are left and none can come, else
        None."""
        if ((not faults.pending and not faults.awaiting) or faults.deferred or faults.broker_restart_at is not None
                or faults.node_restarts or any(f.batch is None and f.isr is None for f in faults.pending)
                or restart_pending
                or not producer_done):
            return None
        if driver.attempt not in self._started or any(a == driver.attempt for a, _ in self._open):
            return None
        idle = time.monotonic() - max(self._last_batch_at, driver.started_at)
        if idle < max(IDLE_END_S, 5 * self.config.batch_interval_s):
            return None
        if not self.passed_everything(progress, driver=driver, bootstrap=bootstrap, on_cluster=on_cluster):
            return None
        return idle

    def passed_everything(self, progress: dict, *, driver, bootstrap: str, on_cluster: bool) -> bool:
        """Whether the live, settled driver is past the topic's end offsets and every acknowledged offset."""
        cfg = self.config
        self.end_offsets = kafka_tools.end_offsets(bootstrap, cfg.topic, cfg.partitions)
        positions = progress["positions"]
        # The high watermark can lag the last write for a moment, so the ledger's
        # acknowledged offsets must be passed too before a run counts as drained.
        past_acked = all(positions.get(p, 0) > last
                         for p, last in max_acked_offsets(self.run_dir / LEDGER_FILE).items())
        # After a restart, the progress on file may be the dead driver's: the new one may still have
        # recovered batches to run. It must report progress itself first; one with nothing to redo
        # reports nothing, so after RESTART_SETTLE_S the file's progress is taken as it stands.
        settled = (driver.attempt == 1 or progress.get("attempt") == driver.attempt
                   or time.monotonic() - driver.started_at > RESTART_SETTLE_S)
        at_end = all(positions.get(p, 0) >= end for p, end in self.end_offsets.items())
        if at_end and not past_acked and on_cluster:
            # On a cluster an unclean election truncates acknowledged writes away: their offsets are
            # never reached. The high watermark's lag behind a write lasts one follower fetch (0.5 s),
            # so a driver at the end offsets for TRUNCATED_SETTLE_S has read all there is.
            state = (tuple(sorted(positions.items())), tuple(sorted(self.end_offsets.items())))
            if state != self._at_end[0]:
                self._at_end = (state, time.monotonic())
            past_acked = time.monotonic() - self._at_end[1] >= TRUNCATED_SETTLE_S
        return driver.alive() and settled and past_acked and at_end
