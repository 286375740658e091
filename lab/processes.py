"""Start, watch and end the processes the lab owns, by PID only.

Every child the lab starts gets its own process group, so a crash is one
``killpg`` of exactly that group, and the lab never ends a process it did not
start. On Linux, children also get ``PR_SET_PDEATHSIG`` so they die if the
control process itself is killed before it can clean up.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import closing

from lab.errors import LabError


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def spawn(args, *, log_path=None, env=None, cwd=None, die_with_parent=True) -> subprocess.Popen:
    """Start ``args`` as the leader of a new process group.

    Parameters
    ----------
    args : list of str
    log_path : path, optional
        stdout and stderr go there (appended); otherwise to /dev/null.
    env : dict, optional
    cwd : path, optional
    die_with_parent : bool
        Kill the child when the thread that started it exits (Linux). Off for
        processes that must outlive the CLI call that started them.
    """
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            [str(a) for a in args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )
    finally:
        if log_path:
            out.close()


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def group_alive(pgid: int) -> bool:
    """True if any process of group ``pgid`` is still running (zombies excluded on Linux)."""
    try:
        os.killpg(pgid, 0)
    except OSError:
        return False
    if os.path.isdir("/proc"):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields_ = f.read().rsplit(")", 1)[1].split()
                    if int(fields_[2]) == pgid and fields_[0] != "Z":
                        return True
                except (OSError, IndexError, ValueError):
                    continue
        return False
    return True


def kill_group(pgid: int, sig: int = signal.SIGKILL, wait_s: float = 10.0) -> bool:
    """Send ``sig`` to process group ``pgid`` and wait until none of it is left.

    Returns True when the group is gone. Escalates to SIGKILL after ``wait_s``.
    """
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return True
        time.sleep(0.05)
    if sig != signal.SIGKILL:
        return kill_group(pgid, signal.SIGKILL, wait_s)
    return not group_alive(pgid)


def stop_process(proc: subprocess.Popen, grace_s: float = 5.0) -> int | None:
    """End a child we started: SIGTERM to its group, SIGKILL after ``grace_s``; reap it."""
    if proc.poll() is None or group_alive(proc.pid):
        kill_group(proc.pid, signal.SIGTERM, grace_s)
    try:
        return proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid, signal.SIGKILL, grace_s)
        return proc.wait(timeout=grace_s)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_port_free(port: int) -> None:
    """Raise :class:`LabError` if ``port`` on 127.0.0.1 is taken."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            raise LabError(f"port {port} on 127.0.0.1 is already in use; choose another port or omit it to pick a free one") from None


def wait_for_port(host: str, port: int, timeout_s: float, proc: subprocess.Popen | None = None, what: str = "service") -> None:
    """Wait until ``host:port`` accepts connections; fail fast if ``proc`` exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise LabError(f"{what} exited with status {proc.returncode} before listening on {host}:{port}")
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.02)
    raise LabError(f"{what} did not listen on {host}:{port} within {timeout_s:g} s")
