"""The brokers a one-at-a-time matrix shares among its rows: one broker, and one three-broker cluster.

Protocol
--------
Scenarios run one at a time (``jobs=1``) share an embedded broker, started
before the first row and stopped after the last (each run keeps a topic and a
consumer group of its own): the matrix pays one broker start, not one per
row (Apache Kafka: 3-6 s each, measured). The rows that run on the
three-broker cluster (``nodes: 3``) share one cluster the same way (about 7 s
to start, measured: 6.6-7.8 s between two cluster rows when each started its
own). Its replication settings are the run topic's own
(:func:`lab.broker.cluster.broker_properties`), so rows with different
settings can share it.

1. :func:`shared_brokers` starts the broker, and the cluster when a row
   needs it, each on a thread of its own, beside the first rows (the first
   row's kernel and driver start while the broker does; the cluster's start,
   about 7 s, is off the matrix's critical path; started instead three rows
   before the first cluster row, it slowed the row beside it by 5 s, measured).
   When the cluster's rows run on a lane of their own (:mod:`lab.matrix.lane`),
   the cluster starts when that lane does (:meth:`SharedBrokers.start_cluster`).
   Each thread stays until its broker is stopped, since a child's parent-death
   signal follows the thread that forked it, so both die with the matrix (the
   cluster is only *recorded* as detached, step 2). A row that needs one waits
   for its start.
2. Before a row's run starts, :meth:`SharedBrokers.record` writes the broker
   it may use to the row's runs directory (``lab-runs/broker.json``), the way
   ``lab broker start`` leaves one; the run finds it there and leaves it running.
   The cluster is recorded as detached, so a row whose leader-crash fault
   restarts a broker starts it detached (it must outlive the row's kernel) and
   records the new JVM in that same file (``Run._record_broker``).
3. Before a cluster row's run, and before the final stop,
   :meth:`SharedBrokers.follow` reads back the files of the cluster rows before
   it: the next row, and the stop, see the restarted JVM. A row started
   ahead (:mod:`lab.matrix.rows`) is recorded only when its turn comes.
4. :meth:`SharedBrokers.stop` ends both by their recorded PIDs, whatever happened:
   once the last row's run is over (its notebook's plots need no broker) and no
   cluster row runs on its lane any more, and again when the matrix ends.

A row gets neither when it kills its broker (``broker-crash``): it starts
its own. So does every row when several run at once
(their proxy faults would hit each other), when a broker is already running
(``lab broker start``) or when ``LAB_KAFKA_BOOTSTRAP`` is set. A row whose
recorded cluster is no longer whole (a broker killed and not restarted)
starts one of its own too (:func:`lab.broker.shared.load_running` refuses it).

No delivery effect: each run has a topic, a consumer group and a transactional
id of its own, created by the run.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path


def row_nodes(params: dict) -> int:
    """The broker count a row's run will use.

    Read from the run's own configuration (:func:`lab.config.make_config`: the
    row's parameters, else ``LAB_BROKER_NODES``), which the grid's loader has
    already validated.
    """
    from lab.config import make_config

    return make_config(**params).cluster.nodes


class _BrokerStart(threading.Thread):
    """Starts a broker (``nodes`` 1) or the cluster beside the first rows, on a thread that stays until it is stopped.

    A child's parent-death signal follows the thread that forked it, so the
    thread that starts the brokers' processes must outlive them: it waits for
    :attr:`release` once they are up (or failed to start).
    """

    def __init__(self, log_dir: Path, nodes: int) -> None:
        super().__init__(name=f"lab-matrix-broker-{nodes}", daemon=True)
        self.log_dir, self.nodes = log_dir, nodes
        self.ready, self.release = threading.Event(), threading.Event()
        self.info = None
        self.error: BaseException | None = None

    def run(self) -> None:
        from lab.broker import embedded as broker

        try:
            info = broker.start_embedded(self.log_dir, nodes=self.nodes)
            # The cluster is recorded as detached: a broker a row restarts must outlive the row's kernel (see the
            # protocol). The single broker is killed by no row that shares it.
            self.info = replace(info, detached=True) if self.nodes > 1 else info
        except BaseException as e:  # cluster rows then start their own; the broker's error stops the matrix
            self.error = e
        finally:
            self.ready.set()
        self.release.wait()


@dataclass
class SharedBrokers:
    """The matrix's broker (``single``) and cluster (``cluster``), either None when not shared."""

    single: object | None = None
    cluster: object | None = None
    #: Runs directories the cluster was recorded in, in the order the rows run.
    cluster_rows: list = field(default_factory=list)
    #: The cluster's start, while it may still be under way (see :class:`_BrokerStart`).
    starting: _BrokerStart | None = None
    #: The broker's start, while it may still be under way.
    starting_single: _BrokerStart | None = None
    #: ``(log directory, nodes)`` of the cluster the rows need, started by :meth:`start_cluster`.
    cluster_plan: tuple | None = None

    def start_cluster(self, wait: bool = False) -> None:
        """Start the cluster the rows need on a thread of its own, unless started already (or none is needed).

        ``wait``: return once it is up, or failed to start (its rows then start their own).
        """
        if self.starting is None and self.cluster is None and self.cluster_plan is not None:
            start = _BrokerStart(*self.cluster_plan)
            start.start()
            self.starting = start  # kept only once its thread runs: stop() waits for what a start leaves
        if wait:
            self._cluster_up()

    def _cluster_up(self) -> None:
        """Wait for the cluster's start, if one is under way; a start that failed leaves no cluster to share."""
        if self.starting is not None and self.cluster is None and self.starting.error is None:
            self.starting.ready.wait()
            self.cluster = self.starting.info

    def single_up(self) -> None:
        """Wait for the broker's start, if one is under way.

        Raises
        ------
        LabError
            When it could not start (the matrix stops; what was started is stopped on the way out).
        """
        from lab.errors import LabError

        start = self._single_started()
        if start is not None and start.error is not None:
            if isinstance(start.error, LabError):
                raise start.error
            raise LabError(f"the matrix's broker did not start: {start.error}") from start.error

    def _single_started(self) -> _BrokerStart | None:
        """Wait for the broker's start, if one is under way, and take what it left; the start, or None."""
        start = self.starting_single
        if start is None or self.single is not None:
            return None
        start.ready.wait()
        self.single = start.info
        return start

    def for_row(self, params: dict):
        """The :class:`lab.broker.embedded.BrokerInfo` a row with ``params`` may use, or None (it starts its own)."""
        if "broker-crash" in str(params.get("faults", "")):
            return None
        nodes = row_nodes(params)
        if nodes > 1:
            self._cluster_up()
        else:
            self.single_up()
        return self.cluster if nodes > 1 else self.single

    def record(self, runs_dir: Path, params: dict) -> None:
        """Write the broker a row may use into its runs directory, or remove an older matrix's record there."""
        from lab.broker import shared as shared_broker

        shared = self.for_row(params)
        if shared is not None and shared is self.cluster:
            self.follow()
            shared = self.cluster
        if shared is None:
            shared_broker.state_file(runs_dir).unlink(missing_ok=True)  # an earlier matrix's names processes long gone
            return
        shared_broker.save_state(runs_dir, shared)
        if shared is self.cluster and Path(runs_dir) not in self.cluster_rows:
            self.cluster_rows.append(Path(runs_dir))

    def follow(self) -> None:
        """Take the cluster as the last row's run that changed it left it (a broker it restarted is a new JVM).

        A row's record names live processes only once its run is over or
        untouched: one whose broker was killed and not yet started again is
        skipped (:func:`lab.broker.shared.load_running` refuses it).
        """
        from lab.broker import shared as shared_broker

        for runs_dir in self.cluster_rows:
            left = shared_broker.load_running(runs_dir)
            if left is not None and left.nodes and left.controller_pid == self.cluster.controller_pid:
                self.cluster = left

    def stop(self) -> None:
        """Stop what was started, by the PIDs last recorded (a broker already gone is skipped)."""
        from lab.broker import embedded as broker

        self._cluster_up()
        if self.cluster is not None:
            self.follow()
        self._single_started()
        for info in (self.cluster, self.single):
            if info is not None:
                # Under the matrix's directory; a later start there (a resumed matrix) clears it first.
                broker.stop_embedded(info, discard_data=True)
        for start in (self.starting, self.starting_single):
            if start is not None:
                start.release.set()
        # Stopped once: the matrix stops them as soon as the last row's run is over, and again on its way out.
        self.cluster = self.single = self.starting = self.starting_single = self.cluster_plan = None


@contextmanager
def shared_brokers(jobs: int, scenarios: list, log_root: Path, defer_cluster: bool = False):
    """The brokers the matrix's ``scenarios`` share (:class:`SharedBrokers`), or None when none may be shared.

    None when scenarios run at once (``jobs > 1``), when ``LAB_KAFKA_BOOTSTRAP``
    is set, or when ``lab broker start`` left one running (runs find it
    themselves). The broker, and the cluster when a scenario runs on one, start
    beside the first rows; a row that needs one waits for its start. Both are
    stopped when the block ends, whatever happened in it; a cluster that failed
    to start leaves its rows to start their own (each then says why it cannot).
    A broker that failed to start raises at the first row that needs it
    (:meth:`SharedBrokers.single_up`). ``defer_cluster``: the cluster starts only at
    :meth:`SharedBrokers.start_cluster` (its rows' lane, :mod:`lab.matrix.lane`, calls it).
    """
    from lab.broker import shared as shared_broker
    from lab.host.env import env_runs_dir

    if jobs > 1 or os.environ.get("LAB_KAFKA_BOOTSTRAP") or shared_broker.load_running(env_runs_dir()):
        yield None
        return
    shared = SharedBrokers()
    try:
        # Each kept only once its thread runs: stop() waits for what a start leaves.
        single = _BrokerStart(Path(log_root) / "matrix", 1)
        single.start()
        shared.starting_single = single
        clustered = [n for n in (row_nodes(s.params) for s in scenarios
                                 if "broker-crash" not in str(s.params.get("faults", ""))) if n > 1]
        if clustered:
            shared.cluster_plan = (Path(log_root) / "matrix-cluster", clustered[0])
            if not defer_cluster:
                shared.start_cluster()
        yield shared
    finally:
        shared.stop()
