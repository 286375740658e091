"""Testbed benchmark: the ceiling the pipelines are compared with, and the auditor's speed.

Measures, against the embedded broker (through the lab's proxy, as every
client sees it):

* raw produce throughput: one kafka-python producer, acks=all, idempotent,
  as fast as possible;
* raw consume throughput: one consumer assigned to every partition, reading
  to the log end;
* the auditor's time for a ledger and a sink of 1,000,000 events
  (target: under 3 s).

Writes ``bench/results/testbed.json``. Run with ``make bench`` or
``python bench/testbed.py [--events N] [--audit-events N]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def produce(bootstrap: str, topic: str, events: int) -> float:
    """Produce ``events`` small JSON records as fast as possible; return events/s."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=5, enable_idempotence=True,
                      linger_ms=5, batch_size=64 * 1024)
    payload = b'{"id":"00000000-0000-4000-8000-000000000000","seq":0,"key":"k00","produced_at":0.0}'
    t = time.perf_counter()
    for i in range(events):
        p.send(topic, key=b"k%02d" % (i % 64), value=payload)
    p.flush()
    took = time.perf_counter() - t
    p.close()
    return events / took


def consume(bootstrap: str, topic: str, partitions: int) -> tuple[int, float]:
    """Read the whole topic with one assigned consumer; return (records, records/s)."""
    from kafka import TopicPartition

    from lab import kafka_tools

    ends = kafka_tools.end_offsets(bootstrap, topic, partitions)
    c = kafka_tools.consumer(bootstrap, max_poll_records=5000)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    n = 0
    t = time.perf_counter()
    while any(c.position(tp) < ends[tp.partition] for tp in tps):
        n += sum(len(v) for v in c.poll(timeout_ms=200).values())
    took = time.perf_counter() - t
    c.close()
    return n, n / took


def raw_throughput(events: int = 200_000, partitions: int = 3) -> dict:
    """Start an embedded broker, produce ``events`` and read them back; return both rates."""
    from lab import broker, kafka_tools

    with tempfile.TemporaryDirectory() as tmp:
        info = broker.start_embedded(Path(tmp))
        try:
            kafka_tools.create_topic(info.bootstrap, "bench", partitions)
            produce_eps = produce(info.bootstrap, "bench", events)
            read, consume_eps = consume(info.bootstrap, "bench", partitions)
        finally:
            broker.stop_embedded(info)
    if read != events:
        raise RuntimeError(f"read {read} records back, produced {events}")
    return {"events": events, "partitions": partitions, "produce_eps": round(produce_eps), "consume_eps": round(consume_eps)}


def audit_time(events: int = 1_000_000) -> dict:
    """Time :func:`lab.auditor.audit_run` on synthetic files of ``events`` events (1% lost, 1% duplicated)."""
    from lab.auditor import audit_run
    from lab.ledger import SCHEMA
    from lab.sinks import SinkSpec, open_sink

    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp) / "ledger.sqlite"
        db = sqlite3.connect(ledger)
        db.executescript(SCHEMA)
        rows = [(i, f"ev-{i:09d}", "k", "acked", i % 3, i // 3, None, 0.0, 0.0) for i in range(events)]
        db.executemany("INSERT INTO sends VALUES (?,?,?,?,?,?,?,?,?)", rows)
        db.commit()
        db.close()
        spec = SinkSpec(mode="append", backend="sqlite", path=str(Path(tmp) / "sink.sqlite"))
        with open_sink(spec) as sink:
            stored = []
            for i in range(events):
                r = rng.random()
                copies = 0 if r < 0.01 else 2 if r < 0.02 else 1
                stored += [(f"ev-{i:09d}", i, i % 3, i // 3)] * copies
            sink.write_batch(stored, "bench")
            t = time.perf_counter()
            a = audit_run(ledger, sink, {0: events, 1: events, 2: events})
            took = time.perf_counter() - t
    return {"events": events, "seconds": round(took, 3), "target_s": 3.0, "met": took < 3.0,
            "lost": a.lost, "duplicated": a.duplicated}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--audit-events", type=int, default=1_000_000)
    a = p.parse_args(argv)
    print(f"raw produce/consume of {a.events} events ...", flush=True)
    raw = raw_throughput(a.events)
    print(f"  produce {raw['produce_eps']:,} events/s, consume {raw['consume_eps']:,} events/s", flush=True)
    print(f"auditor on {a.audit_events:,} events ...", flush=True)
    audit = audit_time(a.audit_events)
    print(f"  {audit['seconds']} s (target under 3 s)", flush=True)
    out = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": {"cpus": __import__("os").cpu_count(),
           "python": platform.python_version(), "platform": platform.platform()}, "raw": raw, "audit": audit}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "testbed.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"written {RESULTS / 'testbed.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
