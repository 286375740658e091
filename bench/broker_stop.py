"""A run's own broker at the run's end: Kafka's clean shutdown against a kill (``discard_data``).

A run's embedded Kafka keeps its data in the run directory, and nothing starts
on it again once the run is over (:func:`lab.broker.shared.broker_for_run`), so
:func:`lab.broker.embedded.stop_embedded` kills it (``discard_data=True``, after) instead
of waiting for its clean shutdown (before; what ``lab broker stop`` and a restart
on the same data still use).

Each round starts a broker, creates a 3-partition topic, produces 3,000 records
(idempotent, ``acks=all``) and reads them back, as a 3,000-event run leaves
it, then stops it one way; the ways take turns, so a drift of the machine's
speed falls on both. Two figures per side: the stop's wall time, and the
machine's CPU seconds during it (``/proc/stat``: the JVM's shutdown, and
anything else the machine did meanwhile).

Run with ``python bench/broker_stop.py [--rounds N] [--out FILE]``; prints one JSON object
and writes it to ``FILE`` (default ``bench/results/broker_stop.json``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout

from bench.machine import core_seconds, machine  # noqa: E402
from bench.pipelines import raw_consume  # noqa: E402
from bench.run_cpu import machine_busy_s  # noqa: E402
from bench.testbed import emit, produce, summary  # noqa: E402

EVENTS = 3000
SIDES = {"before": False, "after": True}  # discard_data


def stop_once(work: Path, discard: bool) -> tuple[float, float]:
    """(seconds, machine CPU seconds) of stopping a broker that served a 3,000-event topic."""
    from lab.broker import embedded as broker
    from lab.kafka import tools as kafka_tools

    info = broker.start_embedded(Path(tempfile.mkdtemp(prefix="stop-", dir=work)) / "logs")
    try:
        kafka_tools.create_topic(info.bootstrap, "events", 3)
        produce(info.bootstrap, "events", EVENTS)
        read, _ = raw_consume(info.bootstrap, "events", 3, EVENTS)
        if read != EVENTS:
            raise SystemExit(f"read {read} records back, produced {EVENTS}")
    except BaseException:
        broker.stop_embedded(info, discard_data=True)
        raise
    cpu, t = machine_busy_s(), time.monotonic()
    broker.stop_embedded(info, discard_data=discard)
    return time.monotonic() - t, machine_busy_s() - cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "broker_stop.json"))
    a = ap.parse_args(argv)
    core_s = core_seconds()  # a quiet machine's speed, before the rounds: figures from two machines compare
    walls = {side: [] for side in SIDES}
    cpus = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="lab-broker-stop-") as tmp:
        for _ in range(a.rounds):
            for side, discard in SIDES.items():
                seconds, cpu = stop_once(Path(tmp), discard)
                walls[side].append(seconds)
                cpus[side].append(cpu)
    out = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine() | {"core_seconds_before": core_s},
        "load_average_at_end": os.getloadavg(),
        "before": "stop_embedded(info): SIGTERM, Kafka's clean shutdown",
        "after": "stop_embedded(info, discard_data=True): SIGKILL (a run's own broker, the default there)",
        "stop_s": {side: {**summary(v), "n": len(v)} for side, v in walls.items()},
        "machine_cpu_during_stop_s": {side: {**summary(v), "n": len(v)} for side, v in cpus.items()},
        "rounds": {"stop_s": walls, "machine_cpu_s": cpus},
    }
    emit(out, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
