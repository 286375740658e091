"""A driver-pause's life, for the supervisor: the stop, the replacement, the SIGCONT, the zombie's end.

Protocol
--------
:meth:`DriverPause.pause` is the fault's effect: ``SIGSTOP`` of the driver's groups
(:meth:`lab.run.driver_process.DriverProcess.pause`). The supervisor's loop then
calls :meth:`DriverPause.step` with the clock until :attr:`DriverPause.pending` is
false. With ``--on-pause wait`` the step due is the ``SIGCONT``, ``for=`` seconds
later. With ``--on-pause replace`` the stopped driver is set aside after
:data:`lab.faults.catalogue.PAUSE_REPLACE_AFTER_S` (``driver-replaced``) and the supervisor's
``start_replacement`` callback starts the next attempt; at ``for=`` the set-aside
driver is continued (``driver-resume``, ``zombie: true``) and runs beside its
replacement until it exits or :data:`lab.faults.catalogue.ZOMBIE_LIFETIME_S` pass, when it is
killed (``zombie-end``). While either is pending the run does not drain; a run that
ends otherwise (its deadline, a stop) first calls :meth:`DriverPause.finish`, which
continues a stopped driver and ends the zombie, so nothing writes while it is audited.
A pause whose driver died meanwhile (a driver-crash during it) ends with that driver:
no replacement, no SIGCONT (``driver-resume`` with ``alive: false``). The zombie's
``progress.json`` writes are not the run's progress (:attr:`DriverPause.zombie_attempts`).

Delivery guarantee: none of its own. It decides nothing a pipeline writes: the
zombie does what its pipeline's code and the broker let it do, which is the lesson.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lab import events as ev
from lab.faults.catalogue import PAUSE_REPLACE_AFTER_S, ZOMBIE_LIFETIME_S


class DriverPause:
    """At most one pause (and its zombie) at a time.

    Parameters
    ----------
    driver : lab.run.driver_process.DriverProcess
    events : lab.events.EventLog
        The supervisor's timeline writer.
    mode : str
        ``--on-pause`` resolved: ``wait`` or ``replace``.
    start_replacement : callable
        Starts the next attempt's driver (the supervisor counts it as a restart).
    """

    def __init__(self, driver, events, mode: str, start_replacement: Callable[[], None]) -> None:
        self.driver, self.events, self.mode = driver, events, mode
        self.start_replacement = start_replacement
        self._pause: dict | None = None
        self._zombie_end_at: float | None = None
        self.zombie_attempts: set[int] = set()  # attempts set aside: what they write is not the run's progress

    @property
    def pending(self) -> bool:
        """A driver is stopped, or its zombie is still there."""
        return self._pause is not None or self.driver.zombie is not None

    def pause(self, duration_s: float) -> dict:
        """SIGSTOP the driver's groups for ``duration_s``; what the fault's event records (``pid``, ``on_pause``)."""
        if self.pending:
            return {"pid": None, "on_pause": self.mode, "reason": "a paused driver (or its zombie) is still there"}
        pid = self.driver.pause()
        if pid is None:
            return {"pid": None, "on_pause": self.mode, "reason": "the driver had just exited"}
        now = time.monotonic()
        self._pause = {"pid": pid, "attempt": self.driver.attempt, "resume_at": now + duration_s, "zombie": False,
                       "replace_at": now + PAUSE_REPLACE_AFTER_S if self.mode == "replace" else None}
        return {"pid": pid, "on_pause": self.mode}

    def step(self, now: float) -> None:
        """Whatever is due now: the replacement, the SIGCONT, the zombie's end."""
        pause = self._pause
        if pause is not None and not pause["zombie"] and not (self.driver.alive() and self.driver.pid == pause["pid"]):
            self._pause = None  # killed while stopped (a driver-crash): its restart is the supervisor's
            self.events.write(ev.DRIVER_RESUME, pid=pause["pid"], attempt=pause["attempt"], zombie=False, alive=False)
            pause = None
        if pause is not None and pause["replace_at"] is not None and now >= pause["replace_at"]:
            pause["replace_at"], pause["zombie"] = None, True
            self.driver.set_aside()
            self.zombie_attempts.add(pause["attempt"])
            self.events.write(ev.DRIVER_REPLACED, pid=pause["pid"], attempt=pause["attempt"],
                              stopped_s=PAUSE_REPLACE_AFTER_S)
            self.start_replacement()
        if pause is not None and now >= pause["resume_at"]:
            self._resume()
            if pause["zombie"]:
                self._zombie_end_at = now + ZOMBIE_LIFETIME_S
        if self.driver.zombie is not None and (self.driver.zombie_exited() or
                                               (self._zombie_end_at is not None and now >= self._zombie_end_at)):
            self._end_zombie()

    def finish(self) -> None:
        """Before the run's last stop: continue a stopped driver (it gets its SIGTERM awake) and end the zombie."""
        if self._pause is not None:
            self._resume(at_run_end=True)
        if self.driver.zombie is not None:
            self._end_zombie()

    def _resume(self, **extra) -> None:
        pause, self._pause = self._pause, None
        pid = self.driver.resume(zombie=pause["zombie"])
        self.events.write(ev.DRIVER_RESUME, pid=pid if pid is not None else pause["pid"], attempt=pause["attempt"],
                          zombie=pause["zombie"], alive=pid is not None, **extra)

    def _end_zombie(self) -> None:
        self._zombie_end_at = None
        self.events.write(ev.ZOMBIE_END, **self.driver.end_zombie())
