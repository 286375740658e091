"""A run's driver process: started, killed and stopped by the PID the lab started, with its Spark children.

One driver at a time (``python -m lab.driver RUN_DIR``, in its own process
group, ``LAB_DRIVER_ATTEMPT`` = its attempt number). A kill is a real
``SIGKILL`` of the driver's group; PySpark's Python daemons, which leave
that group, are found by scanning the driver's process tree
(:class:`lab.processes.ChildGroups`) and ended with it. Nothing here writes
the run's timeline: :class:`lab.supervisor.Run` does, from what these
methods return.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from lab import processes


class DriverProcess:
    """The run's current driver process (``proc``), its attempt number and what it left behind."""

    def __init__(self, run_dir: Path, on_child_group) -> None:
        """``on_child_group(pgid, created, cmd, driver_pid)`` is called for each new group a driver's child makes."""
        self.run_dir = Path(run_dir)
        self.proc = None
        self.attempt = 0
        self.started_at = 0.0
        self.lock = threading.RLock()
        self._killed: set[int] = set()
        self._groups = processes.ChildGroups(on_new=lambda pgid, created, cmd: on_child_group(pgid, created, cmd, self.pid))

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        proc = self.proc
        return proc is not None and proc.poll() is None

    def start(self) -> int:
        """Start the next attempt's driver; its PID."""
        self.attempt += 1
        env = dict(os.environ, LAB_DRIVER_ATTEMPT=str(self.attempt), PYTHONUNBUFFERED="1")
        with self.lock:
            self.proc = processes.spawn([sys.executable, "-m", "lab.driver", self.run_dir],
                                        log_path=self.run_dir / "driver.log", env=env, cwd=self.run_dir)
        self.started_at = time.monotonic()
        return self.proc.pid

    def exited_on_its_own(self) -> bool:
        """The driver has exited and the lab did not kill it."""
        proc = self.proc
        return proc is not None and proc.poll() is not None and proc.pid not in self._killed

    def scan_children(self) -> None:
        """Look for new process groups of the live driver's children (PySpark's daemons)."""
        if self.alive():
            self._groups.scan(self.proc.pid)

    def kill(self) -> int | None:
        """SIGKILL the driver's group and its children's groups, and wait for it; its PID."""
        with self.lock:
            proc = self.proc
            if proc is None:
                return None
            self._killed.add(proc.pid)
            self._groups.scan(proc.pid)
            processes.kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
            self._groups.kill()
            return proc.pid

    def reap(self) -> None:
        """After an exit on its own: whatever is left in its group and its children's groups goes."""
        with self.lock:
            self._killed.add(self.proc.pid)
            processes.kill_group(self.proc.pid, signal.SIGKILL, 2)
            self._groups.kill()

    def stop(self, grace_s: float) -> dict | None:
        """SIGTERM, then SIGKILL after ``grace_s``; what ``final-stop`` records (None without a driver).

        ``how``: ``graceful`` (it stopped in time), ``killed-after-timeout``, or ``gone``
        (it had already exited).
        """
        with self.lock:
            proc = self.proc
            if proc is None:
                return None
            self._groups.scan(proc.pid)
            began = time.monotonic()
            how = "gone"
            if proc.poll() is None:
                how = "graceful"
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=grace_s)
                except Exception:
                    how = "killed-after-timeout"
            # Whatever the driver left in its group (a JVM, Python workers) goes too.
            processes.kill_group(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=5)
            except Exception:
                pass
            self._groups.kill()
            self._killed.add(proc.pid)
            return {"how": how, "pid": proc.pid, "code": proc.returncode,
                    "waited_s": round(time.monotonic() - began, 3)}

    def kill_remaining(self) -> None:
        """End whatever of the driver is still alive (cleanup; safe to call more than once)."""
        with self.lock:
            if self.proc is not None:
                if processes.group_alive(self.proc.pid):
                    self._groups.scan(self.proc.pid)
                    processes.kill_group(self.proc.pid, signal.SIGKILL)
                try:
                    self.proc.wait(timeout=5)
                except Exception:
                    pass
            self._groups.kill()
