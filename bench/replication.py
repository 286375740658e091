"""Kafka's replication guarantees over seeds: notebook 07's grid, each cell several times, on one cluster.

Each cell is a real ``lab run --pipeline plain --nodes 3`` with the
follower-lag-then-leader-crash faults of notebook 07, on one cluster started for
the benchmark (``lab broker start --nodes 3`` in a temporary runs directory,
stopped at the end, whatever happened). Read back from each run's report and
timeline:

``lost``          acknowledged sends missing from the final read of the topic
``failed``        sends the producer was told failed; ``failed_in_topic`` of them are there anyway
``unknown``       sends whose outcome the producer never learnt
``leaderless_s``  the most time any partition had no live leader (none elected, or a killed one still named)
``documented``    what :func:`lab.audit.claims.claim` says for the cell; ``as_documented`` the verdict

Run with ``python bench/replication.py [--seeds 1 2 3] [--out FILE]``; writes
every run to ``FILE`` (default ``bench/results/replication.json``).
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

#: acks, min.insync.replicas, unclean leader election: notebook 07's grid.
GRID = [("1", 1, "on"), ("all", 1, "on"), ("all", 2, "on"), ("1", 1, "off")]
FAULTS = "follower-lag@at=2s:for=8s,leader-crash@at=7s:for=3s"


def measure(acks: str, min_insync: int, unclean: str, seed: int, runs_dir: Path, events: int) -> dict:
    from lab.audit.claims import claim
    from lab.audit.expectations import satisfies
    from lab.events import read_events
    from lab.kafka.replication import leaderless_s

    cmd = [sys.executable, "-m", "lab", "run", "--pipeline", "plain", "--sink", "append", "--nodes", "3",
           "--events", str(events), "--rate", "500", "--acks", acks, "--idempotence", "on" if acks == "all" else "off",
           "--min-insync", str(min_insync), "--unclean", unclean, "--seed", str(seed), "--faults", FAULTS, "--json"]
    started = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "LAB_RUNS_DIR": str(runs_dir)})
    cell = {"acks": acks, "min_insync": min_insync, "unclean": unclean, "seed": seed}
    if out.returncode != 0:
        return {**cell, "error": out.stderr.strip().splitlines()[-1:]}
    report = json.loads(out.stdout[out.stdout.rindex('{"pipeline'):])
    t, documented = report["topic"], claim(acks, min_insync, unclean).expect
    return {**cell, "acked": t["acked"], "lost": t["lost"], "failed": t["failed_sends"],
            "failed_in_topic": t["failed_in_topic"], "unknown": t["unknown_sends"],
            "leaderless_s": max(leaderless_s(read_events(Path(report["run_dir"]))).values(), default=0.0),
            "documented": documented, "as_documented": satisfies(documented, report),
            "wall_s": round(time.monotonic() - started, 1), "load_1m": os.getloadavg()[0]}


def main(argv=None) -> int:
    from lab.broker import shared as shared_broker

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--events", type=int, default=3000)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "replication.json"))
    a = p.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="lab-bench-replication-") as tmp:
        began = time.monotonic()
        shared_broker.start_detached(tmp, nodes=3)
        up_s = round(time.monotonic() - began, 1)
        try:
            for seed in a.seeds:
                for acks, min_insync, unclean in GRID:
                    r = measure(acks, min_insync, unclean, seed, Path(tmp), a.events)
                    print(json.dumps(r), flush=True)
                    runs.append(r)
        finally:
            shared_broker.stop_detached(tmp)
    Path(a.out).write_text(json.dumps({
        "what": __doc__.splitlines()[0], "faults": FAULTS, "events": a.events, "cluster_up_s": up_s,
        "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": runs}, indent=2))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
