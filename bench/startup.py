"""A Spark driver's start-up, phase by phase, with each start-up technique off and on.

Every measurement is a real ``lab run`` crash scenario (one driver start,
a ``driver-crash``, one restart), read back from the run's timeline:

``imports``   the pipeline module imported (``driver-ready``; a standby's is its turn)
``jvm``       the driver JVM answers (``driver-phase jvm``)
``session``   SparkSession ready
``query``     the query (structured), the batch loop (direct) or the StreamingContext (receiver) started
``workers``   Python workers warm (structured, direct)
``planned``   the first batch handed to the driver (``batch-start``)
``done``      the first batch done (``batch-done``)

each in seconds after the driver started (``driver-start``), for the first
start (``cold``) and the restart after the crash (``warm``), plus the
crash-to-restart gap, the crash to the restarted driver's first batch done
(``crash_to_done_s``, what a learner waits for after a crash), the clean
stop (``stop_s``: ``drained`` to ``final-stop``), the scenario's wall time
(broker start included, as a user runs it) and the classification, which no
variant may change.

The crash is the driver's ``fault-point`` (it stops working there; the
kill follows about 0.1 s later, which is where :mod:`lab.audit.restarts`, and so
``report.json``'s ``restart_s`` and the panel, start counting). A
``batch-done`` marked ``recovered`` (a commit the killed driver left
unlogged) is not the restarted driver's first batch.

A restart that gave a standby its turn (``LAB_STANDBY``) starts at that
turn: its process had been started ``started_ahead_s`` earlier, and its
``jvm``, ``session`` and ``workers`` phases, done while it waited, are
negative; ``standby`` is when it began to wait, ``turn`` when it had its turn.

Variants (:mod:`lab.host.start_tuning`; ``all`` is the default start):
``all``, ``no-class-archive``, ``no-jvm-flags``, ``warm-up-before``,
``restart-delay-1s``, ``no-standby``, ``pyspark-worker-daemon``, ``no-worker-preload``,
``task-fetch-wait-500`` (Kafka's own ``fetch.max.wait.ms`` in the tasks of Spark's Kafka
source), ``no-quick-stop``, ``no-broker-archive`` (the broker's JVM without :mod:`lab.broker.archive`),
``codegen-on`` (Spark SQL's own code generation, ``LAB_CODEGEN=on``) and ``none`` (every technique off: the start before
them); by default every variant for ``structured``, and for the others ``all``, ``no-standby``,
``no-quick-stop`` and ``none`` (:data:`DEFAULT_VARIANTS`; ``direct`` read with Spark's batch Kafka
source measured no difference with ``task-fetch-wait-500``, 1.56 against 1.67 s crash to first batch
done, so its reads keep Kafka's wait). Rounds interleave the variants, so each before/after pair shares
the machine's state; the load average is recorded with every run.

Run with ``python bench/startup.py [--rounds N] [--pipeline P ...]
[--variant V ...] [--out FILE]``; writes medians per pipeline and variant,
and every run, to ``FILE`` (default ``bench/results/startup.json``). With
``--pipeline`` or ``--variant``, the runs already in ``FILE`` of every other
pipeline and variant are kept.
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

from lab.events import read_events
from lab.host.start_tuning import ALL_OFF

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import core_seconds, machine  # noqa: E402

#: The crash scenario per pipeline: the issue's structured scenario, and its like for the others.
SCENARIOS = {
    "structured": ["--sink", "idempotent", "--events", "3000", "--rate", "500",
                   "--faults", "driver-crash@batch=2:after-output-before-commit"],
    "direct": ["--sink", "idempotent", "--events", "3000", "--rate", "500",
               "--faults", "driver-crash@batch=2:after-output-before-commit"],
    "receiver": ["--sink", "idempotent", "--events", "3000", "--rate", "500",
                 "--faults", "driver-crash@batch=3:mid-output"],
}
VARIANTS = {
    "all": {},
    "no-class-archive": {"LAB_CLASS_ARCHIVE": "off"},
    "no-jvm-flags": {"LAB_DRIVER_JVM_OPTIONS": ""},
    "warm-up-before": {"LAB_WARM_UP": "before"},
    "restart-delay-1s": {"LAB_RESTART_DELAY": "1"},
    "no-standby": {"LAB_STANDBY": "off"},
    "pyspark-worker-daemon": {"LAB_WORKER_DAEMON": "pyspark"},
    "no-worker-preload": {"LAB_WORKER_PRELOAD": "off"},
    "task-fetch-wait-500": {"LAB_TASK_FETCH_WAIT_MS": "500"},
    "no-quick-stop": {"LAB_QUICK_STOP": "off"},
    "no-broker-archive": {"LAB_BROKER_ARCHIVE": "off"},
    "codegen-on": {"LAB_CODEGEN": "on"},
    "none": ALL_OFF,
}
#: Every variant for the structured pipeline (the issue's figure); the others: everything on, everything off.
DEFAULT_VARIANTS = {"structured": tuple(VARIANTS),
                    "direct": ("all", "no-standby", "no-quick-stop", "none"),
                    "receiver": ("all", "no-standby", "no-quick-stop", "none")}
PHASES = ("imports", "jvm", "session", "workers", "standby", "turn", "query", "planned", "done")


def attempt_phases(events: list[dict], attempt: int) -> dict | None:
    """Seconds from ``driver-start`` of ``attempt`` to each phase it reached (pure)."""
    starts = [e for e in events if e["type"] == "driver-start" and e.get("attempt") == attempt]
    if not starts:
        return None
    t0 = starts[0]["t"]
    out: dict[str, float] = {}

    def first(kind, **match):
        for e in events:
            if e["type"] == kind and e.get("attempt") == attempt and all(e.get(k) == v for k, v in match.items()):
                return round(e["t"] - t0, 3)
        return None

    out["imports"] = first("driver-ready")
    if "started_ahead_s" in starts[0]:
        out["started_ahead_s"] = starts[0]["started_ahead_s"]
    for name in ("jvm", "session", "query", "workers", "standby", "turn"):
        out[name] = first("driver-phase", phase=name)
    out["planned"] = first("batch-start")
    out["done"] = first("batch-done", recovered=None)
    return {k: v for k, v in out.items() if v is not None}


def one(pipeline: str, variant: str, runs_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    env.update(LAB_RUNS_DIR=str(runs_dir), **VARIANTS[variant])
    load = os.getloadavg()[0]
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "lab", "run", "--pipeline", pipeline, *SCENARIOS[pipeline], "--json"],
                       capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    out = {"pipeline": pipeline, "variant": variant, "exit": p.returncode,
           "wall_s": round(time.perf_counter() - t, 2), "load_1m": round(load, 2)}
    try:
        report = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        out["error"] = (p.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
        return out
    out.update(guarantee=report["guarantee"], lost=report["lost"], duplicated=report["duplicated"],
               restarts=report["restarts"])
    run_dir = Path(report["run_dir"])
    events = read_events(run_dir)
    out["cold"] = attempt_phases(events, 1)
    out["warm"] = attempt_phases(events, 2)
    crash = [e["t"] for e in events if e["type"] == "fault-point"]
    restart = [e["t"] for e in events if e["type"] == "driver-start" and e.get("attempt") == 2]
    done = [e["t"] for e in events if e["type"] == "batch-done" and e.get("attempt") == 2 and not e.get("recovered")]
    if crash and restart:
        out["crash_to_restart_s"] = round(restart[0] - crash[0], 3)
    if crash and done:
        out["crash_to_done_s"] = round(done[0] - crash[0], 3)
    drained = [e["t"] for e in events if e["type"] == "drained"]
    stopped = [e["t"] for e in events if e["type"] == "final-stop"]
    if drained and stopped:
        out["stop_s"] = round(stopped[-1] - drained[0], 3)
    return out


def _median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def summarise(runs: list[dict]) -> dict:
    """Medians per pipeline and variant (pure)."""
    out: dict = {}
    for r in runs:
        out.setdefault(r["pipeline"], {}).setdefault(r["variant"], []).append(r)
    summary = {}
    for pipeline, by_variant in out.items():
        summary[pipeline] = {}
        for variant, rs in by_variant.items():
            ok = [r for r in rs if r.get("exit") == 0]
            summary[pipeline][variant] = {
                "runs": len(rs), "failed": len(rs) - len(ok),
                "wall_s": _median([r["wall_s"] for r in ok]),
                "crash_to_restart_s": _median([r.get("crash_to_restart_s") for r in ok]),
                "crash_to_done_s": _median([r.get("crash_to_done_s") for r in ok]),
                "stop_s": _median([r.get("stop_s") for r in ok]),
                "cold": {p: _median([(r.get("cold") or {}).get(p) for r in ok]) for p in PHASES},
                "warm": {p: _median([(r.get("warm") or {}).get(p) for r in ok]) for p in PHASES},
                "guarantees": sorted({r.get("guarantee") for r in ok}),
            }
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pipeline", action="append", choices=sorted(SCENARIOS))
    ap.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "startup.json"))
    a = ap.parse_args(argv)
    pipelines = a.pipeline or list(SCENARIOS)
    # The archive is made once per installed versions, before any measured start.
    subprocess.run([sys.executable, "-c", "from lab.spark import archive; print(archive.ensure())"],
                   check=True, cwd=ROOT)
    core_s = core_seconds()  # a quiet machine's speed, before the runs: figures from two machines compare
    runs = []
    with tempfile.TemporaryDirectory(prefix="lab-bench-startup-") as tmp:
        for rnd in range(a.rounds):
            for pipeline in pipelines:
                for variant in a.variant or DEFAULT_VARIANTS[pipeline]:
                    r = one(pipeline, variant, Path(tmp) / f"{pipeline}-{variant}-{rnd}")
                    runs.append(r)
                    print(json.dumps({k: r.get(k) for k in ("pipeline", "variant", "wall_s", "guarantee", "exit")}
                                     | {"warm_done": (r.get("warm") or {}).get("done"),
                                        "crash_to_done_s": r.get("crash_to_done_s")}), flush=True)
    out = Path(a.out)
    if (a.pipeline or a.variant) and out.exists():  # only these pairs measured again: the others' runs are kept
        measured = {(r["pipeline"], r["variant"]) for r in runs}
        runs = [r for r in json.loads(out.read_text()).get("runs", [])
                if (r.get("pipeline"), r.get("variant")) not in measured] + runs
    result = {"machine": machine() | {"core_seconds_before": core_s},
              "scenarios": SCENARIOS, "variants": VARIANTS, "rounds": a.rounds,
              "summary": summarise(runs), "runs": runs}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
