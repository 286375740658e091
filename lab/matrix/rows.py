"""A matrix row's papermill process: started ahead, it waits for its turn; interrupted, it may end its notebook.

Protocol (one scenario at a time, ``lab matrix --jobs 1``): the matrix
starts row *n+1*'s papermill while row *n* runs, once row *n* has a batch
done (:class:`BatchWatch`: its driver's start is over). Row *n+1*'s kernel
starts, imports what its run and its plots need (:func:`import_for_run`),
and starts its run: the run directory, the sink, the ledger, and its first
driver, which brings its JVM, session and Python workers up and then waits
as a standby does (:mod:`lab.run.driver_process`). The run then waits in
:func:`wait_for_turn` until its turn file exists. The matrix creates that
file (:func:`give_turn`) as soon as row *n*'s run is over (its
``report.json`` is written, or its papermill ended), while row *n*'s
notebook still draws its plots. Only then does row *n+1*'s run read its
broker, create its topic and start its producer, and its driver has its
turn. The runs' broker, topics and faults never overlap; only the
notebooks' start and end and the first driver's start do (measured: 1.9 s
before a row's run and 1.2 s after it, of a 5 s row; the driver's start
about 2.5 s).

No delivery effect: nothing reads from or writes to the broker or the topic
before the turn, the run's sink has only its empty tables, and the waiting
driver has not read its checkpoint (a standby's rule, :class:`lab.pipelines.driver.DriverContext`).
``LAB_ROW_AHEAD=off`` starts each row's notebook only when the row before has
ended (``bench/matrix.py --ahead-pair`` measures the two side by side).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import time
from pathlib import Path

from lab import events as ev
from lab.errors import LabError
from lab.events import EVENTS_FILE, EventTail

#: What a row's run and its plots import (lab.notebook, which the template's setup cell imports, has the rest).
WARM_MODULES = ("ipywidgets", "pandas", "plotly.graph_objects", "lab.views.plots", "lab.views.panel",
                "lab.audit.auditor")
#: Seconds after a row's turn when the next row starts ahead even before the row has a batch done.
AHEAD_AFTER_S = 10.0


def turn_path(row_dir: Path) -> Path:
    """The file whose creation gives the row in ``row_dir``, started ahead, its turn."""
    return Path(row_dir) / "turn"


def give_turn(row_dir: Path) -> None:
    """Let the row in ``row_dir``, started ahead, run."""
    turn_path(row_dir).touch()


class BatchWatch:
    """Whether the row in ``row_dir`` has a run that logged a finished batch (its driver is up: the next row may start).

    Polled while the row runs: each run's ``events.jsonl`` is read from where
    the last poll stopped (:class:`lab.events.EventTail`), a torn last line kept
    for the next.
    """

    def __init__(self, row_dir: Path) -> None:
        self.runs = Path(row_dir) / "lab-runs"
        self.tails: dict[Path, EventTail] = {}
        self.seen = False

    def done(self) -> bool:
        if self.seen:  # once seen, no more reading
            return True
        for events in self.runs.glob(f"*/{EVENTS_FILE}"):
            tail = self.tails.setdefault(events, EventTail(events.parent))
            self.seen = self.seen or any(e["type"] == ev.BATCH_DONE for e in tail.read_new())
        return self.seen


def ahead(env=None) -> bool:
    """Whether one-at-a-time rows start ahead (``LAB_ROW_AHEAD``, default ``on``; read as the other on/off switches).

    Raises
    ------
    LabError
        A value that is not on or off, named with the two.
    """
    from lab.host.env import switch

    return switch(os.environ if env is None else env, "LAB_ROW_AHEAD")


def import_for_run() -> None:
    """Import :data:`WARM_MODULES` (a row started ahead does it while the row before runs)."""
    for name in WARM_MODULES:
        importlib.import_module(name)


def wait_for_turn(turn: str | os.PathLike, poll_s: float = 0.02) -> float:
    """Wait until the file ``turn`` exists; the seconds waited.

    Called by the row's run once its first driver has started
    (:meth:`lab.run.supervisor.Run.start`'s ``hold``), before it touches the broker.

    Raises
    ------
    LabError
        When this kernel's papermill is gone before the turn came (the matrix was
        interrupted): the run then ends what it started.
    """
    path, parent, t0 = Path(turn), os.getppid(), time.monotonic()
    while not path.exists():
        if os.getppid() != parent:
            raise LabError("the matrix ended before this row's turn came")
        time.sleep(poll_s)
    return round(time.monotonic() - t0, 3)


#: Seconds an interrupted matrix gives a row whose run is over to finish its notebook (its plots: about 1 s).
FINISH_GRACE_S = 15.0


def stop_rows(started: list) -> None:
    """End every row's papermill and its kernel (a session of its own), as an interrupted matrix does.

    ``started``: the rows' papermill processes, each with its ``row_dir``. A row
    whose run is over (its ``report.json`` written) first ends its notebook, for
    up to :data:`FINISH_GRACE_S`: its report is kept, so running the matrix again
    will not redo the row, and its executed notebook must then be whole, plots
    included (measured: cut in its plots, the notebook could not be exported).
    """
    from lab.host import processes

    for proc in started:
        if proc.poll() is None and (proc.row_dir / "report.json").exists():
            try:
                proc.wait(timeout=FINISH_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
    for proc in started:
        processes.stop_tree(proc, grace_s=10)
