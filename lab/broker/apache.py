"""Apache Kafka as the embedded broker: one KRaft node (broker and controller in one JVM).

:mod:`lab.broker.embedded` starts it behind the lab's proxy; this module
holds what is particular to Kafka: its pinned jars (set ``kafka-broker``
of :mod:`lab.host.jars`), its JVM flags, its ``server.properties``, the one-time
format of its data directory, and reading its ports and readiness from its log.

Protocol
--------
1. :func:`prerequisites`: the JVM (:func:`lab.host.java.find_java`), the cached jars'
   classpath and the Kafka version.
2. A new data directory is a copy of one formatted once per Kafka version
   (:mod:`lab.broker.template`), else :func:`format_data_dir` formats it
   (``kafka.tools.StorageTool format --standalone``, into a temporary directory
   renamed when done, so a half-formatted directory cannot exist); a restart
   reuses the data.
3. :func:`start`: ``kafka.Kafka server.properties`` with every listener on
   ``127.0.0.1:0`` (the OS picks the ports; Kafka logs them) and the client
   listener advertised as the proxy's port; ready when the log says
   ``Kafka Server started``; returns the process and its client port. Every
   broker JVM (and the format's) runs with :func:`jvm_flags`: the flags below,
   and the broker's class archive when it exists (:mod:`lab.broker.archive`).

On failure
----------
A JVM that exits or is not ready within :data:`KAFKA_READY_S` raises
:class:`lab.errors.LabError` with Kafka's own exception line and the log path.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

from lab.broker import archive as broker_archive
from lab.broker.jvm import KAFKA_JVM_FLAGS
from lab.errors import LabError
from lab.host import processes
from lab.host.atomic_file import write_atomic
from lab.host.jar_sets import KAFKA_JARS

#: Seconds the Kafka JVM gets to be ready (``Kafka Server started``). Measured: 2.8 s to start on
#: existing data, 2.9-6.1 s for a first start including the one-time format (1.2-1.5 s), 3.7-5.3 s
#: to restart after a SIGKILL; the upper ends while Spark runs compete for the 2 cores.
KAFKA_READY_S = 60.0

#: Seconds a Kafka JVM gets after SIGTERM before SIGKILL (a clean shutdown, measured 0.4-1.0 s).
KAFKA_STOP_GRACE_S = 15.0


#: Properties of every lab Kafka node (one node or a cluster's), for short runs on 2 cores.
SMALL_NODE_PROPERTIES = (
    # A group's first join is not held back 3 s for more members.
    "group.initial.rebalance.delay.ms=0",
    # A SIGKILLed broker's registration expires in 1.5 s instead of 9 s: measured, a restart on the
    # same data is ready in 3.7-5.3 s instead of about 15; a cluster elects a new leader within about 2 s.
    "broker.heartbeat.interval.ms=500",
    "broker.session.timeout.ms=1500",
    # 2 cores: fewer threads than the defaults (3 network, 8 io, 10 background).
    "num.network.threads=2",
    "num.io.threads=2",
    "background.threads=2",
    # The log cleaner allocates this buffer when it starts: the 128 MB default is half the 256 MB heap.
    "log.cleaner.dedupe.buffer.size=8388608",
    # No no-op record in the metadata log every 500 ms (KIP-835: they keep the metadata's last-applied-record
    # metrics fresh for monitoring a quorum; every change still commits its own records). Measured
    # (bench/broker_idle.py): an idle node's JVM 2.9 → 2.1% of a core, what the test session's shared brokers
    # and a workshop's `lab broker start` spend between runs.
    "metadata.max.idle.interval.ms=0",
    # A share group's record locks may be as short as 1 s (the floor is 15 s by default): the share pipeline's
    # group holds a record 3 s (lab.share.settings.LOCK_MS), so a dead consumer's records come back within seconds.
    "group.share.min.record.lock.duration.ms=1000",
    # A share consumer's first records came 6.5 s after it subscribed with the 5 s heartbeat (its assignment
    # comes with a heartbeat's answer); a member gone quiet leaves its group after 10 s, as a classic
    # consumer of kafka-python does, instead of 45 s.
    "group.share.min.heartbeat.interval.ms=1000",
    "group.share.heartbeat.interval.ms=1000",
    "group.share.min.session.timeout.ms=6000",
    "group.share.session.timeout.ms=10000",
)


def properties(data_dir: Path, proxy_port: int) -> str:
    """``server.properties`` of the one-node KRaft Kafka: every port is bound by the JVM itself (0).

    Three listeners: ``PLAINTEXT`` for clients, advertised as the proxy's port, so
    clients go through the proxy; ``BROKER`` for the node's own inter-broker traffic
    (transaction markers go to partition leaders over it), advertised with port 0,
    which Kafka replaces with the port it bound, so a proxy fault never holds up the
    broker's traffic with itself; ``CONTROLLER`` for KRaft.
    """
    return "\n".join([
        "# Written by lab.broker (one Apache Kafka KRaft node behind the lab's proxy); rewritten at each start.",
        "process.roles=broker,controller",
        "node.id=1",
        "listeners=PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy_port},BROKER://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=BROKER",
        "controller.listener.names=CONTROLLER",
        # Port 0 works here too: with --standalone the node is the only voter and finds itself.
        "controller.quorum.bootstrap.servers=127.0.0.1:0",
        f"log.dirs={data_dir}",
        # One node: every internal topic with one replica, one partition (fewer files, faster start).
        "offsets.topic.replication.factor=1",
        "offsets.topic.num.partitions=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "transaction.state.log.num.partitions=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        *SMALL_NODE_PROPERTIES,
        "",
    ])


def cluster_id() -> str:
    """A random cluster id in Kafka's form (16 bytes, base64url without padding), made without a JVM.

    Never one starting with ``-``: StorageTool's parser takes it for an option
    (seen: ``argument --cluster-id/-t: expected one argument``; one random id in 64 starts so),
    which is why Kafka's own ``Uuid.randomUuid`` draws again in that case too.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def jvm_flags(archive_at_exit: Path | None = None) -> list[str]:
    """A broker JVM's flags: :data:`KAFKA_JVM_FLAGS`, then its class archive's (:mod:`lab.broker.archive`).

    With ``archive_at_exit`` the JVM writes a new archive there as it exits (the archive's
    training) instead of mapping today's.
    """
    archive = [f"-XX:ArchiveClassesAtExit={archive_at_exit}"] if archive_at_exit else broker_archive.java_options()
    return [*KAFKA_JVM_FLAGS, *archive]


def run_jvm_tool(args: list, log: Path, what: str, timeout_s: float = 60.0) -> None:
    """Run a short-lived JVM (own process group, output appended to ``log``) to its end.

    Raises
    ------
    LabError
        When it fails or outlives ``timeout_s`` (it is then killed), naming ``log`` and its last line.
    """
    proc = processes.spawn(args, log_path=log, env=jvm_env())
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        processes.stop_process(proc, 2)
        raise LabError(f"{what} did not finish within {timeout_s:g} s; see {log}") from None
    except BaseException:
        processes.stop_process(proc, 2)
        raise
    if code != 0:
        raise LabError(f"{what} failed with status {code}: {processes.last_log_line(log)} (log: {log})")


def jvm_env() -> dict:
    # Nothing from the caller's environment reaches the broker but what a JVM needs to run.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    for key in ("TMPDIR", "LANG", "LC_ALL"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    return env


def format_data_dir(java: str, classpath: str, log_dir: Path, data_dir: Path, proxy_port: int, log: Path, *,
                    props_of=None, cluster: str | None = None, standalone: bool = True) -> None:
    """Format ``data_dir`` once (``StorageTool format``), so that it appears complete or not at all.

    The tool formats a sibling ``<data_dir>.formatting-<random>`` (its own
    properties name it), which is then renamed to ``data_dir``: an interrupted
    format never leaves a half-formatted data directory that the next start
    would take as formatted. Measured: 1.2-1.5 s (one JVM).

    ``props_of(staging_dir)`` gives the properties to format with (default: this
    module's one-node :func:`properties`); ``cluster`` the cluster id (default: a
    new one); ``standalone`` makes the node the only voter of a new quorum
    (``--standalone``; a broker-only node of a cluster formats without it).
    """
    staging = data_dir.with_name(f"{data_dir.name}.formatting-{uuid.uuid4().hex[:8]}")
    props = log_dir / f".format-{uuid.uuid4().hex[:8]}.properties"
    try:
        props.write_text(props_of(staging) if props_of else properties(staging, proxy_port))
        run_jvm_tool([java, *jvm_flags(), "-cp", classpath, "kafka.tools.StorageTool", "format",
                      "-t", cluster or cluster_id(), "-c", props, *(["--standalone"] if standalone else [])],
                     log, f"Apache Kafka's StorageTool format of {data_dir}")
        os.rename(staging, data_dir)
    finally:
        props.unlink(missing_ok=True)
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


_AWAITING = re.compile(r"Awaiting socket connections on \S+:(\d+)\.")
_ACCEPTOR = re.compile(r"Created data-plane acceptor and processors for endpoint : ListenerName\((\w+)\)")
_READY = "Kafka Server started"


def ports_from_log(text: str) -> dict[str, int]:
    """``{listener name: bound port}`` from a Kafka 4.1 log.

    Each listener's acceptor logs ``Awaiting socket connections on 127.0.0.1:N.``,
    then ``Created data-plane acceptor ... ListenerName(NAME)``, both from the
    ``main`` thread, one listener after the other (measured in every start's log).
    A listener advertised with its own port (PLAINTEXT is advertised as the
    proxy's) gets no ``resolved ephemeral port`` line, so that line is not used.
    """
    ports, last = {}, None
    for line in text.splitlines():
        if m := _AWAITING.search(line):
            last = int(m.group(1))
        elif (m := _ACCEPTOR.search(line)) and last is not None:
            ports[m.group(1)] = last
            last = None
    return ports


_EXCEPTION = re.compile(r"^(?:Caused by: )?[\w$.]+(?:Exception|Error): ")


def failure_line(log: Path, offset: int) -> str:
    """The line of ``log`` (after byte ``offset``) that says why Kafka stopped.

    The last exception message (``java.lang.RuntimeException: No readable
    meta.properties files found.``), else the last ``ERROR`` line, else the last
    line: a JVM's last line is usually a stack frame (``at kafka.Kafka.main``).
    """
    lines = [line.strip() for line in processes.read_log(log, offset).splitlines() if line.strip()]
    if not lines:
        return ""
    for pick in (lambda line: _EXCEPTION.match(line), lambda line: " ERROR " in line, lambda line: True):
        found = [line for line in lines if pick(line)]
        if found:
            return found[-1]
    return ""


def wait_ready(proc, log: Path, offset: int, timeout_s: float) -> dict[str, int]:
    """Wait for ``Kafka Server started`` in ``log`` after byte ``offset``; return the listeners' ports.

    Raises
    ------
    LabError
        One line naming the log: the JVM exited first, or was not ready in ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        text = processes.read_log(log, offset)
        if _READY in text:
            return ports_from_log(text)
        if proc.poll() is not None:
            raise LabError(f"Apache Kafka exited with status {proc.returncode} before it was ready: "
                           f"{failure_line(log, offset)[:300]} (log: {log})")
        if time.monotonic() >= deadline:
            raise LabError(f"Apache Kafka was not ready within {timeout_s:g} s (no '{_READY}'); see {log}")
        time.sleep(0.05)


def spawn_jvm(java: str, classpath: str, props: Path, text: str, log: Path, detach: bool,
              archive_at_exit: Path | None = None):
    """Write ``text`` to ``props`` and spawn ``kafka.Kafka`` on it: ``(Popen, log offset)``; see :func:`await_jvm`.

    Spawned from the calling thread, which must outlive the JVM unless ``detach``
    (its parent-death signal follows the thread that forked it). ``archive_at_exit``: see :func:`jvm_flags`.
    """
    write_atomic(props, text)
    offset = log.stat().st_size if log.exists() else 0
    proc = processes.spawn([java, *jvm_flags(archive_at_exit), "-cp", classpath, "kafka.Kafka", props],
                           log_path=log, env=jvm_env(), die_with_parent=not detach)
    return proc, offset


def await_jvm(proc, log: Path, offset: int) -> dict[str, int]:
    """Wait until a :func:`spawn_jvm` JVM logs ``Kafka Server started``: ``{listener: bound port}``, checked with the
    OS.

    On failure the JVM is stopped before :class:`LabError` propagates.
    """
    try:
        ports = wait_ready(proc, log, offset, KAFKA_READY_S)
        listening = processes.listening_ports(proc.pid)
        if not ports or any(port not in listening for port in ports.values()):
            raise LabError(f"Apache Kafka's listener ports are not in its log or not open "
                           f"(log says {ports}, the JVM listens on {listening}); see {log}")
    except BaseException:
        processes.stop_process(proc, 2)
        raise
    return ports


def start_jvm(java: str, classpath: str, props: Path, text: str, log: Path, detach: bool,
              archive_at_exit: Path | None = None):
    """:func:`spawn_jvm` then :func:`await_jvm`: ``(Popen, {listener: bound port})``."""
    proc, offset = spawn_jvm(java, classpath, props, text, log, detach, archive_at_exit)
    return proc, await_jvm(proc, log, offset)


def start(java: str, classpath: str, log_dir: Path, proxy_port: int, detach: bool,
          archive_at_exit: Path | None = None):
    """Start the Kafka JVM on ``log_dir``'s data, advertising ``proxy_port``: ``(Popen, client port)``.

    Makes ``<log_dir>/kafka-data`` first when it does not exist: a copy of the formatted
    template (:func:`copy_formatted`), else its own format (a restart on the same
    directory keeps its data and is never formatted again). The caller stops
    the returned process on a later failure; on a failure here it is already stopped.
    ``archive_at_exit``: the class archive's training (:func:`jvm_flags`).
    """
    log = log_dir / "kafka.log"
    data_dir = log_dir / "kafka-data"
    if not data_dir.exists() and not copy_formatted(java, classpath, log_dir, data_dir, proxy_port, log):
        format_data_dir(java, classpath, log_dir, data_dir, proxy_port, log)
    proc, ports = start_jvm(java, classpath, log_dir / "server.properties", properties(data_dir, proxy_port), log,
                            detach, archive_at_exit)
    if "PLAINTEXT" not in ports:
        processes.stop_process(proc, 2)
        raise LabError(f"Apache Kafka's client listener port is not in its log (it says {ports}); see {log}")
    return proc, ports["PLAINTEXT"]


def clear_stale(node_dirs) -> int:
    """Before a broker's first start on ``node_dirs`` (one, or a cluster's): remove the data earlier brokers left.

    A new broker (``lab broker start``, a notebook's or the matrix's) has no use
    for the topics of the runs before it, and each one it finds costs its start
    (measured: 2.8 s to ready on the matrix's data of 16 earlier matrices, 237 MB
    and 1,241 directories, 1.2 s on a fresh copy); they also filled the disk. A
    restart on the same data (``broker-crash``, ``leader-crash``) never comes here.
    Each ``kafka.log`` becomes ``kafka.log.1`` (one earlier log is kept). Nothing is
    removed unless every directory is free.

    Returns how many data directories were removed.

    Raises
    ------
    LabError
        When a running Kafka holds one of them (its ``.lock``), naming the directory and the
        process: two brokers cannot share data.
    """
    data_dirs = [Path(d) / "kafka-data" for d in node_dirs]
    # none, or not a broker's (left alone: Kafka's start then says why it cannot use it)
    data_dirs = [d for d in data_dirs if d.is_dir()]
    for d in data_dirs:
        _refuse_if_held(d)
    for node_dir in node_dirs:
        log = Path(node_dir) / "kafka.log"
        if log.exists():
            os.replace(log, log.with_name("kafka.log.1"))
    for d in data_dirs:
        shutil.rmtree(d)
    return len(data_dirs)


def _refuse_if_held(data_dir: Path) -> None:
    """Raise :class:`LabError` when a running Kafka holds ``data_dir``'s ``.lock``."""
    import fcntl

    lock = data_dir / ".lock"
    if not lock.exists():
        return
    # Kafka holds a POSIX record lock on it while it runs (a JVM killed leaves the file, not the lock).
    with open(lock, "a") as f:
        try:
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError:
            pass
    import psutil

    config = str(data_dir.parent / "server.properties")
    holders = [p.pid for p in psutil.process_iter(["cmdline"]) if config in (p.info["cmdline"] or ())]
    who = f"the Kafka JVM with PID {holders[0]}" if holders else "a running Kafka broker"
    raise LabError(f"{who} holds {data_dir}; end it first (lab broker stop, with the LAB_RUNS_DIR it was started "
                   f"with, else that process), or give this broker another directory")


def copy_formatted(java: str, classpath: str, log_dir: Path, data_dir: Path, proxy_port: int, log: Path) -> bool:
    """Give ``data_dir`` a copy of the formatted template (:mod:`lab.broker.template`), made on first use.

    False under ``LAB_KAFKA_FORMAT=each`` or when the template cannot be made or
    copied: the caller then formats ``data_dir`` itself.
    """
    from lab.broker import template as kafka_template
    from lab.host import jars

    if kafka_template.format_mode() != "template":
        return False
    template = kafka_template.template_dir(jars.jar_set(KAFKA_JARS).version, properties(Path("<data>"), 0))
    # The template's format logs beside the template: a run's kafka.log describes that run's broker only.
    made = kafka_template.ensure_template(
        template, lambda target: format_data_dir(java, classpath, target.parent, target, proxy_port,
                                                 target.parent / "format.log"))
    return made and kafka_template.copy_into(template, data_dir, cluster_id())


def prerequisites() -> tuple[str, str, str]:
    """``(java executable, classpath, version)`` of the Kafka broker: the jars fetched once, verified."""
    from lab.host import jars
    from lab.host.java import find_java

    java = find_java().executable
    classpath = jars.classpath(KAFKA_JARS)
    return java, classpath, jars.jar_set(KAFKA_JARS).version
