"""The JVM flags of executors and of the flink job: a run's machine CPU with the lab's flags and without.

Each scenario is run as a user runs it (``lab run``, on the broker ``lab broker start`` keeps
running, started here when none is), alternately with the lab's flags (``on``) and with the
JVM's own defaults (``off``: ``LAB_EXECUTOR_JVM_OPTIONS`` or ``LAB_FLINK_JVM_OPTIONS`` empty),
so each before/after pair shares the machine's state. CPU is the machine's own count
(``/proc/stat``: every process, short-lived JVMs included) from the command's start to its end.

Run with ``python bench/jvm_flags.py [--rounds N] [--out FILE]``; writes medians and every run to
``FILE`` (default ``bench/results/jvm_flags.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import machine  # noqa: E402
from bench.run_cpu import timed_run  # noqa: E402

#: scenario: (the ``lab run`` arguments, the variable that holds the flags measured)
SCENARIOS = {
    "direct on local-cluster, executor-crash": (
        ["--pipeline", "direct", "--offsets", "sink", "--sink", "transactional", "--events", "2000", "--rate", "1000",
         "--master", "local-cluster[2,1,1024]", "--faults", "executor-crash@batch=2"], "LAB_EXECUTOR_JVM_OPTIONS"),
    "flink, driver-crash mid-output": (
        ["--pipeline", "flink", "--events", "3000", "--rate", "500", "--faults", "driver-crash@batch=2:mid-output"],
        "LAB_FLINK_JVM_OPTIONS"),
}


def measure(args: list[str], env: dict) -> dict:
    """One ``lab run``: its machine CPU, its wall time and its guarantee (``--json``)."""
    wall, cpu, report = timed_run(args, env)
    return {"cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "guarantee": report["guarantee"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "jvm_flags.json"))
    opts = ap.parse_args()
    from lab.broker import shared as shared_broker
    from lab.host.env import env_runs_dir

    runs = env_runs_dir()
    started = shared_broker.load_running(runs) is None
    if started:
        subprocess.run([sys.executable, "-m", "lab", "broker", "start"], check=True, capture_output=True)
    runs_by = {name: {"on": [], "off": []} for name in SCENARIOS}
    try:
        for r in range(opts.rounds):
            for name, (args, var) in SCENARIOS.items():
                on = {k: v for k, v in os.environ.items() if k != var}  # the lab's default flags
                for variant, env in (("on", on), ("off", {**on, var: ""})):
                    runs_by[name][variant].append(measure(args, env))
                    print(f"round {r + 1}: {name}, flags {variant}: {runs_by[name][variant][-1]}", flush=True)
    finally:
        if started:
            subprocess.run([sys.executable, "-m", "lab", "broker", "stop"], capture_output=True)
    out = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine(), "rounds": opts.rounds,
           "scenarios": {}}
    for name, (args, var) in SCENARIOS.items():
        med = {v: {k: statistics.median(x[k] for x in runs_by[name][v]) for k in ("cpu_s", "wall_s")}
               for v in ("on", "off")}
        out["scenarios"][name] = {"command": "lab run " + " ".join(args), "variable": var,
                                  "flags_on": med["on"], "flags_off": med["off"], "runs": runs_by[name],
                                  "guarantees_same": len({x["guarantee"] for v in runs_by[name].values()
                                                          for x in v}) == 1}
        print(f"{name}: CPU {med['off']['cpu_s']} → {med['on']['cpu_s']} s, wall {med['off']['wall_s']} → "
              f"{med['on']['wall_s']} s (medians of {opts.rounds})")
    Path(opts.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"written to {opts.out}")


if __name__ == "__main__":
    main()
