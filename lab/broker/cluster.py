"""Apache Kafka as a three-broker cluster on 127.0.0.1, each broker behind two lab proxies.

What ``lab broker start --nodes 3`` and ``LAB_BROKER_NODES=3`` start, for the
replication lessons (acks, ``min.insync.replicas``, unclean leader election,
leader failover). KRaft in isolated mode: one controller-only JVM (node 100,
the only voter of its quorum) and three broker-only JVMs (nodes 1-3). A
leader-crash fault kills a broker, never the controller, so the controller is
always there to elect the next leader, as in a production cluster whose
controllers run apart from its brokers.

Each broker has two proxies (:mod:`lab.broker.proxy`):

``client``       its ``PLAINTEXT`` listener is advertised as this proxy's port:
                 producers and consumers reach the broker through it
                 (``broker-outage`` and ``ack-loss`` act on all three).
``replication``  its ``BROKER`` (inter-broker) listener is advertised as this
                 proxy's port: every follower fetch from this broker, when it
                 leads a partition, goes through it. ``follower-lag`` holds
                 these requests back (``{"cmd": "hold"}``), so the followers
                 fall behind while the leader keeps acknowledging: how an
                 ``acks=1`` loss is made reproducible rather than lucky.

Brokers reach the controller directly, so a held replication proxy never
stops their heartbeats: a lagging follower stays registered (unfenced) and
can be elected leader by an unclean election.

Protocol
--------
1. Format every data directory that does not exist yet (in parallel, one
   StorageTool JVM each; the controller with ``--standalone``), all with one
   cluster id.
2. Start the controller on ``127.0.0.1:0``; read its port from its log.
3. Start the six proxies (ports chosen by the OS, reported in ready files).
4. Start the three brokers on ``127.0.0.1:0``, advertising their proxies' ports;
   tell each proxy its broker's bound port.

Memory, measured on 2 cores: each JVM runs with :data:`lab.broker.apache.KAFKA_JVM_FLAGS`
(256 MB heap at most; see :data:`CLUSTER_MEMORY_NOTE`).

On failure
----------
:class:`lab.errors.LabError` naming the node and its log; everything already
started is stopped (by PID) before it propagates.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from lab.broker import apache as kafka_broker, proxy as proxy_mod, proxy_start
from lab.errors import LabError
from lab.host import processes
from lab.kafka import replication as replication_watch

#: Cluster sizes the lab starts: one node (broker and controller in one JVM) or three brokers.
NODE_COUNTS = (1, 3)

#: Node id of the controller-only JVM (brokers are 1..N).
CONTROLLER_ID = 100

#: What the cluster costs, measured on this 2-core machine (RSS of each process after start).
CLUSTER_MEMORY_NOTE = ("4 JVMs (one controller, three brokers) of at most 256 MB heap each, measured 150-200 MB "
                       "RSS each; 6 proxies of about 25 MB each: about 0.9 GB in all")

#: A follower whose fetches stall this long leaves the ISR. Kafka's default (30 s) would outlast a
#: lesson; 3 s shows the ISR shrink within a short run and still rides out a busy 2-core machine's pauses.
REPLICA_LAG_TIME_MAX_MS = 3000

#: How often the controller looks for partitions that only an unclean election can bring back
#: (Kafka's default: 5 minutes, longer than a run).
UNCLEAN_ELECTION_INTERVAL_MS = 1000

_COMMON = (
    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "controller.listener.names=CONTROLLER",
    *kafka_broker.SMALL_NODE_PROPERTIES,
)


def controller_properties(data_dir: Path) -> str:
    """``server.properties`` of the controller-only node (its own quorum's only voter, port chosen by the OS)."""
    return "\n".join([
        "# Written by lab.broker.cluster (the controller of a three-broker cluster); rewritten at each start.",
        "process.roles=controller",
        f"node.id={CONTROLLER_ID}",
        "listeners=CONTROLLER://127.0.0.1:0",
        "controller.quorum.bootstrap.servers=127.0.0.1:0",
        f"log.dirs={data_dir}",
        *_COMMON,
        f"unclean.leader.election.interval.ms={UNCLEAN_ELECTION_INTERVAL_MS}",
        "",
    ])


def broker_properties(node: int, data_dir: Path, client_port: int, replication_port: int, controller_port: int,
                      nodes: int) -> str:
    """``server.properties`` of broker ``node``: both listeners on port 0, advertised as its proxies' ports.

    Replication settings that are run settings (``min.insync.replicas``,
    ``unclean.leader.election.enable``) are set on each run's topic, not here,
    so runs with different settings can share one cluster. The internal topics
    (consumer offsets, transactions) are replicated to every broker, with
    ``min.insync.replicas`` 2 for the transaction log.
    """
    return "\n".join([
        f"# Written by lab.broker.cluster (broker {node} of {nodes}); rewritten at each start.",
        "process.roles=broker",
        f"node.id={node}",
        "listeners=PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{client_port},BROKER://127.0.0.1:{replication_port}",
        "inter.broker.listener.name=BROKER",
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}",
        f"log.dirs={data_dir}",
        *_COMMON,
        f"default.replication.factor={nodes}",
        f"offsets.topic.replication.factor={nodes}",
        "offsets.topic.num.partitions=1",
        f"transaction.state.log.replication.factor={nodes}",
        f"transaction.state.log.min.isr={min(2, nodes)}",
        "transaction.state.log.num.partitions=1",
        f"share.coordinator.state.topic.replication.factor={nodes}",
        "share.coordinator.state.topic.min.isr=1",
        f"replica.lag.time.max.ms={REPLICA_LAG_TIME_MAX_MS}",
        "",
    ])


@dataclass(frozen=True)
class NodeInfo:
    """One broker of the cluster: its JVM and its two proxies (client and replication)."""

    node: int
    broker_pid: int
    broker_port: int
    replication_port: int
    proxy_pid: int
    proxy_port: int
    control_port: int
    replication_proxy_pid: int
    replication_proxy_port: int
    replication_control_port: int

    def to_dict(self) -> dict:
        return asdict(self)


def node_dir(log_dir: Path, node: int) -> Path:
    return Path(log_dir) / f"node-{node}"


def controller_dir(log_dir: Path) -> Path:
    return Path(log_dir) / "controller"


def _format_missing(java: str, classpath: str, log_dir: Path, nodes: int) -> None:
    """Format the data directories that do not exist yet, in parallel, with one cluster id."""
    cluster = kafka_broker.cluster_id()
    jobs = []
    ctl = controller_dir(log_dir)
    if not (ctl / "kafka-data").exists():
        jobs.append((ctl, controller_properties, True))
    for node in range(1, nodes + 1):
        d = node_dir(log_dir, node)
        if not (d / "kafka-data").exists():
            # The advertised ports do not matter to the format; only node.id and the roles do.
            jobs.append((d, lambda staging, node=node: broker_properties(node, staging, 1, 1, 1, nodes), False))
    if not jobs:
        return
    if len(jobs) != nodes + 1:
        raise LabError(f"the cluster's data in {log_dir} is incomplete (some nodes formatted, some not); "
                       "remove the directory to start a new cluster")

    def fmt(job):
        d, props_of, standalone = job
        d.mkdir(parents=True, exist_ok=True)
        kafka_broker.format_data_dir(java, classpath, d, d / "kafka-data", 0, d / "kafka.log",
                                     props_of=props_of, cluster=cluster, standalone=standalone)

    with ThreadPoolExecutor(len(jobs)) as pool:
        list(pool.map(fmt, jobs))


def _start_controller(java: str, classpath: str, log_dir: Path, detach: bool):
    d = controller_dir(log_dir)
    proc, ports = kafka_broker.start_jvm(java, classpath, d / "server.properties",
                                         controller_properties(d / "kafka-data"), d / "kafka.log", detach)
    if "CONTROLLER" not in ports:
        processes.stop_process(proc, 2)
        raise LabError(f"the cluster's controller logged no CONTROLLER port ({ports}); see {d / 'kafka.log'}")
    return proc, ports["CONTROLLER"]


def _spawn_broker(java: str, classpath: str, log_dir: Path, node: int, nodes: int, client_port: int,
                  replication_port: int, controller_port: int, detach: bool):
    d = node_dir(log_dir, node)
    return kafka_broker.spawn_jvm(
        java, classpath, d / "server.properties",
        broker_properties(node, d / "kafka-data", client_port, replication_port, controller_port, nodes),
        d / "kafka.log", detach)


def _await_broker(proc, offset: int, log_dir: Path, node: int) -> dict[str, int]:
    log = node_dir(log_dir, node) / "kafka.log"
    ports = kafka_broker.await_jvm(proc, log, offset)
    if not {"PLAINTEXT", "BROKER"} <= set(ports):
        processes.stop_process(proc, 2)
        raise LabError(f"broker {node} logged ports {ports}, not PLAINTEXT and BROKER; see {log}")
    return ports


def start(log_dir: Path, nodes: int = 3, detach: bool = False) -> tuple[dict, list[NodeInfo]]:
    """Start the controller, the proxies and ``nodes`` brokers (see the protocol above).

    Returns
    -------
    tuple
        ``(controller, node infos)``: ``controller`` is ``{"pid", "port"}``.

    Raises
    ------
    LabError
        When Java or the jars are missing, or a node or proxy does not start; nothing is left running.
    """
    if nodes < 2:
        raise LabError(f"a cluster has 3 brokers; got nodes={nodes} (valid: {', '.join(map(str, NODE_COUNTS))})")
    log_dir = Path(log_dir)
    java, classpath, _ = kafka_broker.prerequisites()
    started: list = []  # Popen objects, stopped in reverse order on failure
    try:
        _format_missing(java, classpath, log_dir, nodes)
        controller, controller_port = _start_controller(java, classpath, log_dir, detach)
        started.append(controller)
        # Spawned from this thread, not a pool's: a child's parent-death signal follows the thread that forked it.
        proxies = {}
        for node in range(1, nodes + 1):
            for kind in ("proxy", "replication-proxy"):
                proxies[(node, kind)] = proxy_start.start(node_dir(log_dir, node), None, detach, kind)
                started.append(proxies[(node, kind)][0])
        spawned = {}
        for node in range(1, nodes + 1):
            spawned[node] = _spawn_broker(java, classpath, log_dir, node, nodes, proxies[(node, "proxy")][1],
                                          proxies[(node, "replication-proxy")][1], controller_port, detach)
            started.append(spawned[node][0])
        brokers = {node: (proc, _await_broker(proc, offset, log_dir, node)) for node, (proc, offset) in spawned.items()}
        infos = []
        for node in range(1, nodes + 1):
            proc, ports = brokers[node]
            client, repl = proxies[(node, "proxy")], proxies[(node, "replication-proxy")]
            proxy_start.set_upstream(client[2], ports["PLAINTEXT"], node_dir(log_dir, node) / "proxy.log")
            proxy_start.set_upstream(repl[2], ports["BROKER"], node_dir(log_dir, node) / "replication-proxy.log")
            infos.append(NodeInfo(node=node, broker_pid=proc.pid, broker_port=ports["PLAINTEXT"],
                                  replication_port=ports["BROKER"], proxy_pid=client[0].pid, proxy_port=client[1],
                                  control_port=client[2], replication_proxy_pid=repl[0].pid,
                                  replication_proxy_port=repl[1], replication_control_port=repl[2]))
    except BaseException:
        for proc in reversed(started):
            processes.stop_process(proc, 2)
        raise
    return {"pid": controller.pid, "port": controller_port}, infos


def restart_node(log_dir: Path, node: NodeInfo, nodes: int, controller_port: int, detach: bool) -> NodeInfo:
    """Start broker ``node`` again on its data (after a leader-crash), behind the same proxies.

    The old JVM must be dead (it was SIGKILLed); the new one binds new ports,
    which its two proxies are told, so clients and followers keep the addresses
    they had. Measured: ready in 3-5 s on 2 cores.
    """
    java, classpath, _ = kafka_broker.prerequisites()
    proc, offset = _spawn_broker(java, classpath, Path(log_dir), node.node, nodes, node.proxy_port,
                                 node.replication_proxy_port, controller_port, detach)
    ports = _await_broker(proc, offset, Path(log_dir), node.node)
    try:
        d = node_dir(log_dir, node.node)
        proxy_start.set_upstream(node.control_port, ports["PLAINTEXT"], d / "proxy.log")
        proxy_start.set_upstream(node.replication_control_port, ports["BROKER"], d / "replication-proxy.log")
    except BaseException:
        processes.stop_process(proc, 2)
        raise
    return replace(node, broker_pid=proc.pid, broker_port=ports["PLAINTEXT"], replication_port=ports["BROKER"])


def stop(controller_pid: int | None, nodes: list[NodeInfo], grace_s: float = kafka_broker.KAFKA_STOP_GRACE_S) -> None:
    """End the cluster's processes by their PIDs: proxies, then brokers (together), then the controller.

    The brokers get SIGTERM at once and share one grace period: each one's
    controlled shutdown needs the controller, which is therefore stopped last.
    ``grace_s`` 0: every JVM is killed without one (SIGKILL; its data is discarded).
    """
    for n in nodes:
        for pid in (n.proxy_pid, n.replication_proxy_pid):
            if pid and processes.group_alive(pid):
                processes.kill_group(pid, signal.SIGTERM, 3.0)
    alive = [n.broker_pid for n in nodes if n.broker_pid and processes.group_alive(n.broker_pid)]
    for pid in alive:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while any(processes.group_alive(pid) for pid in alive) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in alive:
        if processes.group_alive(pid):
            processes.kill_group(pid, signal.SIGKILL, 5.0)
    if controller_pid and processes.group_alive(controller_pid):
        if grace_s > 0:
            processes.kill_group(controller_pid, signal.SIGTERM, grace_s)
        else:
            processes.kill_group(controller_pid, signal.SIGKILL)
    for pid in [*alive, controller_pid, *(p for n in nodes for p in (n.proxy_pid, n.replication_proxy_pid))]:
        _reap(pid)


def _reap(pid: int | None) -> None:
    """Collect ``pid``'s exit status when it is our child (a detached cluster's are not)."""
    try:
        if pid:
            os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def kill_leader(broker, topic: str) -> dict | None:
    """The leader-crash fault: SIGKILL the JVM of the broker leading partition 0 of ``topic``.

    ``broker`` is the run's :class:`lab.broker.embedded.BrokerInfo` (a cluster). Returns
    ``{"node", "pid", "leads"}`` (``leads``: the topic's partitions that broker
    led), or ``None`` when partition 0 has no leader now (an election is under way).
    """
    states = replication_watch.describe(broker.bootstrap, topic)
    leader = states.get(0, {}).get("leader")
    if leader is None:
        return None
    node = broker.node(leader)
    processes.kill_group(node.broker_pid, signal.SIGKILL, 5)
    return {"node": leader, "pid": node.broker_pid,
            "leads": sorted(p for p, state in states.items() if state["leader"] == leader)}


#: The topics of Kafka's coordinators: the leader of the partition a transactional id (a group id) hashes to
#: coordinates its transactions (its offsets); the lab's cluster has one partition of each
#: (``transaction.state.log.num.partitions``, ``offsets.topic.num.partitions``).
COORDINATOR_TOPICS = ("__transaction_state", "__consumer_offsets")


def cut_output_leader(broker, topic: str, seconds: float, client_prefix: str | None = None) -> dict:
    """The leader-unreachable fault: cut a broker leading a partition of ``topic`` off from clients.

    The broker chosen coordinates nothing (it leads neither ``__transaction_state`` nor
    ``__consumer_offsets``, each the cluster's only partition): a producer's sends to its partitions then
    wait unsent while its transactional requests and its offset commits still reach their coordinators,
    which is what lets kafka-python 3.0.12 commit a transaction without them (:mod:`lab.kafka.transactions`).
    With ``client_prefix`` only the clients whose ``client_id`` starts with it are cut off (the pipeline's
    producer; its consumer and the run's producer go on), else every client. Returns ``{"node", "leads",
    "coordinators", "client_prefix", "proxy"}`` (``leads``: the partitions of ``topic`` that broker led;
    ``proxy``: the cut's reply), or ``{"reason", "coordinators"}`` when only coordinators lead a partition now.
    """
    states = replication_watch.describe(broker.bootstrap, topic)
    coordinators = sorted({replication_watch.describe(broker.bootstrap, t).get(0, {}).get("leader")
                           for t in COORDINATOR_TOPICS} - {None})
    leaders = sorted({s["leader"] for s in states.values() if s["leader"] is not None} - set(coordinators))
    if not leaders:
        return {"reason": f"only the coordinators' brokers (nodes {coordinators}) lead a partition of {topic} now",
                "coordinators": coordinators}
    node = leaders[0]
    message = {"cmd": "cut", "seconds": seconds, **({"client_prefix": client_prefix} if client_prefix else {})}
    reply = proxy_mod.control(broker.node(node).control_port, message)
    return {"node": node, "leads": sorted(p for p, s in states.items() if s["leader"] == node),
            "coordinators": coordinators, "client_prefix": client_prefix, "proxy": reply}
