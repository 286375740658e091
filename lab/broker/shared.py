"""The broker shared by a runs directory's runs, and the broker each run uses.

``lab broker start`` leaves an embedded broker (or a three-broker cluster)
running for a runs directory and records it in ``<runs>/broker.json``
(:func:`save_state`); every later run there, a notebook's or a matrix's, uses
it (:func:`load_running`, which trusts a recorded PID only while its command
line is still the broker's) until ``lab broker stop``. A run asks
:func:`broker_for_run`: a Kafka named by ``LAB_KAFKA_BOOTSTRAP``, else the
recorded one, else one of its own that it stops at its end. Starting and
stopping the processes themselves is :mod:`lab.broker.embedded`'s.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import psutil

from lab.broker import external as external_broker
from lab.broker.embedded import BrokerInfo, check_nodes, start_embedded, stop_embedded
from lab.errors import LabError
from lab.host import processes
from lab.host.atomic_file import write_atomic

#: The word in a recorded broker's command line that proves its PID is still it.
_CMDLINE_NEEDLE = "kafka.Kafka"


def state_file(runs_dir: str | Path) -> Path:
    """Where ``lab broker start`` records the broker it left running."""
    return Path(runs_dir) / "broker.json"


def save_state(runs_dir: str | Path, info: BrokerInfo) -> None:
    """Record ``info`` as the broker left running in ``runs_dir`` (atomically: a reader sees the old or the new)."""
    path = state_file(runs_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(info.to_dict(), indent=2))


def _is_ours(pid: int | None, needle: str) -> bool:
    # A PID alone could have been reused by an unrelated process since it was recorded.
    if not pid or not processes.pid_alive(pid):
        return False
    try:
        return needle in " ".join(psutil.Process(pid).cmdline())
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # as before: a process we may not inspect is trusted by its PID


def load_running(runs_dir: str | Path) -> BrokerInfo | None:
    """The broker ``lab broker start`` left running, if both its processes are still ours.

    The broker's command line (each JVM's, for a cluster) must hold ``kafka.Kafka``.
    """
    path = state_file(runs_dir)
    try:
        info = BrokerInfo.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    needle = _CMDLINE_NEEDLE
    if info.nodes:
        ours = _is_ours(info.controller_pid, needle) and all(
            _is_ours(n.broker_pid, needle) and _is_ours(n.proxy_pid, "lab.broker.proxy")
            and _is_ours(n.replication_proxy_pid, "lab.broker.proxy") for n in info.nodes)
        return info if ours else None
    if _is_ours(info.broker_pid, needle) and _is_ours(info.proxy_pid, "lab.broker.proxy"):
        return info
    return None


def check_running(running: BrokerInfo, runs_dir, nodes: int | None = None) -> None:
    """Refuse to reuse ``running`` when a different node count was asked for."""
    if nodes is not None and running.node_count != nodes:
        raise LabError(f"the broker running from {state_file(runs_dir)} has {running.node_count} node(s), but "
                       f"{nodes} were asked for; run `lab broker stop` first, or `lab broker start --nodes {nodes}`")


def start_detached(runs_dir: str | Path, port: int | None = None, nodes: int = 1) -> BrokerInfo:
    """``lab broker start``: start a broker (``nodes=3``: a cluster) that outlives this call and record it.

    A broker already running is returned as it is, unless another node count was
    asked for (:class:`LabError` then, naming both and ``lab broker stop``).
    """
    nodes = check_nodes(nodes, port)
    running = load_running(runs_dir)
    if running:
        check_running(running, runs_dir, nodes)
        return running
    info = start_embedded(Path(runs_dir) / "broker-logs", port=port, detach=True, nodes=nodes)
    save_state(runs_dir, info)
    return info


def stop_detached(runs_dir: str | Path) -> bool:
    """``lab broker stop``: stop the recorded broker. Returns False when none was running."""
    info = load_running(runs_dir)
    state_file(runs_dir).unlink(missing_ok=True)
    if info is None:
        return False
    stop_embedded(info)
    return True


@contextmanager
def broker_for_run(kafka_bootstrap: str | None, runs_dir: str | Path, log_dir: Path, kafka_proxy: str | None = None,
                   nodes: int = 1):
    """The broker a run uses, stopped afterwards only if this run started it.

    With ``LAB_KAFKA_BOOTSTRAP``, ``kafka_proxy`` (``LAB_KAFKA_PROXY``) names the
    control port of the lab proxy that Kafka's clients go through: checked with
    :func:`lab.broker.external.check_proxy`, then carried as ``control_host``/``control_port``, so
    proxy faults reach it. The lab starts and stops neither.

    Order: ``LAB_KAFKA_BOOTSTRAP`` when set (checked within 5 s); the broker
    ``lab broker start`` left running (refused if it has another node count);
    otherwise a new embedded one with ``nodes`` brokers.
    """
    if kafka_bootstrap:
        external_broker.check_reachable(kafka_bootstrap)
        if kafka_proxy:
            host, port = external_broker.check_proxy(kafka_proxy)
            yield BrokerInfo(bootstrap=kafka_bootstrap, external=True, product=None,
                             control_port=port, control_host=host)
        else:
            yield BrokerInfo(bootstrap=kafka_bootstrap, external=True, product=None)
        return
    running = load_running(runs_dir)
    if running:
        check_running(running, runs_dir, nodes)
        yield running
        return
    info = start_embedded(log_dir, nodes=nodes)
    try:
        yield info
    finally:
        stop_embedded(info, discard_data=True)  # in the run's directory: no later start reads it
