"""A run's driver process: started, killed and stopped by the PID the lab started, with its Spark children.

One driver at a time (``python -m lab.pipelines.driver RUN_DIR``, in its own process
group, ``LAB_DRIVER_ATTEMPT`` = its attempt number), and at most one standby:
the next attempt's driver, started ahead (``LAB_DRIVER_STANDBY`` = the file
that gives it its turn). A standby starts its JVM, its SparkSession and its
Python workers, then waits (:meth:`lab.pipelines.driver.DriverContext.await_turn`)
without reading the checkpoint, the topic or the sink; :meth:`DriverProcess.start`
promotes it by creating that file, after the driver it replaces is dead
(the first driver: once the broker, the topic and the producer are up). A
start then skips the start-up (``LAB_STANDBY``, :mod:`lab.host.start_tuning`).

A pause is a real ``SIGSTOP`` of the driver's group and its children's groups, and its end a
``SIGCONT``. A paused driver can be set aside (:meth:`DriverProcess.set_aside`) so that a
replacement starts while it is stopped; set aside, it is a *zombie*: it comes back when it is
continued, believing it still owns its work, until it exits or is killed (:meth:`end_zombie`).

A kill is a real ``SIGKILL`` of the driver's group; PySpark's Python daemons, which leave
that group, are found by scanning the driver's process tree
(:class:`lab.host.processes.ChildGroups`) and ended with it. Nothing here writes
the run's timeline: :class:`lab.run.supervisor.Run` does, from what these
methods return.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from lab.events import EventTail
from lab.host import processes


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
        self._groups = processes.ChildGroups(
            on_new=lambda pgid, created, cmd: on_child_group(pgid, created, cmd, self.pid))
        self.standby = None  # the next attempt's driver, started ahead and waiting for its turn
        self.standby_started_at = 0.0
        self._standby_groups = processes.ChildGroups(
            on_new=lambda pgid, created, cmd: on_child_group(pgid, created, cmd, self.standby_pid))
        self.log_path = self.run_dir / "driver.log"  # the current driver's output
        self._own_log = False  # once a zombie was set aside, each later driver writes driver-<attempt>.log
        self.zombie = None  # a paused driver set aside for a replacement: (Popen, attempt, log path, its groups)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        proc = self.proc
        return proc is not None and proc.poll() is None

    @property
    def standby_pid(self) -> int | None:
        return self.standby.pid if self.standby is not None else None

    def _spawn(self, attempt: int, log_path: Path, **env):
        env = dict(os.environ, LAB_DRIVER_ATTEMPT=str(attempt), PYTHONUNBUFFERED="1", **env)
        return processes.spawn([sys.executable, "-m", "lab.pipelines.driver", self.run_dir],
                               log_path=log_path, env=env, cwd=self.run_dir)

    def standby_log(self, attempt: int) -> Path:
        """A standby's output (its own file: the running driver's last lines stay in the current log)."""
        return self.run_dir / f"driver-{attempt}.log"

    def go_file(self, attempt: int) -> Path:
        """The file whose creation gives standby ``attempt`` its turn."""
        return self.run_dir / f"driver-{attempt}.go"

    def start_standby(self) -> int:
        """Start the next attempt's driver ahead, waiting for its turn; its PID (the live standby's, if one is)."""
        with self.lock:
            if self.standby is not None and self.standby.poll() is None:
                return self.standby.pid
            self.stop_standby()  # one that died waiting
            attempt = self.attempt + 1
            self.standby = self._spawn(attempt, self.standby_log(attempt),
                                       LAB_DRIVER_STANDBY=str(self.go_file(attempt)))
            self.standby_started_at = time.monotonic()
            return self.standby.pid

    def pause(self) -> int | None:
        """SIGSTOP the driver's group and its children's groups; its PID (None without a live driver)."""
        with self.lock:
            if not self.alive():
                return None
            self._groups.scan(self.proc.pid)
            for pgid in (self.proc.pid, *self._groups.seen):
                _signal_group(pgid, signal.SIGSTOP)
            _wait_stopped(self.proc.pid)  # a signal is delivered when the kernel gets to it: the event says "stopped"
            return self.proc.pid

    def resume(self, zombie: bool = False) -> int | None:
        """SIGCONT the paused driver (``zombie``: the one set aside); its PID (None when it is gone)."""
        with self.lock:
            if zombie:
                if self.zombie is None:
                    return None
                proc, groups = self.zombie[0], self.zombie[3].seen
            else:
                proc, groups = self.proc, self._groups.seen
            if proc is None or proc.poll() is not None:
                return None
            for pgid in (proc.pid, *groups):
                _signal_group(pgid, signal.SIGCONT)
            return proc.pid

    def set_aside(self) -> None:
        """The paused driver becomes the zombie, so that :meth:`start` starts its replacement.

        The replacement writes its own log (``driver-<attempt>.log``): the zombie still writes to its own.
        """
        with self.lock:
            groups = processes.ChildGroups(on_new=self._groups.on_new)
            groups.seen.update(self._groups.seen)
            self.zombie = (self.proc, self.attempt, self.log_path, groups)
            self._groups.seen.clear()
            self.proc = None
            self._own_log = True

    def end_zombie(self) -> dict | None:
        """SIGKILL the zombie's group and its children's, if still there; what ``zombie-end`` records (None without
        one).

        ``{"pid", "attempt", "code", "how", "last_log_line"}``; ``how``: ``exited`` (it had ended on its own:
        ``code`` is its status) or ``killed``.
        """
        with self.lock:
            if self.zombie is None:
                return None
            proc, attempt, log_path, groups = self.zombie
            how = "exited" if proc.poll() is not None else "killed"
            if how == "killed":
                groups.scan(proc.pid)  # what it started since it was set aside
            processes.kill_group(proc.pid, signal.SIGKILL, 5)
            groups.kill()
            try:
                proc.wait(timeout=5)
            except Exception:
                pass
            self._killed.add(proc.pid)
            self.zombie = None
            return {"pid": proc.pid, "attempt": attempt, "code": proc.returncode, "how": how,
                    "last_log_line": processes.last_log_line(log_path)}

    def zombie_exited(self) -> bool:
        """The zombie has ended on its own (it was continued and stopped writing, or it was told it is fenced)."""
        return self.zombie is not None and self.zombie[0].poll() is not None

    def start(self) -> tuple[int, float | None]:
        """Start the next attempt's driver, or give a live standby its turn.

        Returns its PID, and for a standby the seconds it had been started
        ahead (None for a driver started now). Call only once the previous
        driver is dead, or set aside as a zombie (:meth:`set_aside`): a standby
        reads the checkpoint as soon as it has its turn.

        Raises
        ------
        RuntimeError
            When the current driver is still alive (two drivers would share the run).
        """
        with self.lock:
            if self.alive():
                raise RuntimeError(f"driver {self.proc.pid} (attempt {self.attempt}) is alive: kill or set it aside "
                                   "first")
            self.attempt += 1
            ahead = None
            if self.standby is not None and self.standby.poll() is None:
                self.go_file(self.attempt).touch()
                self.proc, self.standby = self.standby, None
                ahead = round(time.monotonic() - self.standby_started_at, 3)
                self.log_path = self.standby_log(self.attempt)
                self._groups.seen.update(self._standby_groups.seen)
                self._standby_groups.seen.clear()
            else:
                self.stop_standby()  # one that died waiting: what it left goes, a driver starts now
                own = self._own_log or self.zombie is not None
                self.log_path = self.standby_log(self.attempt) if own else self.run_dir / "driver.log"
                self.proc = self._spawn(self.attempt, self.log_path)
        self.started_at = time.monotonic()
        return self.proc.pid, ahead

    def stop_standby(self) -> None:
        """End the standby, if there is one (it never had its turn: nothing of the run's is in flight).

        It stays :attr:`standby` until it is gone, so the groups its last scan finds name it.
        """
        with self.lock:
            standby = self.standby
            if standby is None:
                return
            self._standby_groups.scan(standby.pid)
            processes.kill_group(standby.pid, signal.SIGKILL)
            try:
                standby.wait(timeout=5)
            except Exception:
                pass
            self._killed.add(standby.pid)
            self._standby_groups.kill()
            self.standby = None

    def exited_on_its_own(self) -> bool:
        """The driver has exited and the lab did not kill it."""
        proc = self.proc
        return proc is not None and proc.poll() is not None and proc.pid not in self._killed

    def scan_children(self) -> None:
        """Look for new process groups of the live driver's, the zombie's and the standby's children (PySpark's
        daemons)."""
        if self.alive():
            self._groups.scan(self.proc.pid)
        zombie = self.zombie
        if zombie is not None and zombie[0].poll() is None:
            zombie[3].scan(zombie[0].pid)
        standby = self.standby
        if standby is not None and standby.poll() is None:
            self._standby_groups.scan(standby.pid)

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

    def stop(self, grace_s: float, limit_s: float) -> dict | None:
        """SIGTERM, then SIGKILL once ``grace_s`` pass without progress; what ``final-stop`` records (None without a
        driver).

        Progress is an event the driver writes to the run's timeline (a batch
        done, its receiver stopped); each one gives it ``grace_s`` more, up to
        ``limit_s`` in all. A driver still writing its last batches is not
        killed, and one that hangs is, within ``grace_s``. ``how``:
        ``graceful`` (it stopped in time), ``killed-after-timeout``, or ``gone``
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
                tail = EventTail(self.run_dir)
                tail.read_new()  # what came before the SIGTERM is not progress of the stop

                def progressed() -> bool:
                    return any(e.get("source") == "driver" for e in tail.read_new())

                if not self._wait_with_progress(proc, grace_s, progressed, max(limit_s, grace_s), began):
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

    @staticmethod
    def _wait_with_progress(proc, grace_s: float, progressed, limit_s: float, began: float) -> bool:
        """Wait for ``proc`` to exit (see :meth:`stop`); whether it did.

        ``progressed()``, asked about every 0.5 s: whether the driver progressed since it was last asked.
        """
        quiet_since = began
        while True:
            now = time.monotonic()
            end = min(quiet_since + grace_s, began + limit_s)
            if now >= end:
                return proc.poll() is not None
            try:
                proc.wait(timeout=min(0.5, end - now))
                return True
            except subprocess.TimeoutExpired:
                pass
            if progressed():
                quiet_since = time.monotonic()

    def kill_remaining(self) -> None:
        """End whatever of the driver, the zombie and the standby is still alive (cleanup; safe to call more than
        once)."""
        with self.lock:
            self.stop_standby()
            self.end_zombie()
            if self.proc is not None:
                if processes.group_alive(self.proc.pid):
                    self._groups.scan(self.proc.pid)
                    processes.kill_group(self.proc.pid, signal.SIGKILL)
                try:
                    self.proc.wait(timeout=5)
                except Exception:
                    pass
            self._groups.kill()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _wait_stopped(pid: int, timeout_s: float = 1.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                return
        except psutil.Error:
            return
        time.sleep(0.005)
