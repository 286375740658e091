"""The ``window-count`` query: throughput and state size on a large run, recovery time against state size.

Every measurement is a real ``lab run`` of the structured pipeline with
``--query window-count --sink idempotent``, a ``driver-crash`` after the
output of one batch, read back from the run's timeline and report:

``events_per_s``   acknowledged events / seconds from the first batch's start to the drain
``state_rows``     rows in the state store after the last batch (``state-progress``: Spark's ``numRowsTotal``)
``state_bytes``    the state's memory (Spark's ``memoryUsedBytes``)
``state_files_mb`` the state directory's size on disk at the end
``recovery_s``     the crash to the restarted driver's first completed batch
``exact``          every window exact (the state survived the crash)

The state's size is set with the window: 64 keys × the windows the watermark
(600 s, longer than the run) keeps, so shorter windows mean more state.
Both providers (``--state-store hdfs|rocksdb``) run each size, interleaved.

Run with ``python bench/stateful.py [--events N] [--windows S ...] [--out FILE]``;
writes every run to ``FILE`` (default ``bench/results/stateful.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import machine  # noqa: E402


def state_dir_mb(run_dir: Path) -> float:
    root = run_dir / "checkpoint" / "state"
    return round(sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 1e6, 2) if root.is_dir() else 0.0


def measure(events: int, window: float, provider: str, runs_dir: Path) -> dict:
    cmd = [sys.executable, "-m", "lab", "run", "--pipeline", "structured", "--query", "window-count",
           "--sink", "idempotent", "--events", str(events), "--rate", "10000", "--window", str(window),
           "--watermark", "600", "--state-store", provider,
           "--faults", "driver-crash@batch=4:after-output-before-commit", "--json"]
    started = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "LAB_RUNS_DIR": str(runs_dir)})
    wall = time.monotonic() - started
    if out.returncode != 0:
        return {"provider": provider, "window_s": window, "error": out.stderr.strip().splitlines()[-1:]}
    report = json.loads(out.stdout[out.stdout.rindex('{"pipeline'):])
    run_dir = Path(report["run_dir"])
    timeline = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    states = [e for e in timeline if e["type"] == "state-progress"]
    first = next(e["t"] for e in timeline if e["type"] == "batch-start")
    drained = next((e["t"] for e in timeline if e["type"] == "drained"), timeline[-1]["t"])
    return {
        "provider": provider, "window_s": window, "events": report["acked"],
        "events_per_s": round(report["acked"] / (drained - first), 1),
        "state_rows": states[-1]["state_rows"] if states else None,
        "state_bytes": states[-1]["state_bytes"] if states else None,
        "state_files_mb": state_dir_mb(run_dir),
        "recovery_s": (report["restart_s"] or [None])[0],  # lab.audit.restarts: the crash to the first batch done
        "exact": report["windows"] == report["windows_exact"] and report["lost"] == 0,
        "windows": report["windows"], "batches": report["batches"], "wall_s": round(wall, 1),
        "load_1m": os.getloadavg()[0],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--windows", type=float, nargs="+", default=[10.0, 1.0, 0.1],
                   help="window lengths in seconds (shorter: more state)")
    p.add_argument("--providers", nargs="+", default=["hdfs", "rocksdb"])
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "stateful.json"))
    a = p.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="lab-bench-stateful-") as tmp:
        for window in a.windows:
            for provider in a.providers:
                r = measure(a.events, window, provider, Path(tmp))
                print(json.dumps(r), flush=True)
                runs.append(r)
    Path(a.out).write_text(json.dumps({
        "what": __doc__.splitlines()[0], "events": a.events, "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": runs}, indent=2))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
