"""Starting the lab's proxy (:mod:`lab.broker.proxy`) from the lab's side: spawn it, read the ports it bound, and
name its broker.

The proxy process itself never imports this module; it needs neither psutil nor the lab's process helpers.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lab.broker.proxy import EXIT_CANNOT_BIND, control
from lab.errors import LabError


def _read_ready_file(path: Path, proc, log: Path, timeout_s: float) -> dict:
    """The ports in the ready file (see :mod:`lab.broker.proxy`) that the proxy ``proc`` wrote, waited for.

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


def log_tail(log: Path, offset: int) -> str:
    """The last non-empty line ``log`` got after byte ``offset`` (logs are appended across starts)."""
    from lab.host import processes

    lines = processes.read_log(log, offset).strip().splitlines()
    return lines[-1].strip() if lines else ""


def start(log_dir: Path, port: int | None, detach: bool, name: str = "proxy"):
    """Start the proxy and wait for its ready file: ``(Popen, client port, control port)``.

    Its output goes to ``<log_dir>/<name>.log`` (a cluster runs one proxy per listener and node).

    The client side of the protocol above; the proxy refuses clients until
    :func:`set_upstream` names the broker.

    Raises
    ------
    LabError
        When ``port`` is taken, or the proxy does not report within 10 s (its log is named);
        the proxy is then already stopped.
    """
    import uuid

    from lab.host import processes

    proxy_log = log_dir / f"{name}.log"
    # One ready file per start: two starts sharing ``log_dir`` (two kernels using runs/broker-logs)
    # must not read, replace or delete each other's.
    ready = log_dir / f"{name}-ready-{uuid.uuid4().hex}.json"
    proxy_log_start = proxy_log.stat().st_size if proxy_log.exists() else 0
    proxy = processes.spawn(
        [sys.executable, "-m", "lab.broker.proxy", "--listen", port or 0, "--control", 0, "--ready-file", ready],
        log_path=proxy_log, die_with_parent=not detach,
    )
    try:
        try:
            ports = _read_ready_file(ready, proxy, proxy_log, 10)
        except LabError as e:
            ready.unlink(missing_ok=True)
            last = log_tail(proxy_log, proxy_log_start)
            # The proxy's own bind is the check that holds for an asked-for port (broker.start_embedded's
            # early one only answers sooner): checking first and binding later would leave a gap.
            if port is not None and proxy.returncode == EXIT_CANNOT_BIND and "(clients)" in last:
                raise port_error(port, last.rpartition(": ")[2]) from None
            raise LabError(f"{e}; its last line: {last}" if last else str(e)) from None
        ready.unlink(missing_ok=True)  # read: the ports live on in BrokerInfo
    except BaseException:
        processes.stop_process(proxy, 2)
        raise
    return proxy, ports["listen"], ports["control"]


def port_error(port: int, reason: str) -> LabError:
    """The one-line error for an asked-for client ``port`` that cannot be bound, for ``reason`` (the OS's words)."""
    problem = "is already in use" if "in use" in reason.lower() else f"cannot be bound ({reason})"
    return LabError(f"port {port} on 127.0.0.1 {problem}; choose another port or omit it to let the OS choose one")


def set_upstream(control_port: int, broker_port: int, proxy_log: Path) -> None:
    """Tell the proxy on ``control_port`` to forward new client connections to ``127.0.0.1:broker_port``."""
    try:
        reply = control(control_port, {"cmd": "upstream", "host": "127.0.0.1", "port": broker_port})
    except (OSError, ValueError) as e:
        raise LabError(f"lab proxy control on 127.0.0.1:{control_port} did not answer ({e}); see {proxy_log}") from None
    if not reply.get("ok"):
        raise LabError(f"lab proxy refused upstream 127.0.0.1:{broker_port}: {reply.get('error')}; see {proxy_log}")
