"""The audit's read of a whole topic (:func:`lab.kafka_tools.topic_copies`): the consumer defaults against the bulk
read settings (:func:`lab.kafka_tools.bulk_consumer`, after).

One embedded Kafka; a 3-partition topic of ``--events`` of the lab's events (200,000 by default, as the
200,000-event scenario leaves it), then the read both ways in turns (before, after, before, after ...),
each checked to find every event once. Figures: seconds per read and records per second.

Run with ``python bench/audit_read.py [--events N] [--rounds R] [--out FILE]``; prints one JSON object and
writes it to ``FILE`` (default ``bench/results/audit_read.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout

from bench.machine import core_seconds, machine  # noqa: E402
from bench.testbed import emit, produce, summary  # noqa: E402


def event_value(i: int) -> bytes:
    """Record ``i`` shaped as the lab's events: a JSON object with a unique ``id`` (the audit counts copies by it)."""
    return json.dumps({"id": f"e-{i:08d}", "seq": i, "key": f"k{i % 64:02d}", "produced_at": 0.0}).encode()


def read_once(bootstrap: str, topic: str, events: int, bulk: bool) -> float:
    """Seconds of one :func:`topic_copies` read; ``bulk`` False: with the consumer defaults only (before)."""
    from lab import kafka_tools

    def defaults_only(bootstrap, isolation_level, **overrides):
        return kafka_tools.consumer(bootstrap, isolation_level=isolation_level, max_poll_records=5000, **overrides)

    t = time.monotonic()
    if bulk:
        copies = kafka_tools.topic_copies(bootstrap, topic, 3)
    else:
        with mock.patch.object(kafka_tools, "bulk_consumer", defaults_only):
            copies = kafka_tools.topic_copies(bootstrap, topic, 3)
    seconds = time.monotonic() - t
    if len(copies) != events or any(c[0] != 1 for c in copies.values()):
        raise SystemExit(f"read {len(copies)} distinct events back, produced {events} once each")
    return seconds


def main(argv=None) -> int:
    from lab import broker, kafka_tools

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "audit_read.json"))
    a = ap.parse_args(argv)
    core_s = core_seconds()
    sides = {"before": False, "after": True}
    seconds = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="lab-audit-read-") as tmp:
        info = broker.start_embedded(Path(tmp) / "logs", product="kafka")
        try:
            kafka_tools.create_topic(info.bootstrap, "events", 3)
            produce(info.bootstrap, "events", a.events, event_value)
            for _ in range(a.rounds):
                for side, bulk in sides.items():
                    seconds[side].append(read_once(info.bootstrap, "events", a.events, bulk))
        finally:
            broker.stop_embedded(info, discard_data=True)
    out = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine() | {"core_seconds_before": core_s},
        "events": a.events,
        "before": "kafka_tools.consumer defaults (CRC32C checked in Python, 1 MiB fetches)",
        "after": "kafka_tools.bulk_consumer: READ_SETTINGS (the default)",
        "read_s": {side: {**summary(v), "n": len(v)} for side, v in seconds.items()},
        "records_per_s": {side: round(a.events / summary(v)["median"]) for side, v in seconds.items()},
        "rounds": seconds,
    }
    emit(out, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
