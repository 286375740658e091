"""The broker: the embedded Apache Kafka behind the lab's proxy, or any Kafka via ``LAB_KAFKA_BOOTSTRAP``.

The embedded broker is Apache Kafka 4.4.0, one KRaft node (broker and controller
in one JVM), run from the pinned jars of :mod:`lab.host.jars` (set ``kafka-broker``,
fetched once into the cache) with the JVM of :func:`lab.host.java.find_java`. Its
data lives in ``<log_dir>/kafka-data`` and survives a restart of the JVM
(:func:`restart_embedded_broker`), so a broker crash can be a real fault. With
``nodes=3`` it is a three-broker cluster instead (:mod:`lab.broker.cluster`).

Clients never talk to the broker directly: it advertises the proxy's
address (:mod:`lab.broker.proxy`), so faults can cut connections or drop responses
while the broker keeps running.

This module starts, restarts and stops a broker's processes; which broker a
run uses, and the one ``lab broker start`` leaves running for a runs
directory, are :mod:`lab.broker.shared`'s.
"""

from __future__ import annotations

import os
import signal
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from lab.broker import (
    apache as kafka_broker,
    archive as broker_archive,
    cluster as kafka_cluster,
    proxy_start,
)
from lab.errors import LabError, choices_error
from lab.host import processes

#: ``BrokerInfo.product`` of the embedded broker.
PRODUCT = "apache-kafka"


@dataclass(frozen=True)
class BrokerInfo:
    """Where the broker is and which processes the lab started for it.

    Attributes
    ----------
    bootstrap : str
        ``host:port`` clients use (the proxy, for the embedded broker).
    external : bool
        True for ``LAB_KAFKA_BOOTSTRAP``; the lab then starts and kills nothing.
    broker_port, proxy_port, control_port : int or None
    broker_pid, proxy_pid : int or None
    log_dir : str or None
    product : str or None
        ``"apache-kafka"`` for the embedded broker; None for an external Kafka.
    version : str or None
        The embedded broker's version, e.g. ``"4.4.0"``.
    detached : bool
        Started to outlive its starter (``lab broker start``); a restart keeps that.
    control_host : str
        Host of ``control_port``: 127.0.0.1 for the proxy the lab starts; for an
        external Kafka, the host of ``LAB_KAFKA_PROXY`` (its ``control_port`` is
        None without one, so proxy faults are refused).
    nodes : tuple of NodeInfo
        The brokers of a cluster (:mod:`lab.broker.cluster`), empty for one node.
        ``bootstrap`` then lists every broker's client proxy; ``broker_pid``,
        ``proxy_pid`` and ``control_port`` are broker 1's.
    controller_pid, controller_port : int or None
        The cluster's controller-only JVM.
    """

    bootstrap: str
    external: bool = False
    broker_port: int | None = None
    proxy_port: int | None = None
    control_port: int | None = None
    broker_pid: int | None = None
    proxy_pid: int | None = None
    log_dir: str | None = None
    product: str | None = PRODUCT
    version: str | None = None
    detached: bool = False
    control_host: str = "127.0.0.1"
    nodes: tuple = ()
    controller_pid: int | None = None
    controller_port: int | None = None

    @property
    def has_proxy(self) -> bool:
        return self.control_port is not None

    @property
    def control_ports(self) -> tuple[int, ...]:
        """The client proxies' control ports: every broker's in a cluster (a client fault hits them all)."""
        if self.nodes:
            return tuple(n.control_port for n in self.nodes)
        return () if self.control_port is None else (self.control_port,)

    @property
    def node_count(self) -> int:
        return len(self.nodes) or 1

    def node(self, node_id: int) -> kafka_cluster.NodeInfo:
        return next(n for n in self.nodes if n.node == node_id)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> BrokerInfo:
        """Read a ``to_dict()`` of this or an older lab (missing fields take their defaults; unknown ones are
        ignored)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["nodes"] = tuple(kafka_cluster.NodeInfo(**n) for n in values.get("nodes") or ())
        return cls(**values)


def start_embedded(log_dir: Path, port: int | None = None, detach: bool = False, nodes: int = 1,
                   archive_at_exit: Path | None = None) -> BrokerInfo:
    """Start the proxy and the embedded Apache Kafka broker on 127.0.0.1, each binding its own ports.

    Order, so that no port is ever chosen by one process and bound by another:

    1. The proxy binds ``port`` (or 0) for clients and 0 for control, and
       reports both in a ready file (``proxy-ready-<random>.json``, removed once
       read). It refuses clients until step 3.
    2. The broker binds port 0 and advertises the proxy's port: Kafka binds its
       three listeners to port 0 (:func:`kafka_broker.properties`); its client port
       is read from its log, once ``Kafka Server started`` is there, and checked
       against the OS.
    3. The proxy is told that port as its upstream.

    Parameters
    ----------
    log_dir : Path
        ``kafka.log`` and ``proxy.log`` go there (appended), and the
        proxy's ready file. Kafka also keeps ``server.properties`` and its data
        (``kafka-data``, formatted on first use) there; this start removes the data an
        earlier broker left and keeps its log as ``kafka.log.1`` (:func:`lab.broker.apache.clear_stale`;
        a restart on the data, after a crash, does not come here).
    port : int, optional
        Port clients use (the proxy's). The OS chooses one when omitted.
    detach : bool
        Keep the processes alive after this Python process exits (``lab broker start``).
    nodes : int
        1, or 3 for the three-broker cluster (below).
    archive_at_exit : Path, optional
        One node only: the JVM writes a new class archive there as it exits, and maps
        none (the archive's training, :func:`lab.broker.archive_train.train`).

    Raises
    ------
    LabError
        When ``port`` is taken, the jars or Java are missing, or a process fails to
        start (the proxy within 10 s, Kafka within :data:`lab.broker.apache.KAFKA_READY_S`;
        its log is named). Nothing started is left running.

    Kafka needs the jar set ``kafka-broker`` (fetched first when not cached:
    :func:`lab.host.jars.ensure`) and Java 17 or 21. Its JVMs map the broker's class
    archive, built first when missing (:mod:`lab.broker.archive`, a few seconds once
    per Java and Kafka version).

    With ``nodes=3`` the broker is Apache Kafka's three-broker cluster of
    :mod:`lab.broker.cluster` instead (``port`` cannot be chosen then: there is one client proxy per broker).
    """
    if archive_at_exit is not None and nodes != 1:
        raise LabError(f"a class archive is trained on one Apache Kafka node, not on {nodes} nodes")
    if port is not None:
        _refuse_taken_port(port)
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    # A first start: what an earlier broker left only slows it (kafka_broker.clear_stale).
    kafka_broker.clear_stale([log_dir] if nodes == 1 else [
        kafka_cluster.controller_dir(log_dir), *(kafka_cluster.node_dir(log_dir, n) for n in range(1, nodes + 1))])
    if nodes != 1:
        return _start_cluster(log_dir, port, detach, nodes)
    # Before starting anything: a missing jar or JVM leaves nothing to clean up.
    java, classpath, version = kafka_broker.prerequisites()
    if archive_at_exit is None:
        broker_archive.ensure()
    proxy, proxy_port, control_port = proxy_start.start(log_dir, port, detach)
    broker = None
    try:
        broker, broker_port = kafka_broker.start(java, classpath, log_dir, proxy_port, detach, archive_at_exit)
        proxy_start.set_upstream(control_port, broker_port, log_dir / "proxy.log")
    except BaseException:
        for p in (proxy, broker):
            if p is not None:
                processes.stop_process(p, 2)
        raise
    return BrokerInfo(
        bootstrap=f"127.0.0.1:{proxy_port}", broker_port=broker_port, proxy_port=proxy_port,
        control_port=control_port, broker_pid=broker.pid, proxy_pid=proxy.pid, log_dir=str(log_dir),
        product=PRODUCT, version=version, detached=detach,
    )


def _refuse_taken_port(port: int) -> None:
    """Raise :class:`LabError` at once when ``port`` on 127.0.0.1 is taken now.

    Only an early answer: before it, a start with no jars cached fetched 44 MB of them
    (3-10 s) to then fail on the port. The proxy's own bind stays the check that holds.
    """
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server: TIME_WAIT is no refusal
        try:
            s.bind(("127.0.0.1", int(port)))
        except OSError as e:
            raise proxy_start.port_error(port, e.strerror or str(e)) from None


def check_nodes(nodes, port: int | None = None) -> int:
    """``nodes`` as an int from :data:`lab.broker.cluster.NODE_COUNTS`.

    Raises
    ------
    LabError
        Naming the bad value and the valid choices; a cluster has no single port.
    """
    if isinstance(nodes, bool) or str(nodes).strip() not in {str(n) for n in kafka_cluster.NODE_COUNTS}:
        raise choices_error("number of broker nodes", nodes, tuple(map(str, kafka_cluster.NODE_COUNTS)))
    nodes = int(str(nodes).strip())
    if nodes > 1 and port is not None:
        raise LabError(f"--port names the one client port of a single broker; a {nodes}-node cluster has one per "
                       "broker, chosen by the OS: leave --port out")
    return nodes


def _start_cluster(log_dir: Path, port: int | None, detach: bool, nodes: int) -> BrokerInfo:
    check_nodes(nodes, port)
    _, _, version = kafka_broker.prerequisites()
    broker_archive.ensure()
    controller, infos = kafka_cluster.start(log_dir, nodes, detach)
    first = infos[0]
    return BrokerInfo(
        bootstrap=",".join(f"127.0.0.1:{n.proxy_port}" for n in infos), broker_port=first.broker_port,
        proxy_port=first.proxy_port, control_port=first.control_port, broker_pid=first.broker_pid,
        proxy_pid=first.proxy_pid, log_dir=str(log_dir), product=PRODUCT, version=version,
        detached=detach, nodes=tuple(infos), controller_pid=controller["pid"], controller_port=controller["port"],
    )


def restart_cluster_node(info: BrokerInfo, node_id: int) -> BrokerInfo:
    """Start broker ``node_id`` of ``info``'s cluster again on its data (its JVM was killed): the new info.

    Raises
    ------
    LabError
        When ``info`` is not a cluster, or the JVM is not ready in time (its log is named).
    """
    if not info.nodes:
        raise LabError("only a broker of a cluster (--nodes 3) is restarted by node; this broker has one node")
    old = info.node(node_id)
    _stop_broker_pid(old.broker_pid, kafka_broker.KAFKA_STOP_GRACE_S)
    new = kafka_cluster.restart_node(Path(info.log_dir), old, len(info.nodes), info.controller_port, info.detached)
    nodes = tuple(new if n.node == node_id else n for n in info.nodes)
    first = nodes[0]
    return replace(info, nodes=nodes, broker_pid=first.broker_pid, broker_port=first.broker_port)


def restart_embedded_broker(info: BrokerInfo, detach: bool | None = None) -> BrokerInfo:
    """Start the broker JVM of ``info`` again on the same data, behind the same proxy.

    For a broker crash: kill the JVM (``info.broker_pid``), then call this. The
    proxy keeps its client port throughout, so clients reconnect to the same
    bootstrap and find the acknowledged records (acks=all on this one node means
    written to the OS: a killed JVM loses none of it). Steps:

    1. If the old JVM still runs, it is stopped as in :func:`stop_embedded`
       (by its PID; SIGTERM, SIGKILL after :data:`lab.broker.apache.KAFKA_STOP_GRACE_S`).
    2. A new JVM starts on ``<log_dir>/kafka-data`` (never formatted again),
       advertising the same proxy port, and binds new ports of its own.
    3. The proxy is told the new client port (connections opened meanwhile were refused
       or went to the dead port and were closed; clients retry).

    Parameters
    ----------
    info : BrokerInfo
        The embedded Apache Kafka broker (one node).
    detach : bool, optional
        Whether the new JVM outlives this Python process; default ``info.detached``.
        A detached broker's ``broker.json`` names the old PID: its caller must record
        the returned info (:func:`save_state`), or ``lab broker stop`` cannot find it.

    Returns
    -------
    BrokerInfo
        ``info`` with the new ``broker_pid`` and ``broker_port``.

    Raises
    ------
    LabError
        For an external Kafka; when the JVM is not ready in time (its log is named).
    """
    if info.nodes:
        raise LabError("a cluster's brokers restart one by one (restart_cluster_node); broker-crash applies to one "
                       "node")
    if info.external or not info.log_dir or not info.control_port:
        raise LabError("only the embedded Apache Kafka broker can be restarted on its data, not an external Kafka "
                       "(LAB_KAFKA_BOOTSTRAP); unset LAB_KAFKA_BOOTSTRAP to use the embedded one")
    detach = info.detached if detach is None else detach
    java, classpath, _ = kafka_broker.prerequisites()
    if info.broker_pid:  # still running: stopped; already killed: reaped (when it is our child)
        _stop_broker_pid(info.broker_pid, kafka_broker.KAFKA_STOP_GRACE_S)
    log_dir = Path(info.log_dir)
    broker, broker_port = kafka_broker.start(java, classpath, log_dir, info.proxy_port, detach)
    try:
        proxy_start.set_upstream(info.control_port, broker_port, log_dir / "proxy.log")
    except BaseException:
        processes.stop_process(broker, 2)
        raise
    return replace(info, broker_pid=broker.pid, broker_port=broker_port, detached=detach)


def _stop_broker_pid(pid: int, grace_s: float) -> None:
    """SIGTERM the group ``pid`` leads, SIGKILL after ``grace_s`` (at once when 0); reap it if it is our child."""
    if processes.group_alive(pid):
        if grace_s > 0:
            processes.kill_group(pid, signal.SIGTERM, grace_s)
        else:
            processes.kill_group(pid, signal.SIGKILL)
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_embedded(info: BrokerInfo, discard_data: bool = False) -> None:
    """End the broker and proxy processes of ``info`` (by their PIDs only).

    Each gets SIGTERM to its process group, then SIGKILL if it is still there
    after its grace period: 3 s for the proxy; :data:`lab.broker.apache.KAFKA_STOP_GRACE_S`
    for Kafka, whose clean shutdown (measured 0.4-1.0 s) closes its logs, so the
    next start on the same data skips log recovery (measured: 2.8 s after a clean
    stop, 3.7-5.3 s after a SIGKILL). A cluster stops as :func:`lab.broker.cluster.stop` says.

    ``discard_data``: nothing starts on this broker's data again (a run's own
    broker, its data in the run directory, which only a restart within the run
    reads): its Kafka JVMs get no grace, since a clean shutdown would only spare
    a later start that never comes (measured at a 3,000-event run's end: 0.36-0.51 s
    stopping cleanly, 0.005 s killed). What the run wrote stays on disk.
    """
    grace = 0.0 if discard_data else kafka_broker.KAFKA_STOP_GRACE_S
    if info.nodes:
        kafka_cluster.stop(info.controller_pid, list(info.nodes), grace_s=grace)
        return
    for pid in (info.proxy_pid, info.broker_pid):
        if pid:
            _stop_broker_pid(pid, grace if pid == info.broker_pid else 3.0)
