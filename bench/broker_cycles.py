"""Broker start/stop cycles: how long a start takes and whether any fails.

Starts and stops the embedded broker (the lab's proxy, then Apache Kafka; see
:func:`lab.broker.embedded.start_embedded`) ``--cycles`` times in a row in one log
directory, as ``runs/broker-logs`` is reused, and for every ``--check-every``-th
cycle produces and consumes one record through the proxy. A cycle fails when
the start raises, the record does not come back, or a process is left after
the stop.

The number this guards: while the lab picked ports with a throw-away socket
and handed them to the children, about one start in 25 failed with
``address already in use``. Each process now binds its own ports.

Run with ``python bench/broker_cycles.py [--cycles N] [--check-every K] [--out FILE]``;
prints one JSON object (per-cycle start and stop times in seconds, their
min/median/max, the failures) and writes it to ``FILE`` when given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import machine  # noqa: E402


def produce_and_consume_one(bootstrap: str, value: bytes, timeout_s: float = 10.0) -> None:
    """Write ``value`` to topic ``cycle`` and read it back; AssertionError when it does not come back."""
    from kafka import KafkaProducer, TopicPartition

    from lab.kafka import tools as kafka_tools

    kafka_tools.create_topic(bootstrap, "cycle", 1)
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    md = p.send("cycle", value).get(timeout=timeout_s)
    p.close()
    c = kafka_tools.consumer(bootstrap)
    tp = TopicPartition("cycle", 0)
    c.assign([tp])
    c.seek(tp, md.offset)
    got: list = []
    deadline = time.monotonic() + timeout_s
    while not got and time.monotonic() < deadline:
        got = [r.value for r in c.poll(timeout_ms=200).get(tp, [])]
    c.close()
    assert got == [value], f"read back {got!r}, expected [{value!r}]"


def cycles(n: int, check_every: int, log_dir: Path) -> dict:
    """Run ``n`` start/stop cycles; return times and failures."""
    from lab.broker import embedded as broker
    from lab.host import processes

    starts, stops, failures = [], [], []
    for i in range(n):
        t = time.perf_counter()
        try:
            info = broker.start_embedded(log_dir)
        except Exception as e:  # a failed start is the measurement, not the end of it
            failures.append({"cycle": i, "stage": "start", "error": f"{type(e).__name__}: {e}"})
            continue
        starts.append(time.perf_counter() - t)
        try:
            if check_every and i % check_every == 0:
                produce_and_consume_one(info.bootstrap, f"cycle-{i}".encode())
        except Exception as e:
            failures.append({"cycle": i, "stage": "produce/consume", "error": f"{type(e).__name__}: {e}"})
        finally:
            t = time.perf_counter()
            broker.stop_embedded(info)
            stops.append(time.perf_counter() - t)
        left = [p for p in (info.broker_pid, info.proxy_pid) if processes.pid_alive(p)]
        if left:
            failures.append({"cycle": i, "stage": "stop", "error": f"still running: {left}"})

    def summary(xs: list) -> dict:
        return ({"min": round(min(xs), 3), "median": round(statistics.median(xs), 3), "max": round(max(xs), 3)} if xs
                else {})

    return {"cycles": n, "failures": failures, "start_s": summary(starts), "stop_s": summary(stops),
            "starts": [round(x, 3) for x in starts], "stops": [round(x, 3) for x in stops]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=50)
    p.add_argument("--check-every", type=int, default=10,
                   help="produce and consume one record every K-th cycle (0: never)")
    p.add_argument("--out", type=Path, help="also write the JSON there")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="broker-cycles-") as tmp:
        result = cycles(a.cycles, a.check_every, Path(tmp) / "broker-logs")
    out = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine(), **result}
    text = json.dumps(out, indent=2)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
