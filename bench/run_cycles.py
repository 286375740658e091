"""Back-to-back `lab run` scenarios: does any fail to start?

Runs ``--runs`` scenarios one after another through the command line, as a
workshop laptop would, cycling through every pipeline (each with a driver
crash, so a restart is part of every run), each starting and stopping its own
broker. A run fails when ``lab run`` exits non-zero or its report is missing;
the first line of its error is kept.

Run with ``python bench/run_cycles.py [--runs N] [--out FILE]``; prints one
JSON object (per-run pipeline, exit status, seconds, guarantee measured;
failures; durations min/median/max per pipeline) and writes it to ``FILE``
(default ``bench/results/run_cycles.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import machine  # noqa: E402

#: One small crash scenario per pipeline (a few seconds of events, the crash at a named point or a time).
SCENARIOS = {
    "plain": ["--events", "2000", "--rate", "1000", "--faults", "driver-crash@at=1s"],
    "structured": ["--events", "1200", "--rate", "1000", "--max-batch", "300",
                   "--faults", "driver-crash@batch=2:after-output-before-commit"],
    "direct": ["--events", "1200", "--rate", "1000", "--max-batch", "100",
               "--faults", "driver-crash@batch=2:after-output-before-commit"],
    # The receiver takes in about 500 records a batch: 3000 events reach batch 3 before the topic is drained.
    "receiver": ["--events", "3000", "--rate", "500", "--faults", "driver-crash@batch=3:mid-output"],
}


def one(pipeline: str, runs_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    env["LAB_RUNS_DIR"] = str(runs_dir)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "lab", "run", "--pipeline", pipeline, *SCENARIOS[pipeline], "--json"],
                       capture_output=True, text=True, env=env, timeout=600)
    took = round(time.perf_counter() - t, 2)
    out = {"pipeline": pipeline, "exit": p.returncode, "seconds": took}
    try:
        report = json.loads(p.stdout.strip().splitlines()[-1])
        out.update(guarantee=report["guarantee"], restarts=report["restarts"], lost=report["lost"],
                   duplicated=report["duplicated"], drained=report["drained"])
    except (IndexError, ValueError, KeyError):
        out["error"] = (p.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "run_cycles.json"))
    a = ap.parse_args(argv)
    pipelines = list(SCENARIOS)
    results = []
    with tempfile.TemporaryDirectory(prefix="lab-run-cycles-") as tmp:
        for i in range(a.runs):
            r = one(pipelines[i % len(pipelines)], Path(tmp))
            results.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    by_pipeline = {}
    for name in pipelines:
        s = [r["seconds"] for r in results if r["pipeline"] == name and r["exit"] == 0]
        if s:
            by_pipeline[name] = {"min": min(s), "median": statistics.median(s), "max": max(s), "runs": len(s)}
    summary = {
        "runs": len(results), "failures": [r for r in results if r["exit"] != 0 or "error" in r],
        "seconds_by_pipeline": by_pipeline, "results": results,
        "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: summary[k] for k in ("runs", "failures", "seconds_by_pipeline")}))
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
