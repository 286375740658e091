"""What papermill's notebook writes cost its own process: the executed notebook written at every cell, or once.

By default papermill writes the executed notebook at the start and at the end
of every cell (markdown cells included), so that a long headless run can be
watched. Each write serialises and validates the whole notebook, and a lab
notebook carries plotly.js (about 4.8 MB, embedded once so that its plots
render offline), so each write of a 5 MB notebook costs the papermill process
a fraction of a CPU second, while the kernel and the runs wait for nothing.
With ``request_save_on_cell_execute=False`` (the CLI's
``--no-request-save-on-cell-execute``) the notebook is written once, when
papermill ends, and also when a cell fails (papermill writes it before it
raises).

After one execution not counted (the first imports papermill), each round
executes every item once with each side, the sides in turns (which goes first
alternates), in a fresh runs directory (:func:`bench.notebooks.execute`), and
records the papermill process's CPU seconds (``time.process_time``: papermill
runs in it; the kernel and the runs are other processes) and the wall time. The
items (``--item``, repeatable): ``04_semantics_matrix`` (no Spark: it reads
a results table) and ``02_direct_kafka`` with the test suite's small
parameters, as ``tests/notebooks`` runs them; ``matrix-row``, the template
``lab matrix`` executes per row (``lab/templates/scenario.ipynb``), with a
plain 1,000-event row.

Run with ``python bench/notebook_saves.py [--rounds N] [--item NAME ...] [--out FILE]``; prints one JSON
object and writes it to ``FILE`` (default ``bench/results/notebook_saves.json``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench`, `lab` and `tests` importable from the checkout

from bench.machine import core_seconds, machine  # noqa: E402
from bench.notebooks import execute, small_params  # noqa: E402
from bench.testbed import emit, summary  # noqa: E402

#: side → whether papermill writes the notebook at each cell's start and end.
SIDES = {"every cell": True, "once": False}
ITEMS = ("04_semantics_matrix", "matrix-row", "02_direct_kafka")


def notebook_and_params(item: str, work: Path) -> tuple[Path, dict]:
    """The notebook ``item`` executes and its parameters (a row's report and runs go into ``work``)."""
    if item == "matrix-row":
        from lab.matrix.runner import TEMPLATE

        return TEMPLATE, dict(INTERACTIVE=False, PARAMS={"pipeline": "plain", "events": 1000, "rate": 0},
                              REPORT=str(work / "report.json"), RUNS_DIR=str(work / "runs"))
    return ROOT / "notebooks" / f"{item}.ipynb", dict(small_params()[item], INTERACTIVE=False)


def execute_once(item: str, save_each_cell: bool) -> dict:
    """Execute ``item`` once; papermill's CPU seconds, the wall time, the notebook's cells and size."""
    with tempfile.TemporaryDirectory(prefix="lab-bench-saves-") as tmp:
        work = Path(tmp)
        path, params = notebook_and_params(item, work)
        c0 = time.process_time()  # this process, its threads included, its children not
        row = execute(path, params, work, save_each_cell=save_each_cell)
        cpu = time.process_time() - c0
        if not row["ok"]:
            raise SystemExit(f"{item} failed: {row['error']}")
        import nbformat

        out = work / path.name
        cells = len(nbformat.read(out, as_version=4).cells)
        return {"cpu_s": cpu, "wall_s": row["seconds"], "cells": cells, "mb": out.stat().st_size / 1e6}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--item", action="append", choices=ITEMS, help=f"default: all of {', '.join(ITEMS)}")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "notebook_saves.json"))
    a = ap.parse_args(argv)
    items = a.item or list(ITEMS)
    core_s = core_seconds()  # a quiet machine's speed, before the rounds: figures from two machines compare
    rounds = {item: {side: [] for side in SIDES} for item in items}
    execute_once(items[0], True)  # not counted: the first execution also imports papermill and its kernel client
    for n in range(a.rounds):
        for item in items:
            order = list(SIDES.items()) if n % 2 == 0 else list(SIDES.items())[::-1]  # neither side always first
            for side, save_each_cell in order:
                rounds[item][side].append(execute_once(item, save_each_cell))
                print(f"{item:<22} {side:<11} {rounds[item][side][-1]}", file=sys.stderr, flush=True)
    figures = {}
    for item, sides in rounds.items():
        figures[item] = {side: {"papermill_cpu_s": summary([r["cpu_s"] for r in rs]),
                                "wall_s": summary([r["wall_s"] for r in rs]),
                                "cells": rs[0]["cells"], "notebook_mb": round(rs[0]["mb"], 2), "n": len(rs)}
                         for side, rs in sides.items()}
        cpu = {side: figures[item][side]["papermill_cpu_s"]["median"] for side in SIDES}
        figures[item]["papermill_cpu_s_saved"] = round(cpu["every cell"] - cpu["once"], 3)
    out = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine() | {"core_seconds_before": core_s},
        "load_average_at_end": os.getloadavg(),
        "sides": {"every cell": "papermill's default: written at each cell's start and end",
                  "once": "request_save_on_cell_execute=False: written when papermill ends (or a cell fails)"},
        "figures": figures,
        "rounds": {item: {side: [{k: round(v, 3) for k, v in r.items()} for r in rs] for side, rs in sides.items()}
                   for item, sides in rounds.items()},
    }
    emit(out, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
