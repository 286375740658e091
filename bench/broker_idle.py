"""An idle embedded Kafka node's CPU: the lab's properties against Kafka's no-op metadata records every 500 ms.

A broker that waits between runs (the test session's shared brokers, a workshop's
``lab broker start``, the matrix's broker between rows) still works: broker
heartbeats, the controller's no-op records (``metadata.max.idle.interval.ms``,
Kafka's default 500 ms; the lab's 0, :data:`lab.broker.apache.SMALL_NODE_PROPERTIES`),
the network threads' polls, the JIT. Each round starts a one-node Kafka with
one side's properties, lets it settle (``--settle`` s), then reads its JVM's CPU
(``/proc/PID/stat``, and per thread ``/proc/PID/task``, with :func:`bench.run_cpu.stat_cpu_s`)
over ``--window`` s with no client connected, and stops it; the sides take turns.

Run with ``python bench/broker_idle.py [--rounds N] [--out FILE]``; prints one JSON object and
writes it to ``FILE`` (default ``bench/results/broker_idle.json``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout

from bench.machine import core_seconds, machine  # noqa: E402
from bench.run_cpu import stat_cpu_s  # noqa: E402
from bench.testbed import emit, summary  # noqa: E402

NO_OP_PROPERTY = "metadata.max.idle.interval.ms=0"
#: side → the node's properties: before, today's without the line that turns the no-op records off; after, today's.
SIDES = {"before": "Kafka's no-op metadata records every 500 ms", "after": f"the lab's ({NO_OP_PROPERTY})"}


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of ``pid`` so far."""
    return stat_cpu_s(Path(f"/proc/{pid}/stat").read_text())[1]


def thread_cpu(pid: int) -> dict[tuple[str, str], float]:
    """``{(tid, thread name): CPU seconds}`` of every thread of ``pid`` (threads that end meanwhile are skipped)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name, cpu, _ = stat_cpu_s(Path(f"/proc/{pid}/task/{tid}/stat").read_text())
        except (OSError, IndexError, ValueError):
            continue
        out[(tid, name)] = cpu
    return out


def idle_once(work: Path, side: str, settle_s: float, window_s: float) -> tuple[float, Counter]:
    """(CPU share of one core, CPU seconds per thread name) of an idle node over ``window_s``."""
    from lab.broker import apache as kafka_broker, embedded as broker

    today = kafka_broker.SMALL_NODE_PROPERTIES
    if side == "before":
        kafka_broker.SMALL_NODE_PROPERTIES = tuple(p for p in today if p != NO_OP_PROPERTY)
    try:
        info = broker.start_embedded(Path(tempfile.mkdtemp(prefix=f"idle-{side}-", dir=work)) / "logs")
    finally:
        kafka_broker.SMALL_NODE_PROPERTIES = today
    try:
        props = Path(info.log_dir) / "server.properties"
        if (NO_OP_PROPERTY in props.read_text()) != (side == "after"):
            raise SystemExit(f"{props} does not have the {side} side's properties")
        time.sleep(settle_s)
        pid = info.broker_pid
        c0, t0, th0 = process_cpu_s(pid), time.monotonic(), thread_cpu(pid)
        time.sleep(window_s)
        c1, t1, th1 = process_cpu_s(pid), time.monotonic(), thread_cpu(pid)
    finally:
        broker.stop_embedded(info, discard_data=True)
    threads = Counter()
    for (tid, name), s in th1.items():
        threads[name] += s - th0.get((tid, name), 0.0)
    return (c1 - c0) / (t1 - t0), threads


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settle", type=float, default=10.0, help="seconds between the node's start and the window")
    ap.add_argument("--window", type=float, default=60.0, help="seconds of idle CPU measured")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "broker_idle.json"))
    a = ap.parse_args(argv)
    core_s = core_seconds()  # a quiet machine's speed, before the rounds: figures from two machines compare
    shares = {side: [] for side in SIDES}
    threads = {side: Counter() for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="lab-broker-idle-") as tmp:
        for _ in range(a.rounds):
            for side in SIDES:
                share, per_thread = idle_once(Path(tmp), side, a.settle, a.window)
                shares[side].append(share)
                threads[side].update(per_thread)
    out = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine() | {"core_seconds_before": core_s},
        "load_average_at_end": os.getloadavg(), "settle_s": a.settle, "window_s": a.window, **SIDES,
        "share_of_a_core": {side: {**summary(v), "n": len(v)} for side, v in shares.items()},
        "cpu_s_per_minute_by_thread": {
            side: {name: round(s * 60 / (a.window * a.rounds), 3) for name, s in c.most_common(10)}
            for side, c in threads.items()},
        "rounds": {side: [round(x, 4) for x in v] for side, v in shares.items()},
    }
    emit(out, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
