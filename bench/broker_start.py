"""The embedded Kafka's start with its data directory copied from the template, or formatted each time.

Two figures, each as a before/after pair measured in turns in one call
(before, after, before, after ...) so that a drift of the machine's speed
falls on both:

* ``broker``: :func:`lab.broker.start_embedded` on a new log directory until
  ready, ``LAB_KAFKA_FORMAT=each`` (a ``StorageTool`` JVM per start) against
  ``template`` (:mod:`lab.kafka_template`);
* ``scenario``: the whole ``lab run`` of issue 17's 3,000-event crash scenario
  (structured, idempotent sink, ``driver-crash@batch=2:after-output-before-commit``),
  where the broker starts beside the standby driver's JVM.

Run with ``python bench/broker_start.py [--broker-rounds N] [--scenario-rounds M] [--out FILE]``;
prints one JSON object and writes it to ``FILE`` (default
``bench/results/broker_start.json``). The template is made before the first
round, so no round pays for it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout

from bench.testbed import summary  # noqa: E402

SCENARIO = ["run", "--pipeline", "structured", "--sink", "idempotent", "--events", "3000", "--rate", "500",
            "--faults", "driver-crash@batch=2:after-output-before-commit"]
MODES = {"before": "each", "after": "template"}


def broker_start_s(mode: str, work: Path) -> float:
    from lab import broker

    os.environ["LAB_KAFKA_FORMAT"] = mode
    log_dir = Path(tempfile.mkdtemp(prefix=f"start-{mode}-", dir=work)) / "logs"
    t = time.monotonic()
    info = broker.start_embedded(log_dir, product="kafka")
    seconds = time.monotonic() - t
    broker.stop_embedded(info)
    return seconds


def scenario_s(mode: str, runs_dir: Path) -> tuple[float, str]:
    env = {**os.environ, "LAB_KAFKA_FORMAT": mode, "LAB_RUNS_DIR": str(runs_dir)}
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "lab", *SCENARIO, "--json"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - t
    if proc.returncode != 0:
        raise SystemExit(f"lab run failed ({mode}): {proc.stderr.strip().splitlines()[-1:]}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])  # --json: the report is the last line
    return seconds, report["guarantee"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--broker-rounds", type=int, default=8)
    ap.add_argument("--scenario-rounds", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "broker_start.json"))
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lab-broker-start-") as tmp:
        work = Path(tmp)
        broker_start_s("template", work)  # makes the template once, outside the figures
        starts = {"before": [], "after": []}
        for _ in range(a.broker_rounds):
            for side, mode in MODES.items():
                starts[side].append(broker_start_s(mode, work))
        scenarios = {"before": [], "after": []}
        guarantees = set()
        for _ in range(a.scenario_rounds):
            for side, mode in MODES.items():
                seconds, guarantee = scenario_s(mode, work / "runs")
                scenarios[side].append(seconds)
                guarantees.add(guarantee)
    out = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "cpus": os.cpu_count(), "python": platform.python_version(), "load_average_at_end": os.getloadavg(),
        "before": "LAB_KAFKA_FORMAT=each", "after": "LAB_KAFKA_FORMAT=template (the default)",
        "broker_ready_s": {side: {**summary(v), "n": len(v)} for side, v in starts.items()},
        "scenario": " ".join(["lab", *SCENARIO]),
        "scenario_wall_s": {side: {**summary(v), "n": len(v)} for side, v in scenarios.items()},
        "scenario_target_s": 20, "scenario_guarantees": sorted(guarantees),
        "rounds": {"broker": starts, "scenario": scenarios},
    }
    text = json.dumps(out, indent=2)
    print(text)
    Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
