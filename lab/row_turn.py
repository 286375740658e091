"""A matrix row's notebook, started ahead, waits here for its turn.

Protocol (one scenario at a time, ``lab matrix --jobs 1``): the matrix
starts row *n+1*'s papermill while row *n* runs. Row *n+1*'s kernel starts,
imports what its run and its plots need, then waits in :func:`await_turn`
until its turn file exists. The matrix creates that file as soon as row
*n*'s run is over (its ``report.json`` is written, or its papermill ended),
while row *n*'s notebook still draws its plots. The runs themselves never
overlap; only the notebooks' start and end do (measured: 1.9 s before a row's
run and 1.2 s after it, of a 5 s row).

No delivery effect: nothing is read or written before the turn.
``LAB_ROW_AHEAD=off`` starts each row's notebook only when the row before has
ended (``bench/matrix.py --ahead-pair`` measures the two side by side).
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path

from lab.errors import choices_error

#: What a row's run and its plots import (lab.notebook, which the template's setup cell imports, has the rest).
WARM_MODULES = ("ipywidgets", "pandas", "plotly.graph_objects", "lab.plots", "lab.ui", "lab.auditor")


AHEAD_CHOICES = ("on", "off")


def ahead(env=None) -> bool:
    """Whether one-at-a-time rows start ahead (``LAB_ROW_AHEAD``, default ``on``).

    Raises
    ------
    LabError
        A value other than ``on`` or ``off``, named with them.
    """
    value = (os.environ if env is None else env).get("LAB_ROW_AHEAD", "on").strip().lower()
    if value not in AHEAD_CHOICES:
        raise choices_error("LAB_ROW_AHEAD", value, AHEAD_CHOICES)
    return value == "on"


def await_turn(turn: str | os.PathLike, poll_s: float = 0.02) -> float:
    """Import :data:`WARM_MODULES`, then wait until the file ``turn`` exists; the seconds waited.

    ``turn`` empty: no wait (a row started when its turn had come). The kernel
    ends itself (``os._exit``) when its papermill is gone before the turn came:
    the matrix was interrupted, and nothing of the row had started.
    """
    for name in WARM_MODULES:
        importlib.import_module(name)
    if not turn:
        return 0.0
    path, parent, t0 = Path(turn), os.getppid(), time.monotonic()
    while not path.exists():
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(poll_s)
    return round(time.monotonic() - t0, 3)
