"""What runs inside a pipeline driver process: ``python -m lab.pipelines.driver RUN_DIR``.

The supervisor starts this in its own process group. It reads the run's
``config.json``, ``broker.json`` and ``sink.json``, then hands a
:class:`DriverContext` to the pipeline's ``run(ctx)``.

Named fault points
------------------
A pipeline calls :meth:`DriverContext.point` at each named place in a
batch. When the fault plan has a crash planned there, the driver writes a
``fault-point`` event and waits; the supervisor, watching the timeline,
SIGKILLs the whole process group. The crash is therefore a real kill at an
exact place, and the same plan gives the same outcome.

A standby's turn
----------------
A driver started with ``LAB_DRIVER_STANDBY=FILE`` is the next attempt's,
started ahead (:mod:`lab.run.driver_process`). Its pipeline does what has no
delivery effect (imports, JVM, SparkSession, Python workers), then calls
:meth:`DriverContext.await_turn`, which returns once ``FILE`` exists: the
supervisor creates it after the driver it replaces is dead (for the first
driver, started while the broker starts: once the topic and the producer are
there). Only then does the standby say ``driver-ready``, read the plan's
remaining faults and the broker, and touch the checkpoint, the topic or the
sink. A SIGTERM while it waits ends it.

The Spark UI
------------
With ``spark_ui`` in the run's configuration (``LAB_SPARK_UI``, ``lab run
--spark-ui``) every Spark driver has its UI up on 127.0.0.1, a standby's too,
but only the run's driver says where: ``spark-ui`` (URL, attempt, PID, tab)
once its session is up, or, for a standby, at its turn. A timeline never
names the UI of a driver that has not had its turn, so its last ``spark-ui``
is the UI of the driver that runs the pipeline now (or last did).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from lab import events as ev
from lab.config import RunConfig
from lab.errors import DRIVER_CONFIG_EXIT, DriverConfigError
from lab.events import EventLog, EventTail, read_events, read_progress, write_progress
from lab.faults.catalogue import FAULTS
from lab.faults.plan import Fault

#: Seconds a driver waits at a fault point for its SIGKILL before dying on its own.
POINT_WAIT_S = 30.0


class DriverContext:
    """The pipeline's window on its run: config, timeline, progress and fault points."""

    def __init__(self, run_dir: Path | str) -> None:
        self.run_dir = Path(run_dir)
        self.config = RunConfig.from_json((self.run_dir / "config.json").read_text())
        self.events = EventLog(self.run_dir, "driver")
        self.stopping = False
        self.attempt = int(os.environ.get("LAB_DRIVER_ATTEMPT", "1"))
        go = os.environ.get("LAB_DRIVER_STANDBY")
        self.standby_go: Path | None = Path(go) if go else None
        # A standby reads them at its turn: a first driver started ahead starts before the broker.
        self.bootstrap: str | None = None
        self.pending: list[Fault] = []
        self._ui_said = False
        if self.standby_go is None:
            self._read_run_state()

    def _read_run_state(self) -> None:
        """The broker's address and the plan's faults not yet fired, as the run's files say now."""
        self.bootstrap = json.loads((self.run_dir / "broker.json").read_text())["bootstrap"]
        fired = {e.get("index") for e in read_events(self.run_dir) if e["type"] in (ev.FAULT, ev.FAULT_POINT)}
        self.pending = [f for f in self.config.fault_plan if f.index not in fired]

    def ready(self) -> None:
        """Say ``driver-ready``: from here on faults may target this driver."""
        self.events.write(ev.DRIVER_READY, pid=os.getpid(), attempt=self.attempt)

    def await_turn(self) -> None:
        """A standby waits here for its turn (see the module docstring); any other driver goes on at once.

        Call it after the start-up work that has no delivery effect and before
        anything that reads the checkpoint, the topic or the sink.
        """
        if self.standby_go is None:
            return
        self.phase("standby")
        parent = os.getppid()
        while not self.standby_go.exists():
            if self.stopping or os.getppid() != parent:
                os._exit(0)  # the run ended (or its supervisor died) before this standby's turn came
            time.sleep(0.02)
        self.standby_go = None
        self._read_run_state()  # what happened while it waited: faults fired, a broker restarted
        self.ready()
        self.phase("turn")
        self._say_spark_ui()

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    def last_batch(self) -> int:
        """The last batch this run completed (-1 before the first)."""
        return read_progress(self.run_dir).get("batch", -1)

    def point(self, name: str, batch: int) -> None:
        """Reach named point ``name`` of ``batch``; block here if a crash is planned at it.

        A fault the supervisor carries out at the point (``leader-unreachable``) holds the driver
        here until the supervisor's ``fault`` event says it was carried out, then the batch goes on.
        """
        for fault in list(self.pending):
            if FAULTS[fault.kind].by == "proxy" and fault.point == name and fault.batch == batch:
                self.pending.remove(fault)
                self.events.write(ev.FAULT_POINT, index=fault.index, kind=fault.kind, point=name, batch=batch,
                                  pid=os.getpid())
                self._await_fault(fault.index)
        for fault in self.pending:
            if fault.kind == "driver-crash" and fault.point == name and fault.batch == batch:
                self.pending.remove(fault)
                self.events.write(ev.FAULT_POINT, index=fault.index, kind=fault.kind, point=name, batch=batch,
                                  pid=os.getpid())
                deadline = time.monotonic() + POINT_WAIT_S
                while time.monotonic() < deadline:
                    time.sleep(0.05)
                # No supervisor came: die as the crash would have.
                os._exit(70)

    def _await_fault(self, index: int) -> None:
        """Return once the timeline has the supervisor's ``fault`` event of plan entry ``index``."""
        tail, deadline = EventTail(self.run_dir), time.monotonic() + POINT_WAIT_S
        while time.monotonic() < deadline:
            if any(e["type"] == ev.FAULT and e.get("index") == index and e.get("source") == "supervisor"
                   for e in tail.read_new()):  # each line read once
                return
            time.sleep(0.05)
        raise RuntimeError(f"the supervisor did not carry out fault {index} within {POINT_WAIT_S:g} s")

    def phase(self, name: str) -> None:
        """Record that this driver's start-up reached ``name``.

        ``jvm``, ``session``, ``workers``, ``query``; a standby's ``standby``
        (it waits) and ``turn`` (it has its turn). At ``session`` a driver
        that is the run's says where its Spark UI is (see the module docstring).
        """
        self.events.write(ev.DRIVER_PHASE, phase=name, attempt=self.attempt)
        if name == "session":
            self._say_spark_ui()

    def _say_spark_ui(self) -> None:
        """Write ``spark-ui`` once, when the run asked for the UI, this driver has its turn and its UI is up."""
        if not self.config.spark.spark_ui or self.standby_go is not None or self._ui_said:
            return
        from lab.spark.session import UI_TABS, ui_url

        url = ui_url()
        if url is None:  # no SparkContext yet: its "session" phase says it
            return
        self._ui_said = True
        self.events.write(ev.SPARK_UI, url=url, attempt=self.attempt, pid=os.getpid(),
                          tab=UI_TABS.get(self.config.pipeline))

    def task_failure_due(self, batch: int) -> Fault | None:
        """The planned task failure for ``batch``, if any (consumed by this call)."""
        return self.fault_due("task-failure", batch)

    def fault_due(self, kind: str, batch: int) -> Fault | None:
        """The planned fault of ``kind`` (one the driver carries out) for ``batch``, if any; its ``fault`` event.

        Consumed by this call: a restarted driver reads the plan's faults not yet fired.
        """
        for fault in self.pending:
            if fault.kind == kind and fault.batch == batch:
                self.pending.remove(fault)
                self.events.write(ev.FAULT, index=fault.index, kind=fault.kind, batch=batch, point=fault.point)
                return fault
        return None

    def batch_start(self, batch: int, ranges: dict[int, tuple[int, int]], rows: int, **extra) -> None:
        self.events.write(ev.BATCH_START, batch=batch, rows=rows,
                          ranges={str(p): list(r) for p, r in sorted(ranges.items())}, attempt=self.attempt, **extra)

    def batch_done(self, batch: int, rows: int, **extra) -> None:
        self.events.write(ev.BATCH_DONE, batch=batch, rows=rows, attempt=self.attempt, **extra)

    def progress(self, positions: dict[int, int], batch: int) -> None:
        write_progress(self.run_dir, positions, batch, attempt=self.attempt)

    def install_signal_handlers(self) -> None:
        """SIGTERM asks for a clean stop after the current batch."""

        def on_term(signum, frame):
            self.stopping = True

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m lab.pipelines.driver RUN_DIR", file=sys.stderr)
        return 2
    import importlib

    from lab.registry import PIPELINES

    ctx = DriverContext(argv[0])
    ctx.install_signal_handlers()
    spec = PIPELINES[ctx.config.pipeline]
    module = importlib.import_module(spec.module)
    if ctx.standby_go is None and not spec.ready_when_running:
        ctx.ready()
    try:
        module.run(ctx)
    except DriverConfigError as e:
        ctx.events.write(ev.DRIVER_CONFIG_ERROR, error=str(e), attempt=ctx.attempt)
        print(f"error: {e}", file=sys.stderr, flush=True)
        return DRIVER_CONFIG_EXIT
    ctx.events.write(ev.DRIVER_STOP, pid=os.getpid(), attempt=ctx.attempt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
