"""How long each notebook takes to execute, headless, on this machine: the times the workshop guide is built from.

Every notebook (and, with ``--solutions``, every solutions notebook) is
executed by papermill in its own fresh runs directory, one at a time, with
``INTERACTIVE = False`` and either its default parameters (``--params
default``: what a learner runs) or the test suite's small ones (``--params
small``, ``tests/notebooks/test_notebooks.py``'s ``SMALL``). Recorded per
notebook: the wall time from papermill's start to its end (kernel start,
broker start and every run included), whether it finished without an error,
the parameters, the load average and the one-core loop's seconds just before
(:func:`bench.machine.core_seconds`); and the machine's cores.

A notebook's time here is machine time only: reading, predicting and
discussing come on top (``docs/workshop.md`` says how much it plans for that).

Run with ``python bench/notebooks.py [--params default|small] [--solutions]
[--only STEM ...] [--out FILE]`` (default ``bench/results/notebooks.json``;
an existing file is updated notebook by notebook, so a partial run keeps the others;
``<params>_topic_minutes`` is the topic notebooks' sum).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import core_seconds  # noqa: E402


def small_params() -> dict:
    from tests.notebooks.test_notebooks import SMALL

    return SMALL


def execute(path: Path, params: dict, work: Path, save_each_cell: bool = True) -> dict:
    """Execute one notebook with papermill in a runs directory of its own; its wall time and outcome.

    ``save_each_cell``: papermill's default, the executed notebook written at each cell's start and end
    (False: once, at the end; ``bench/notebook_saves.py`` compares the two).
    """
    from lab.broker import shared as shared_broker
    from tests.notebooks.headless import execute_headless

    runs = work / "runs"
    os.environ["LAB_RUNS_DIR"] = str(runs)
    started = time.monotonic()
    error = None
    try:
        execute_headless(path, work / path.name, params, save_each_cell=save_each_cell)
    except Exception as e:  # recorded, not raised: the other notebooks still get their figure
        error = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
    finally:
        shared_broker.stop_detached(runs / "cluster")
    took = time.monotonic() - started
    return {"seconds": round(took, 1), "minutes": round(took / 60, 1), "ok": error is None, "error": error,
            "runs": len(list(runs.glob("*/report.json")) + list(runs.glob("cluster/*/report.json"))),
            "params": params, "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", choices=("default", "small"), default="default")
    ap.add_argument("--solutions", action="store_true", help="also the solutions notebooks")
    ap.add_argument("--only", action="append", default=[], help="a notebook stem (repeatable)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "notebooks.json"))
    a = ap.parse_args(argv)
    paths = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if a.solutions:
        paths += sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb"))
    if a.only:
        paths = [p for p in paths if p.stem in a.only]
    out = Path(a.out)
    results = json.loads(out.read_text()) if out.is_file() else {}
    results.setdefault("cpus", os.cpu_count())
    table = results.setdefault(a.params, {})
    small = small_params() if a.params == "small" else {}
    for path in paths:
        key = f"solutions/{path.stem}" if path.parent.name == "solutions" else path.stem
        params = {"INTERACTIVE": False}
        if a.params == "small":
            params = dict(small.get(path.stem, {}), INTERACTIVE=False) if key == path.stem else \
                {"INTERACTIVE": False, "EVENTS": 1500}
        core_s = core_seconds()  # the machine's speed just before: one hour's figures differ from another's
        with tempfile.TemporaryDirectory(prefix="lab-bench-nb-") as tmp:
            row = execute(path, params, Path(tmp)) | {"core_seconds_before": core_s}
        table[key] = row
        print(f"{key:<40} {row['seconds']:7.1f} s  {'ok' if row['ok'] else row['error']}", flush=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
    results[f"{a.params}_topic_minutes"] = topic_minutes(table)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"topic notebooks, {a.params} parameters: {results[f'{a.params}_topic_minutes']} min in all")
    return 0


def topic_minutes(table: dict) -> float:
    """The topic notebooks' machine time in all, in minutes (the figure docs/workshop.md quotes)."""
    return round(sum(r["seconds"] for k, r in table.items() if not k.startswith("solutions/")) / 60, 1)


if __name__ == "__main__":
    raise SystemExit(main())
