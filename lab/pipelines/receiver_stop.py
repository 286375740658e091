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
   with records has completed, and a batch whose time is after the moment
   step 1 ended as well: Spark allocates batch ``T`` at wall-clock time ``T``
   or later, so that batch holds every block reported before (a receiver that
   died just before the stop may have reported blocks no batch has yet).
   Batches complete in order (one streaming job at a time,
   ``spark.streaming.concurrentJobs`` 1), and a batch completes only once its
   output has been written.
3. Only then does the streaming context stop without waiting
   (``stopGraceFully=False``): nothing handed over is left in a block, a
   batch or a job.

When either wait runs out (:data:`FINISH_WAIT_S`, :func:`done_wait_s`), the
stop is Spark's graceful one: the receiver is stopped, every block it
stored is given a batch, and those batches run. That one waits for the
generator's next tick and polls (measured: ``StreamingContext.stop`` 1.0-1.5 s
graceful, 0.2-0.4 s after the waits above, local[2], 0.5 s batches).
"""

from __future__ import annotations

import threading
import time

from lab import events as ev

#: Seconds a clean stop waits for the receiver to store what it was handed.
FINISH_WAIT_S = 8.0


def done_wait_s(batch_interval_s: float) -> float:
    """Seconds a clean stop waits for the submitted batches to complete: ten batch intervals, at least 10 s."""
    return max(10.0, 10 * batch_interval_s)


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


def stop(ssc, feeder, times: BatchTimes, batch_interval_s: float, events=None, quick_stop: bool = True) -> bool:
    """Stop the streaming context and its SparkContext cleanly (see the protocol); whether it stopped without waiting.

    Delivery guarantee: every line the feeder handed over that Spark stored
    is written to the sink before the context stops, by either path.
    ``events``: the run's timeline, which gets a ``receiver-stop`` event.
    ``quick_stop``: ``LAB_QUICK_STOP`` (:mod:`lab.start_tuning`); off, the stop
    is always Spark's graceful one (after the feeder's finish), as it was.
    """
    t0 = time.monotonic()
    finished = feeder.finish(FINISH_WAIT_S)
    quick = quick_stop and finished and times.wait_done(int(time.time() * 1000), done_wait_s(batch_interval_s))
    ssc.stop(stopSparkContext=True, stopGraceFully=not quick)
    if events is not None:
        events.write(ev.RECEIVER_STOP, quick=quick, stop_s=round(time.monotonic() - t0, 3))
    return quick
