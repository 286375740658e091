"""Leader crashes at many moments: each exactly-once pipeline on the three-broker cluster, every run audited.

Each run is a real ``lab run --nodes 3 --min-insync 2`` with ``leader-crash@at=<T>s`` (the broker leading
the run topic's partition 0 is SIGKILLed at T and restarted on its data 3 s later), on one cluster started
for the benchmark (``lab broker start --nodes 3`` in a temporary runs directory, stopped at the end, whatever
happened). The moments T are spread evenly over ``--from``..``--to`` seconds (``--points`` of them), so a crash
meets each phase of a transaction or a batch: sends in flight, offsets sent, the commit, the restart.

The configurations are the lab's exactly-once ones: ``kafka-eos`` (Kafka's transactions), ``structured`` and
``direct`` with ``--sink transactional``, ``flink`` (aligned barriers, its exactly-once KafkaSink). Read back from
each run's report: ``acked``, ``exactly_once``, ``duplicated``, ``lost``, ``unseen`` (acknowledged, never read:
the run did not drain), ``guarantee``, ``drained``, ``deadline`` (the run stopped for lack of progress),
``restarts``, ``batch_errors`` (batches aborted and read again), ``wall_s``.

Run with ``python bench/leader_crash_sweep.py [--config kafka-eos ...] [--points 20] [--out FILE]``; writes every
run to ``FILE`` (default ``bench/results/leader_crash_sweep.json``) after each one, so a sweep cut short keeps
what it measured.
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
sys.path.insert(0, str(ROOT))
from bench.machine import machine  # noqa: E402

#: Each configuration's ``lab run`` options (the exactly-once ones of the issue that asked for this sweep).
CONFIGS = {
    "kafka-eos": ["--pipeline", "kafka-eos"],
    "structured": ["--pipeline", "structured", "--sink", "transactional"],
    "direct": ["--pipeline", "direct", "--sink", "transactional"],
    "flink": ["--pipeline", "flink"],
}


def crash_times(first_s: float, last_s: float, points: int) -> list[float]:
    """``points`` moments evenly spread over ``first_s``..``last_s``, rounded to 0.1 s."""
    if points == 1:
        return [round(first_s, 1)]
    step = (last_s - first_s) / (points - 1)
    return [round(first_s + i * step, 1) for i in range(points)]


def measure(config: str, at_s: float, seed: int, runs_dir: Path, events: int, rate: float) -> dict:
    from lab.events import read_events

    cmd = [sys.executable, "-m", "lab", "run", *CONFIGS[config], "--nodes", "3", "--min-insync", "2",
           "--events", str(events), "--rate", f"{rate:g}", "--seed", str(seed),
           "--faults", f"leader-crash@at={at_s:g}s", "--json"]
    started = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "LAB_RUNS_DIR": str(runs_dir)})
    row = {"config": config, "at_s": at_s, "seed": seed, "wall_s": round(time.monotonic() - started, 1),
           "load_1m": round(os.getloadavg()[0], 2)}
    if out.returncode != 0 or '{"pipeline' not in out.stdout:
        return {**row, "error": (out.stderr.strip().splitlines() or ["(no output)"])[-1][:300]}
    r = json.loads(out.stdout[out.stdout.rindex('{"pipeline'):])
    events_ = read_events(Path(r["run_dir"]))
    return {**row, "acked": r["acked"], "exactly_once": r["exactly_once"], "duplicated": r["duplicated"],
            "lost": r["lost"], "unseen": r["unseen"], "guarantee": r["guarantee"], "drained": r["drained"],
            "deadline": any(e["type"] == "deadline" for e in events_), "restarts": r["restarts"],
            "batch_errors": sum(e["type"] == "batch-error" for e in events_),
            "crashed_node": next((e.get("node") for e in events_ if e["type"] == "fault"), None)}


def summary(runs: list[dict]) -> dict:
    """Per configuration: runs, and how many were exactly once and drained without a deadline."""
    out = {}
    for config in dict.fromkeys(r["config"] for r in runs):
        rows = [r for r in runs if r["config"] == config]
        clean = [r for r in rows if "error" not in r and r["guarantee"] == "exactly-once" and r["drained"]
                 and not r["deadline"] and (r["lost"], r["duplicated"], r["unseen"]) == (0, 0, 0)]
        out[config] = {"runs": len(rows), "exactly_once_drained": len(clean),
                       "lost": sum(r.get("lost", 0) for r in rows),
                       "duplicated": sum(r.get("duplicated", 0) for r in rows),
                       "unseen": sum(r.get("unseen", 0) for r in rows),
                       "deadline": sum(bool(r.get("deadline")) for r in rows),
                       "errors": sum("error" in r for r in rows),
                       "median_wall_s": sorted(r["wall_s"] for r in rows)[len(rows) // 2] if rows else None}
    return out


def main(argv=None) -> int:
    from lab.broker import shared as shared_broker

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", action="append", choices=sorted(CONFIGS), help="repeatable (default: all four)")
    p.add_argument("--points", type=int, default=20, help="crash moments per configuration (default 20)")
    p.add_argument("--from", dest="first_s", type=float, default=2.0, help="first crash moment, s (default 2)")
    p.add_argument("--to", dest="last_s", type=float, default=14.0, help="last crash moment, s (default 14)")
    p.add_argument("--events", type=int, default=6000)
    p.add_argument("--rate", type=float, default=300.0)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "leader_crash_sweep.json"))
    a = p.parse_args(argv)
    if a.points < 1:
        p.error(f"--points {a.points}: valid 1 or more")
    configs, runs = a.config or list(CONFIGS), []
    times = crash_times(a.first_s, a.last_s, a.points)

    def write() -> None:
        Path(a.out).write_text(json.dumps({
            "what": __doc__.splitlines()[0], "events": a.events, "rate": a.rate, "crash_times_s": times,
            "machine": machine(), "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
            "summary": summary(runs), "runs": runs}, indent=2))

    with tempfile.TemporaryDirectory(prefix="lab-bench-leader-crash-") as tmp:
        shared_broker.start_detached(tmp, nodes=3)
        try:
            for config in configs:
                for i, at_s in enumerate(times):
                    r = measure(config, at_s, 100 + i, Path(tmp), a.events, a.rate)
                    print(json.dumps(r), flush=True)
                    runs.append(r)
                    write()
        finally:
            shared_broker.stop_detached(tmp)
    write()
    print(json.dumps(summary(runs), indent=2))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
