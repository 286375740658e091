"""The receiver driver's clean stop: every record handed to the receiver written out, without Spark's graceful wait.

Protocol
--------
A clean stop (``SIGTERM`` from the supervisor: the run has drained, its
deadline came or the user stopped it) must not drop a record the feeder
handed over: a receiver's progress is the offsets committed for records
allocated to batches, so at ``drained`` the last of those batches may still
have their output to write (a window-count run's last running counts).

1. :meth:`lab.pipelines.receiver_feed.Feeder.finish` closes the receiver's
   connection and waits until every line handed over has been allocated to
   a submitted batch (the feeder counts them from ``onBatchSubmitted``).
2. :meth:`BatchTimes.wait_done` then waits until the newest batch submitted
   with records has completed, and a batch timed after the moment step 1
   ended as well. Spark allocates batch ``T`` at wall-clock time ``T`` or
   later, so that batch holds every block reported before it. Where the
   feeder's counts are not exact (an unreliable receiver's, ``--ack auto``, or
   a connection that did not close gracefully: ``Feeder.finished_exact``), a
   line may still be in the receiver's block buffer at that moment, so the
   batch must be timed :data:`PUSH_MARGIN_MS` later: the buffer becomes a block
   every block interval (:data:`lab.pipelines.receiver_conf.BLOCK_INTERVAL_MS`).
   Batches complete in order
   (one streaming job at a time, ``spark.streaming.concurrentJobs`` 1), and a
   batch completes only once its output has been written.
3. Only then does the streaming context stop without waiting
   (``stopGraceFully=False``): nothing handed over is left in a block, a
   batch or a job.

Both waits share :data:`FINISH_WAIT_S`. When it runs out, the stop is Spark's
graceful one, as before: the receiver is stopped, every block it stored is
given a batch, and those batches run for up to ``gracefulStopTimeout``; the
whole stop stays within the supervisor's grace (``STOP_GRACE_S``, 20 s) as it
did. The graceful stop waits for the generator's next tick and polls
(measured: ``StreamingContext.stop`` 1.0-1.5 s graceful, 0.2-0.4 s after the
waits above, local[2], 0.5 s batches).
"""

from __future__ import annotations

import threading
import time

from lab import events as ev
from lab.pipelines.receiver_conf import BLOCK_INTERVAL_MS

#: Seconds a clean stop waits, in all, for the receiver to store what it was handed and for its batches.
FINISH_WAIT_S = 8.0
#: A batch timed this long after the feeder finished holds every line the receiver had read by then: one
#: block interval for its buffer to become a block, and 100 ms for the block's report to reach the driver.
PUSH_MARGIN_MS = BLOCK_INTERVAL_MS + 100


class BatchTimes:
    """The newest batch time submitted with records and the newest completed, as the driver's listener reports them.

    Thread-safe: the listener bus calls :meth:`submitted` and :meth:`completed`,
    the driver's main thread :meth:`wait_done`.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._submitted = -1
        self._completed = -1

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

    def wait_done(self, after_ms: int, timeout_s: float) -> bool:
        """Wait until every batch submitted with records so far, and one timed after ``after_ms``, has completed.

        Returns whether they did within ``timeout_s``.
        """
        with self._cond:
            target = self._submitted
            return self._cond.wait_for(lambda: self._completed >= target and self._completed > after_ms, timeout_s)


def stop(ssc, feeder, times: BatchTimes, events=None, quick_stop: bool = True) -> bool:
    """Stop the streaming context and its SparkContext cleanly (see the protocol); whether it stopped without waiting.

    Delivery guarantee: the quick path stops only once every line the feeder
    handed over, and Spark stored, has been written to the sink; the graceful
    one runs what the receiver stored for up to ``gracefulStopTimeout``.
    ``events``: the run's timeline, which gets a ``receiver-stop`` event.
    ``quick_stop``: ``LAB_QUICK_STOP`` (:mod:`lab.start_tuning`); off, the stop
    is always Spark's graceful one (after the feeder's finish), as it was.
    """
    t0 = time.monotonic()
    finished = feeder.finish(FINISH_WAIT_S)
    left = FINISH_WAIT_S - (time.monotonic() - t0)
    margin = 0 if feeder.finished_exact else PUSH_MARGIN_MS
    quick = quick_stop and finished and left > 0 and times.wait_done(int(time.time() * 1000) + margin, left)
    ssc.stop(stopSparkContext=True, stopGraceFully=not quick)
    if events is not None:
        events.write(ev.RECEIVER_STOP, quick=quick, stop_s=round(time.monotonic() - t0, 3))
    return quick
