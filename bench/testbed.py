"""Testbed benchmark: the ceiling the pipelines are compared with, the broker's start, and the auditor's speed.

For the embedded broker (Apache Kafka 4.4.0), through the lab's proxy, as every client sees it:

* raw produce throughput: one kafka-python producer, acks=all, idempotent,
  as fast as possible (``--repeats`` topics, one each; the median);
* raw consume throughput: one consumer assigned to every partition, reading
  one of those topics from the beginning ``--repeats`` times, with the
  lab's consumer defaults (:data:`lab.kafka.tools.CONSUMER_DEFAULTS`) and
  with the bulk readers' settings (:data:`lab.kafka.tools.READ_SETTINGS`: no
  pure-Python CRC check), the two baselines of ``bench/pipelines.py``, by
  its :func:`raw_consume`;
* start and stop times over ``--cycles`` cycles (min/median/max): a start in a
  new log directory, as ``lab run`` starts its broker (Kafka formats its data
  directory first), and a start again on that directory, as ``lab broker
  start``, the notebooks and ``lab matrix`` reuse ``runs/broker-logs``;

and, once, the auditor's time for a ledger and a sink of 1,000,000 events
(target: under 3 s).

Writes ``bench/results/testbed.json``, the broker's figures under ``brokers``
(``kafka``). Run with ``make bench`` or ``python bench/testbed.py [--events N] [--repeats N]
[--cycles N] [--audit-events N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import machine  # noqa: E402

RESULTS = ROOT / "bench" / "results"
#: One record as the lab's producer writes it (83 bytes).
PAYLOAD = b'{"id":"00000000-0000-4000-8000-000000000000","seq":0,"key":"k00","produced_at":0.0}'


def produce(bootstrap: str, topic: str, events: int, value=None) -> float:
    """Produce ``events`` small JSON records as fast as possible; return records/s.

    ``value``: record ``i``'s bytes (``value(i)``); default :data:`PAYLOAD` for every record.
    """
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=5, enable_idempotence=True,
                      linger_ms=5, batch_size=64 * 1024)
    t = time.perf_counter()
    for i in range(events):
        p.send(topic, key=b"k%02d" % (i % 64), value=PAYLOAD if value is None else value(i))
    p.flush()
    took = time.perf_counter() - t
    p.close()
    return events / took


def summary(xs: list) -> dict:
    """``{"min", "median", "max"}`` of ``xs``, rounded to milliseconds (empty for no values)."""
    return {"min": round(min(xs), 3), "median": round(statistics.median(xs), 3), "max": round(max(xs), 3)} if xs else {}


def emit(out: dict, path) -> None:
    """Print a bench's figures as one JSON object and write them to ``path``."""
    text = json.dumps(out, indent=2)
    print(text)
    Path(path).write_text(text + "\n")


def raw_throughput(events: int, partitions: int, repeats: int) -> dict:
    """Start one embedded broker, produce ``events`` ``repeats`` times and read them back.

    Raises
    ------
    RuntimeError
        When a consumer reads a different number of records than were produced.
    """
    from bench.pipelines import raw_consume
    from lab.broker import embedded as broker
    from lab.kafka import tools as kafka_tools

    produced, consumed = [], {"client_defaults": [], "read_settings": []}
    with tempfile.TemporaryDirectory(prefix="testbed-kafka-") as tmp:
        info = broker.start_embedded(Path(tmp))
        try:
            for i in range(repeats):
                kafka_tools.create_topic(info.bootstrap, f"bench-{i}", partitions)
                produced.append(produce(info.bootstrap, f"bench-{i}", events))
            for _ in range(repeats):
                for label, settings in (("client_defaults", {}), ("read_settings", kafka_tools.READ_SETTINGS)):
                    read, eps = raw_consume(info.bootstrap, "bench-0", partitions, events, **settings)
                    if read != events:
                        raise RuntimeError(f"consumer ({label}) read {read} records back, produced {events}")
                    consumed[label].append(eps)
        finally:
            broker.stop_embedded(info)

    def rate(xs: list) -> dict:
        return {"median": round(statistics.median(xs)), "trials": [round(x) for x in xs]}

    return {"product": info.product, "version": info.version, "events": events, "partitions": partitions,
            "record_bytes": len(PAYLOAD), "produce_records_per_s": rate(produced),
            # CONSUMER_DEFAULTS: kafka-python's CRC check on; READ_SETTINGS: off (bench/pipelines.py's two baselines).
            "consume_records_per_s": rate(consumed["client_defaults"]),
            "consume_read_settings_records_per_s": rate(consumed["read_settings"])}


def start_stop_cycles(cycles: int) -> dict:
    """Time ``cycles`` start/stop pairs of the embedded broker: in a new log directory, then again on it.

    Raises
    ------
    RuntimeError
        When a process of a stopped broker is still running.
    """
    from lab.broker import embedded as broker
    from lab.host import processes

    times: dict[str, list] = {"start_new_dir_s": [], "start_same_dir_s": [], "stop_s": []}
    with tempfile.TemporaryDirectory(prefix="testbed-cycles-kafka-") as tmp:
        for i in range(cycles):
            log_dir = Path(tmp) / f"cycle-{i}"
            for key in ("start_new_dir_s", "start_same_dir_s"):
                t = time.perf_counter()
                info = broker.start_embedded(log_dir)
                times[key].append(time.perf_counter() - t)
                t = time.perf_counter()
                broker.stop_embedded(info)
                times["stop_s"].append(time.perf_counter() - t)
                left = [p for p in (info.broker_pid, info.proxy_pid) if processes.pid_alive(p)]
                if left:
                    raise RuntimeError(f"processes {left} still run after the stop")
    return {"cycles": cycles, **{key: {**summary(xs), "each": [round(x, 3) for x in xs]} for key, xs in times.items()}}


def audit_time(events: int = 1_000_000) -> dict:
    """Time :func:`lab.audit.auditor.audit_run` on synthetic files of ``events`` events (1% lost, 1% duplicated)."""
    from lab.audit.auditor import audit_run
    from lab.audit.ledger import SCHEMA
    from lab.sinks.reader import open_sink
    from lab.sinks.spec import SinkSpec

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
    p.add_argument("--events", type=int, default=200_000, help="records per produce trial")
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3, help="produce and consume trials; the median is kept")
    p.add_argument("--cycles", type=int, default=3, help="broker start/stop cycles")
    p.add_argument("--audit-events", type=int, default=1_000_000, help="events of the auditor's run (0: skip it)")
    a = p.parse_args(argv)
    for name, value in (("events", a.events), ("repeats", a.repeats), ("cycles", a.cycles)):
        if value < 1:
            p.error(f"--{name} must be >= 1, got {value}")
    path = RESULTS / "testbed.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    print(f"kafka: {a.repeats} x produce/consume of {a.events:,} records ...", flush=True)
    raw = raw_throughput(a.events, a.partitions, a.repeats)
    print(f"  {raw['product']} {raw['version']}: produce {raw['produce_records_per_s']['median']:,} records/s, "
          f"consume {raw['consume_records_per_s']['median']:,} records/s "
          f"({raw['consume_read_settings_records_per_s']['median']:,} with the readers' settings)", flush=True)
    print(f"kafka: {a.cycles} start/stop cycles ...", flush=True)
    cycles = start_stop_cycles(a.cycles)
    print(f"  start {cycles['start_new_dir_s']['median']} s in a new directory, "
          f"{cycles['start_same_dir_s']['median']} s again on it; stop {cycles['stop_s']['median']} s (medians)",
          flush=True)
    brokers = {"kafka": {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), **raw, **cycles,
                         "load_average": [round(x, 2) for x in os.getloadavg()]}}
    audit = old.get("audit")
    if a.audit_events:
        print(f"auditor on {a.audit_events:,} events ...", flush=True)
        audit = audit_time(a.audit_events)
        print(f"  {audit['seconds']} s (target under 3 s)", flush=True)
    out = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "machine": machine(),
           "versions": {"kafka-python": version("kafka-python"), raw["product"]: raw["version"]},
           "brokers": brokers, "audit": audit}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
