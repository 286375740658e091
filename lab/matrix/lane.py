"""The matrix's cluster rows, run beside its other rows: a second lane on the three-broker cluster.

Protocol (one scenario at a time, ``lab matrix --jobs 1``, with the shared
brokers of :mod:`lab.matrix.brokers`):

1. :func:`split` takes out of the rows to run those on the shared cluster
   (``nodes: 3``, no ``broker-crash``): the *lane*. The others stay in the
   relay (:func:`lab.matrix.runner._relay`), one at a time on the shared broker.
2. The lane waits until the relay has given its turn to the first row after
   its last timing-sensitive row (:data:`TIMING_SENSITIVE`: a receiver's loss
   depends on what was in its memory at the crash, and a busier machine
   changes it; measured with two rows at once, bench/README.md, Past experiments:
   "receiver, unreliable ack, WAL, driver-crash" lost nothing). Every row after
   it ends where a named point, a batch or a count says, whatever the load.
3. Then :class:`Lane` starts the cluster (:meth:`lab.matrix.brokers.SharedBrokers.start_cluster`:
   at the matrix's start, beside the broker's and the first row's, its five JVMs
   made that row 4 s slower, measured) and runs its rows one after another on a thread of its own
   (:func:`lab.matrix.runner.run_one`: no row started ahead), while the relay goes on.
   The main thread records each finished row (:meth:`Lane.done`), so the table
   and the progress bar have one writer.

No delivery effect, and no fault crosses lanes: a lane row's broker, proxies,
topic and faults (``follower-lag`` holds the cluster's replication proxies,
``leader-crash`` kills a cluster broker) are the cluster's, the relay's rows
use the other broker and its proxy. A lane row's kill is condition-triggered
(``leader-crash@isr=1``), so a slower machine moves it, not its outcome.
``LAB_CLUSTER_BESIDE=off`` runs the cluster rows in the relay, in grid order
(``bench/matrix.py --beside-pair`` measures the two).
"""

from __future__ import annotations

import os
import queue
import threading
import time

#: Pipelines whose outcome depends on the machine's pace (see the protocol, step 2).
TIMING_SENSITIVE = ("receiver",)


def beside(env=None) -> bool:
    """Whether the shared cluster's rows run beside the others (``LAB_CLUSTER_BESIDE``, default ``on``).

    Raises
    ------
    LabError
        A value that is not on or off, named with the two.
    """
    from lab.host.env import switch

    return switch(os.environ if env is None else env, "LAB_CLUSTER_BESIDE")


def split(todo: list, shared) -> tuple[list, list, int]:
    """``(relay rows, lane rows, index of the relay row whose turn starts the lane)`` (pure but for the config).

    Lane rows are those ``shared`` (:class:`lab.matrix.brokers.SharedBrokers`)
    would give the cluster; none without shared brokers. The index is that of
    the first relay row after the last :data:`TIMING_SENSITIVE` one (0 when
    there is none; the number of relay rows when the last relay row is one:
    the lane then starts once the relay is over).
    """
    from lab.config import make_config
    from lab.matrix.brokers import row_nodes

    if shared is None:
        return list(todo), [], 0
    lane = [s for s in todo if "broker-crash" not in str(s.params.get("faults", "")) and row_nodes(s.params) > 1]
    relay = [s for s in todo if s not in lane]
    sensitive = [i for i, s in enumerate(relay) if make_config(**s.params).pipeline in TIMING_SENSITIVE]
    return relay, lane, (sensitive[-1] + 1 if sensitive else 0)


class Lane:
    """Runs ``rows`` one after another with ``run`` (``run(s) -> results row``) once :meth:`go` is called.

    ``before()``, when given, is called first, on the lane's thread (the
    cluster's start, waited for: a row then starts right after its check of
    :meth:`stop`). Finished rows wait in a queue for the main thread
    (:meth:`done`). After :meth:`stop` no new row starts; the one running ends
    with its papermill.
    """

    def __init__(self, rows: list, run, before=None) -> None:
        self.rows, self.run, self.before = list(rows), run, before
        self._go, self._stop = threading.Event(), threading.Event()
        self._done: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="lab-matrix-lane", daemon=True)
        if self.rows:
            self._thread.start()

    def go(self) -> None:
        """Let the lane start (again harmless)."""
        self._go.set()

    def stop(self) -> None:
        """No further row starts (an interrupt); :meth:`go` so a lane still waiting ends."""
        self._stop.set()
        self._go.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def done(self) -> list[tuple]:
        """The ``(row, results row)`` pairs finished since the last call."""
        out = []
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def join(self, timeout: float | None = None) -> None:
        if self.rows:
            self._thread.join(timeout)

    def hand_over(self, record) -> None:
        """``record(row, results row)`` for each row finished since the last call (on the main thread).

        Raises
        ------
        BaseException
            What the lane's thread raised, once its finished rows are recorded: the matrix stops, as it
            does when a row of its own fails that way.
        """
        for done in self.done():
            record(*done)
        if self.error is not None:
            raise self.error

    def finish(self, record) -> None:
        """Let the lane go if it waits still, hand its rows over as they end, until none is left.

        Raises
        ------
        BaseException
            What the lane's thread raised (:meth:`hand_over` has recorded the rows before it).
        """
        self.go()
        while self.running:
            self.hand_over(record)
            time.sleep(0.1)
        self.hand_over(record)

    def abandon(self, stop_rows) -> None:
        """After an interrupt, once ``stop_rows()`` has ended the rows' papermills: end a row started meanwhile too."""
        self.stop()
        if self.rows:
            self.join(2.0)
            stop_rows()
            self.join(30.0)
            stop_rows()  # still one: it started after the call before

    def _work(self) -> None:
        self._go.wait()
        try:
            if self.before is not None and not self._stop.is_set():
                self.before()
            for s in self.rows:
                if self._stop.is_set():
                    return
                self._done.put((s, self.run(s)))
        except BaseException as e:  # noqa: BLE001 - raised in the main thread (lab.matrix.runner._relay)
            self.error = e
