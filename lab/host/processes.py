"""Start, watch and end the processes the lab owns, by PID only.

Every child the lab starts gets its own process group, so a crash is one
``killpg`` of exactly that group, and the lab never ends a process it did not
start. On Linux, children also get ``PR_SET_PDEATHSIG`` so they die if the
control process itself is killed before it can clean up.

Ports: the lab never picks a free port and hands it to another process (the
port can be taken in between: about one start in 25 failed that way). Each
child binds port 0, or a port the user asked for, itself; the lab then learns
the port from the child (a ready file, a log line) or from the OS with
:func:`listening_ports`, which only counts sockets of that exact PID.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time

import psutil

from lab.errors import LabError

#: Addresses a loopback-only listener shows in the OS's socket table. A JVM binds
#: 127.0.0.1 through an IPv6 socket, which the kernel lists as the v4-mapped form
#: (measured: the Spark master's two listeners show as ``::ffff:127.0.0.1``).
LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1")


def kill_when_parent_exits() -> None:
    """Ask the kernel to SIGKILL this process when the thread that started it exits (Linux; a ``preexec_fn``)."""
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
            preexec_fn=kill_when_parent_exits if die_with_parent else None,
        )
    finally:
        if log_path:
            out.close()


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie.

    A process we lack the rights to inspect counts as alive: it exists.
    """
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def group_alive(pgid: int) -> bool:
    """True if any process of group ``pgid`` is still running (zombies excluded).

    ``killpg(pgid, 0)`` alone also succeeds for a group of unreaped zombies, which
    would make :func:`kill_group` wait its whole grace period for processes that
    are already dead; hence the walk over all PIDs.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # the group exists; its members are looked at below
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return True
        except (OSError, psutil.NoSuchProcess):
            continue  # gone since psutil.pids() listed it
        except psutil.AccessDenied:
            return True  # in the group, state unreadable: assume it runs
    return False


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


def stop_tree(proc: subprocess.Popen, grace_s: float = 5.0) -> int | None:
    """:func:`stop_process`, then every process group its descendants started of their own (:class:`ChildGroups`).

    A Jupyter kernel is such a descendant: jupyter_client starts each in a session of its own, so a group kill
    of papermill misses it (measured: an interrupted ``lab matrix`` row's kernel stayed until its parent poller
    noticed papermill gone). The groups are found before the child is stopped: after, its descendants are
    orphans no longer under it.
    """
    groups = ChildGroups()
    if proc.poll() is None:  # not reaped yet, so its PID is still its own
        groups.scan(proc.pid)
    code = stop_process(proc, grace_s)
    groups.kill()
    return code


def wait_for_port(host: str, port: int, timeout_s: float, proc: subprocess.Popen | None = None,
                  what: str = "service") -> None:
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


def listening_ports(pid: int) -> list[int]:
    """TCP ports process ``pid`` itself listens on at 127.0.0.1, sorted.

    Only sockets in LISTEN state owned by ``pid`` count (not its children's, not
    other processes' on the same port); a listener on another address is ignored.
    An exited or unreadable process listens on nothing.
    """
    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []
    return sorted({c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN and c.laddr
                   and c.laddr.ip in LOOPBACK})


def read_log(path, offset: int = 0) -> str:
    """What a child's log got after byte ``offset`` (logs are appended across starts); ``""`` when unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def last_log_line(path) -> str:
    """The last non-empty line of a child's log (what a one-line error quotes), at most 300 characters."""
    try:
        with open(path, errors="replace") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        return lines[-1][:300] if lines else "(no output)"
    except OSError:
        return "(no log)"


class ChildGroups:
    """The process groups a child's descendants moved into, remembered so they can be ended with it.

    PySpark's ``daemon.py`` calls ``os.setpgid(0, 0)``: the Python daemon a JVM
    starts, and the workers it forks, leave the driver's process group, so one
    ``killpg`` of the driver misses them. :meth:`scan` walks the child's
    descendants (its parent chain, never a name) and remembers each group led by
    one of them; :meth:`kill` ends those groups, checking that each leader is the
    same process that was seen (a PID can be reused). Short-lived groups are
    remembered too when a scan sees them: Hadoop's ``Shell`` runs
    ``setsid bash -c 'echo $$'`` once to learn whether ``setsid`` works.

    Parameters
    ----------
    on_new : callable, optional
        Called as ``on_new(pgid, create_time, cmdline)`` for each group first seen
        (the supervisor writes it to the timeline, so leak checks find it by PID).
    """

    def __init__(self, on_new=None) -> None:
        self.on_new = on_new
        self.seen: dict[int, float] = {}

    def scan(self, pid: int) -> None:
        """Remember the groups led by descendants of ``pid`` outside ``pid``'s own group."""
        try:
            mine = os.getpgid(pid)
            descendants = psutil.Process(pid).children(recursive=True)
        except (OSError, psutil.Error):
            return
        for child in descendants:
            try:
                pgid = os.getpgid(child.pid)
                if pgid != child.pid or pgid == mine or pgid in self.seen:
                    continue
                self.seen[pgid] = child.create_time()
                if self.on_new:
                    self.on_new(pgid, self.seen[pgid], " ".join(child.cmdline()))
            except (OSError, psutil.Error):
                continue

    def kill(self) -> None:
        """SIGKILL every remembered group whose leader is still the process seen; forget them all."""
        for pgid, created in list(self.seen.items()):
            try:
                if psutil.Process(pgid).create_time() == created:
                    kill_group(pgid, signal.SIGKILL, 5)
            except psutil.Error:
                pass
            del self.seen[pgid]
