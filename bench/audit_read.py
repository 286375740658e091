"""The audit's read of a whole topic (:func:`lab.kafka.tools.topic_copies`): the consumer defaults against the bulk
read settings (:func:`lab.kafka.tools.bulk_consumer`, after).

One embedded Kafka; a 3-partition topic of ``--events`` of the lab's events (200,000 by default, as the
200,000-event scenario leaves it), then the read both ways in turns (before, after, before, after ...),
each checked to find every event once. Figures: seconds per read and records per second.

Run with ``python bench/audit_read.py [--events N] [--rounds R] [--out FILE]``; prints one JSON object and
writes it to ``FILE`` (default ``bench/results/audit_read.json``). ``--crc-pair`` reads with the bulk settings
both times, without and then with each batch's CRC32C checked (``check_crcs``, with the CRC32C module kafka-python
finds), into ``bench/results/audit_read_crc.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout

from bench.kafka_crc import crc_in_use  # noqa: E402
from bench.machine import core_seconds, machine  # noqa: E402
from bench.testbed import emit, produce, summary  # noqa: E402


def event_value(i: int) -> bytes:
    """Record ``i`` shaped as the lab's events: a JSON object with a unique ``id`` (the audit counts copies by it)."""
    return json.dumps({"id": f"e-{i:08d}", "seq": i, "key": f"k{i % 64:02d}", "produced_at": 0.0}).encode()


#: How each side of a pair reads: the consumer defaults only, the bulk read settings, and those with CRCs checked.
READS = ("defaults", "bulk", "bulk-crc")


def read_once(bootstrap: str, topic: str, events: int, how: str) -> float:
    """Seconds of one :func:`topic_copies` read, made as ``how`` (one of :data:`READS`) says."""
    from lab.kafka import tools as kafka_tools

    def defaults_only(bootstrap, isolation_level, **overrides):
        return kafka_tools.consumer(bootstrap, isolation_level=isolation_level, max_poll_records=5000, **overrides)

    patches = {"defaults": {"bulk_consumer": defaults_only}, "bulk": {},
               "bulk-crc": {"READ_SETTINGS": {**kafka_tools.READ_SETTINGS, "check_crcs": True}}}[how]
    t = time.monotonic()
    with mock.patch.multiple(kafka_tools, **patches) if patches else contextlib.nullcontext():
        copies = kafka_tools.topic_copies(bootstrap, topic, 3)
    seconds = time.monotonic() - t
    if len(copies) != events or any(c[0] != 1 for c in copies.values()):
        raise SystemExit(f"read {len(copies)} distinct events back, produced {events} once each")
    return seconds


def main(argv=None) -> int:
    from lab.broker import embedded as broker
    from lab.kafka import tools as kafka_tools

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--crc-pair", action="store_true", help="bulk reads without, then with, CRCs checked")
    ap.add_argument("--out", default=None, help="default: bench/results/audit_read.json (audit_read_crc.json)")
    a = ap.parse_args(argv)
    results = ROOT / "bench" / "results"
    a.out = a.out or str(results / ("audit_read_crc.json" if a.crc_pair else "audit_read.json"))
    core_s = core_seconds()
    sides = {"before": "bulk", "after": "bulk-crc"} if a.crc_pair else {"before": "defaults", "after": "bulk"}
    seconds = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="lab-audit-read-") as tmp:
        info = broker.start_embedded(Path(tmp) / "logs")
        try:
            kafka_tools.create_topic(info.bootstrap, "events", 3)
            produce(info.bootstrap, "events", a.events, event_value)
            for _ in range(a.rounds):
                for side, how in sides.items():
                    seconds[side].append(read_once(info.bootstrap, "events", a.events, how))
        finally:
            broker.stop_embedded(info, discard_data=True)
    out = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine() | {"core_seconds_before": core_s},
        "events": a.events,
        **({"before": "kafka_tools.bulk_consumer: READ_SETTINGS (check_crcs False)",
            "after": "kafka_tools.bulk_consumer with check_crcs True",
            "crc32c": crc_in_use(dict(os.environ))} if a.crc_pair else
           {"before": "kafka_tools.consumer defaults (CRC32C checked in Python, 1 MiB fetches)",
            "after": "kafka_tools.bulk_consumer: READ_SETTINGS (the default)"}),
        "read_s": {side: {**summary(v), "n": len(v)} for side, v in seconds.items()},
        "records_per_s": {side: round(a.events / summary(v)["median"]) for side, v in seconds.items()},
        "rounds": seconds,
    }
    emit(out, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
