"""The receiver driver's clean stop: every record handed to the receiver written out, without Spark's graceful wait.

Protocol
--------
A clean stop (``SIGTERM`` from the supervisor: the run has drained, its
deadline came or the user stopped it) must not drop a record the feeder
handed over: a receiver's progress is the offsets committed for records
allocated to batches, so at ``drained`` the last of those batches may still
have their output to write (a window-count run's last running counts).

1. :meth:`lab.pipelines.receiver.feed.Feeder.finish` closes the receiver's
   connection and waits until every line handed over has been allocated to
   a submitted batch (the feeder counts them from ``onBatchSubmitted``).
2. :meth:`BatchTimes.wait_done` then waits until the newest batch submitted
   with records has completed. Where the feeder's counts are exact (a reliable
   receiver's, its connection closed gracefully: ``Feeder.finished_exact``),
   every line handed over is in a batch submitted with records (the listener
   tells :class:`BatchTimes` of a batch before the feeder counts it), and so
   is every record of a driver recovered from the checkpoint: its pending
   batches are submitted again with no record count (Spark restores their
   RDDs, it does not compute them), so a recovered driver also waits for every
   batch through the newest one its earlier attempts saw submitted, and
   :data:`RECOVERED_SLACK_BATCHES` more (one allocated in the killed driver's
   last milliseconds, whose event never reached the timeline), as
   :meth:`BatchTimes.hold_through` says. The batches of its down time, empty,
   are not waited for. Where they are not (an unreliable receiver's, ``--ack auto``, or a
   connection that did not close gracefully), a line may still be in the
   receiver's block buffer at that moment, so a batch timed
   :data:`PUSH_MARGIN_MS` after the moment step 1 ended must have completed as
   well: the buffer becomes a block every block interval
   (:data:`lab.pipelines.receiver.conf.BLOCK_INTERVAL_MS`), and Spark allocates
   batch ``T`` at wall-clock time ``T`` or later, so that batch holds every
   block reported before it. (Asked of exact counts too, that batch never
   came within the wait when the context ran behind the clock: a driver
   recovered from the write-ahead log on a loaded machine, its batches 20 s
   late, measured.) Batches complete in order
   (one streaming job at a time, ``spark.streaming.concurrentJobs`` 1), and a
   batch completes only once its output has been written.
3. Only then does the streaming context stop without waiting
   (``stopGraceFully=False``): nothing handed over is left in a block, a
   batch or a job.

Both waits share :data:`FINISH_WAIT_S`, and the second goes on while batches
complete: each completion gives it :data:`FINISH_WAIT_S` again (measured: a
recovered driver on a loaded machine was still completing its pending batches,
4.5 s each, when the shared wait ran out; Spark's graceful stop then ran its
empty down-time batches past the supervisor's grace and it was killed). When
it runs out, the stop is Spark's
graceful one, as before: the receiver is stopped, every block it stored is
given a batch, and those batches run for up to ``gracefulStopTimeout`` (10 s
at 0.5 s batches), and then every job already queued (Spark's job executor
waits for them without a limit). The supervisor's grace (``STOP_GRACE_S``,
30 s) is renewed by each event the driver writes, so a stop whose batches keep
completing is not killed (up to ``STOP_LIMIT_S``, 120 s). The graceful stop waits for the generator's next tick and
polls (measured: ``StreamingContext.stop`` 1.0-1.5 s graceful, 0.2-0.4 s after the
waits above, local[2], 0.5 s batches).
"""

from __future__ import annotations

import threading
import time

from lab import events as ev
from lab.pipelines.receiver.conf import BLOCK_INTERVAL_MS

#: Seconds a clean stop waits, in all, for the receiver to store what it was handed and for its batches. A run
#: drained while its batches were behind: 10.4 s from the stop to the last batch with records done (a window-count
#: run on a slower machine, 1.3-2.3 s a batch, measured), more than the 8 s this was.
FINISH_WAIT_S = 16.0
#: A batch timed this long after the feeder finished holds every line the receiver had read by then: one
#: block interval for its buffer to become a block, and 100 ms for the block's report to reach the driver.
PUSH_MARGIN_MS = BLOCK_INTERVAL_MS + 100
#: Batches after the newest an earlier attempt saw submitted that a recovered driver's stop waits for too.
RECOVERED_SLACK_BATCHES = 2


class BatchTimes:
    """The newest batch time submitted with records and the newest completed, as the driver's listener reports them.

    Thread-safe: the listener bus calls :meth:`submitted` and :meth:`completed`,
    the driver's main thread :meth:`wait_done`.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._submitted = -1
        self._completed = -1
        self._held = -1

    def hold_through(self, batch_ms: int) -> None:
        """A stop waits for batch ``batch_ms`` too, records or not (a recovered driver's pending batches)."""
        with self._cond:
            self._held = max(self._held, int(batch_ms))

    def submitted(self, batch_ms: int, records: int) -> None:
        """Batch ``batch_ms`` was submitted with ``records`` records (only batches with records are waited for)."""
        if records > 0:
            with self._cond:
                self._submitted = max(self._submitted, int(batch_ms))

    def completed(self, batch_ms: int) -> None:
        """Batch ``batch_ms`` completed: its output was written."""
        with self._cond:
            self._completed = max(self._completed, int(batch_ms))
            self._cond.notify_all()

    def wait_done(self, after_ms: int | None, timeout_s: float, renew_s: float = 0.0) -> bool:
        """Wait until every batch submitted with records so far, and one timed after ``after_ms``, has completed.

        ``after_ms`` None: the batches submitted with records, and those held (:meth:`hold_through`), only.
        Returns whether they did within ``timeout_s``; each batch completed meanwhile leaves at least ``renew_s``
        more (a context running its batches behind the clock is progressing, not stuck).
        """
        with self._cond:
            target = max(self._submitted, self._held)

            def done() -> bool:
                return self._completed >= target and (after_ms is None or self._completed > after_ms)

            deadline = time.monotonic() + timeout_s
            seen = self._completed
            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
                if self._completed > seen:
                    seen = self._completed
                    deadline = max(deadline, time.monotonic() + renew_s)
            return True


def stop(ssc, feeder, times: BatchTimes, events=None, quick_stop: bool = True) -> bool:
    """Stop the streaming context and its SparkContext cleanly (see the protocol); whether it stopped without waiting.

    Delivery guarantee: the quick path stops only once every line the feeder
    handed over, and Spark stored, has been written to the sink; the graceful
    one runs what the receiver stored for up to ``gracefulStopTimeout``.
    ``events``: the run's timeline, which gets a ``receiver-stop`` event.
    ``quick_stop``: ``LAB_QUICK_STOP`` (:mod:`lab.host.start_tuning`); off, the stop
    is always Spark's graceful one (after the feeder's finish), as it was.
    """
    t0 = time.monotonic()
    finished = feeder.finish(FINISH_WAIT_S)
    left = FINISH_WAIT_S - (time.monotonic() - t0)
    after = None if feeder.finished_exact else int(time.time() * 1000) + PUSH_MARGIN_MS
    quick = quick_stop and finished and left > 0 and times.wait_done(after, left, renew_s=FINISH_WAIT_S)
    ssc.stop(stopSparkContext=True, stopGraceFully=not quick)
    if events is not None:
        events.write(ev.RECEIVER_STOP, quick=quick, stop_s=round(time.monotonic() - t0, 3))
    return quick
