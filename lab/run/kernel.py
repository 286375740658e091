"""The brokers a notebook's kernel starts for its runs, and stops when it exits.

Control-process code: a broker started here is a child of the kernel (it dies
with it), or a detached cluster recorded in its runs directory; a broker
someone else started for the runs directory is used as it is and never stopped
from here.
"""

from __future__ import annotations

from pathlib import Path

from lab.config import make_config

#: The brokers this kernel started: runs directory -> its :class:`lab.broker.embedded.BrokerInfo`.
_started: dict = {}


def start_broker():
    """Start an embedded broker for this notebook; runs reuse it and it stays up between them.

    It dies with the kernel (and :func:`stop_broker` ends it earlier), so a
    notebook can look into Kafka after a run, e.g. at a consumer group's offsets.
    A broker already running for the runs directory (``lab broker start``, a
    workshop's, a test session's) is used as it is, and never stopped from here.
    """
    from lab.broker import shared as shared_broker

    runs = Path(make_config().runs_dir)
    return shared_broker.load_running(runs) or _start(runs)


def start_cluster() -> Path:
    """Start the lab's three-broker cluster for this notebook; return the runs directory its runs use.

    A cluster ``lab broker start --nodes 3`` left running for the runs directory
    is used as it is (never stopped from here), and that directory is returned.
    Otherwise the cluster gets a runs directory of its own, ``<runs>/cluster``,
    so a single broker another notebook started keeps serving ``<runs>``. Pass
    the returned path as ``runs_dir``, with ``nodes=3``, to :func:`config`.

    The cluster is started as ``lab broker start --nodes 3`` starts it (detached):
    a broker a ``leader-crash`` restarts must outlive the run that restarted it.
    It is stopped when the kernel exits (:func:`stop_broker` stops it earlier);
    after a kernel killed with ``kill -9``, the next kernel's call finds it and
    reuses it (and stops it at its exit); ``LAB_RUNS_DIR=<runs>/cluster lab broker stop``
    ends it too.
    Measured on 2 cores: up in about 8 s, about 0.9 GB of memory in all.

    Raises
    ------
    lab.errors.LabError
        When ``<runs>/cluster`` records a broker that is not a three-node cluster.
    """
    import atexit

    from lab.broker import shared as shared_broker

    runs = Path(make_config().runs_dir)
    running = shared_broker.load_running(runs)
    if running and running.node_count == 3:
        return runs
    own = runs / "cluster"
    shared_broker.start_detached(own, nodes=3)  # an already running one is checked (3 nodes) and reused
    if not _started:
        atexit.register(stop_broker)
    _started[own] = None  # detached: stopped through its record, which a node restart keeps current
    return own


def _start(runs: Path):
    """Start an embedded broker as a child of the kernel, recorded for ``runs``."""
    import atexit

    from lab.broker import embedded as broker, shared as shared_broker

    info = broker.start_embedded(runs / "broker-logs")  # a child of the kernel: gone when the kernel is
    shared_broker.save_state(runs, info)
    if not _started:
        atexit.register(stop_broker)
    _started[runs] = info
    return info


def stop_broker() -> None:
    """Stop every broker :func:`start_broker` or :func:`start_cluster` started in this kernel (nothing if none)."""
    from lab.broker import embedded as broker, shared as shared_broker

    while _started:
        runs, info = _started.popitem()
        if info is None:
            shared_broker.stop_detached(runs)
            continue
        running = shared_broker.load_running(runs)
        # still the record of ours (a broker-crash may renew the JVM)
        if running and running.proxy_pid == info.proxy_pid:
            shared_broker.state_file(runs).unlink(missing_ok=True)
            info = running
        broker.stop_embedded(info)
