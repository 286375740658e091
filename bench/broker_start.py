"""The embedded Kafka's start, one technique off and on: the formatted template, the class archive.

``--technique`` names the pair (:data:`TECHNIQUES`):

* ``format``: ``LAB_KAFKA_FORMAT=each`` (a ``StorageTool`` JVM per start) against
  ``template`` (:mod:`lab.broker.template`); figures in ``bench/results/broker_start.json``;
* ``archive``: ``LAB_BROKER_ARCHIVE=off`` against ``on`` (:mod:`lab.broker.archive`);
  it writes ``bench/results/broker_archive.json``; the last figures: bench/README.md, Past experiments.

Two figures, each as a before/after pair measured in turns in one call
(before, after, before, after ...) so that a drift of the machine's speed
falls on both:

* ``broker``: :func:`lab.broker.embedded.start_embedded` on a new log directory until
  ready, and the CPU seconds its JVM had used by then (``broker_cpu_at_ready_s``);
* ``scenario``: the whole ``lab run`` of issue 17's 3,000-event crash scenario
  (structured, idempotent sink, ``driver-crash@batch=2:after-output-before-commit``),
  where the broker starts beside the standby driver's JVM.

Each pair has the other technique at its default (``--technique format`` maps the class
archive on both sides since it came; ``broker_start.json`` was measured before it).

Run with ``python bench/broker_start.py [--technique T] [--broker-rounds N] [--scenario-rounds M] [--out FILE]``;
prints one JSON object and writes it to ``FILE``. The template and the archive are
made before the first round, so no round pays for them.
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

from bench.machine import core_seconds, machine  # noqa: E402
from bench.run_cpu import stat_cpu_s  # noqa: E402
from bench.testbed import summary  # noqa: E402

SCENARIO = ["run", "--pipeline", "structured", "--sink", "idempotent", "--events", "3000", "--rate", "500",
            "--faults", "driver-crash@batch=2:after-output-before-commit"]
#: technique: (variable, value before, value after, results file).
TECHNIQUES = {
    "format": ("LAB_KAFKA_FORMAT", "each", "template", "broker_start.json"),
    "archive": ("LAB_BROKER_ARCHIVE", "off", "on", "broker_archive.json"),
}


def broker_start_s(env: dict, work: Path) -> tuple[float, float]:
    """(seconds until ready, the broker JVM's CPU seconds by then) of one start with ``env`` set."""
    from lab.broker import embedded as broker

    os.environ.update(env)
    log_dir = Path(tempfile.mkdtemp(prefix="start-", dir=work)) / "logs"
    t = time.monotonic()
    info = broker.start_embedded(log_dir)
    seconds = time.monotonic() - t
    cpu = stat_cpu_s(Path(f"/proc/{info.broker_pid}/stat").read_text())[1]
    broker.stop_embedded(info)
    return seconds, cpu


def scenario_s(side: dict, runs_dir: Path) -> tuple[float, str]:
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "lab", *SCENARIO, "--json"], cwd=ROOT,
                          env={**os.environ, **side, "LAB_RUNS_DIR": str(runs_dir)},
                          capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - t
    if proc.returncode != 0:
        raise SystemExit(f"lab run failed ({side}): {proc.stderr.strip().splitlines()[-1:]}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])  # --json: the report is the last line
    return seconds, report["guarantee"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--technique", choices=sorted(TECHNIQUES), default="archive")
    ap.add_argument("--broker-rounds", type=int, default=8)
    ap.add_argument("--scenario-rounds", type=int, default=5)
    ap.add_argument("--out", default=None, help="default: bench/results/<the technique's file>")
    a = ap.parse_args(argv)
    var, before, after, results = TECHNIQUES[a.technique]
    sides = {"before": {var: before}, "after": {var: after}}
    core_s = core_seconds()  # a quiet machine's speed, before the runs: figures from two machines compare
    with tempfile.TemporaryDirectory(prefix="lab-broker-start-") as tmp:
        work = Path(tmp)
        broker_start_s(sides["after"], work)  # makes the template and the archive once, outside the figures
        starts = {"before": [], "after": []}
        cpus = {"before": [], "after": []}
        for _ in range(a.broker_rounds):
            for side, env in sides.items():
                seconds, cpu = broker_start_s(env, work)
                starts[side].append(seconds)
                cpus[side].append(cpu)
        scenarios = {"before": [], "after": []}
        guarantees = set()
        for _ in range(a.scenario_rounds):
            for side, env in sides.items():
                seconds, guarantee = scenario_s(env, work / "runs")
                scenarios[side].append(seconds)
                guarantees.add(guarantee)
    out = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine() | {"core_seconds_before": core_s},
        "cpus": os.cpu_count(), "python": platform.python_version(), "load_average_at_end": os.getloadavg(),
        "technique": a.technique,
        "before": f"{var}={before}", "after": f"{var}={after} (the default)",
        "broker_ready_s": {side: {**summary(v), "n": len(v)} for side, v in starts.items()},
        "broker_cpu_at_ready_s": {side: {**summary(v), "n": len(v)} for side, v in cpus.items()},
        "scenario": " ".join(["lab", *SCENARIO]),
        "scenario_wall_s": {side: {**summary(v), "n": len(v)} for side, v in scenarios.items()},
        "scenario_target_s": 20, "scenario_guarantees": sorted(guarantees),
        "rounds": {"broker": starts, "broker_cpu": cpus, "scenario": scenarios},
    }
    text = json.dumps(out, indent=2)
    print(text)
    Path(a.out or ROOT / "bench" / "results" / results).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
