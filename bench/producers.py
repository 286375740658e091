"""The ledgered producer against the raw clients it is built on: kafka-python and confluent-kafka.

One embedded Apache Kafka broker (:func:`lab.broker.embedded.start_embedded`, as ``bench/pipelines.py``
starts it), measured **through the lab's proxy**: ``BrokerInfo.bootstrap``, the address a run's ledgered
producer is given (the supervisor hands it ``broker.bootstrap``), so every figure pays the proxy's hop as a
run does. In the same invocation, each on a topic of its own with the same ``--events`` events (the same ids,
keys and JSON values the ledgered producer sends, :func:`lab.run.produced_events.event_value`):

* ``kafka_python_lab``: kafka-python as the lab configures it (the ledgered producer's own
  ``KafkaProducer``, :meth:`LedgeredProducer._make_producer`), no ledger, one flush at the end;
* ``kafka_python_tuned``: kafka-python with the same semantic settings but tuned for throughput (larger
  batches, a longer linger, uncompressed; in flight stays 5, idempotence's most): each of
  :data:`TUNINGS` on a quarter of the events, the fastest then on all of them (``tuning`` records which);
* ``confluent_raw``: confluent-kafka's ``Producer`` with the lab's settings
  (:meth:`LedgeredProducer._make_confluent`), no delivery callback, ``poll(0)`` as the ledgered loop polls;
* ``confluent_reports``: ``confluent_raw`` with a delivery callback that keeps what any ledger needs of a report
  (the sequence number read from the value, partition, offset, time) in a list, and nothing more: the ceiling of a
  producer that records each send's outcome, whatever it then does with the records;
* ``ledgered_kafka_python`` and ``ledgered_confluent``: the ledgered producer (``rate=0``), as a run starts it
  (its thread), timed from its ``producer-start`` to its ``producer-done`` event (``bench/pipelines.py``'s
  ``producer_rate``); the raw ones from making the client to closing it, so both pay for the client's start.

The confluent clients, a second or two each, are measured ``--rounds`` times in turns (raw, reports, ledgered) and
reported as medians, and each round's pair as a ratio of its own (``ledgered_over_confluent_raw_per_round``):
the machine's load from other work moves a single figure by a third. After each measurement the topic's end offsets are
summed: every figure is of a topic that holds every event (``topic_records``), else the bench fails. Per measurement
also the CPU it took, per event: this process's (the client's threads included) and the broker's and proxy's when their
pids are known (the machine's 2 cores are shared by all three).

Goals (``goals``): the ledgered confluent producer at 0.8 of the fastest raw client or more
(``ledgered_over_fastest_raw``), and 5 times the 7.8k events/s the ledgered producer made with kafka-python
before (``speedup_vs_7800``). Writes ``bench/results/producers.json``::

    python bench/producers.py [--events 200000] [--partitions 3] [--rounds 5] [--out FILE]

:func:`producer_comparison` is the measurement alone, for a caller with a broker of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import machine  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "producers.json"
EVENTS = 200_000
#: The ledgered producer's rate with kafka-python before this bench (events/s): the speed-up's base.
BEFORE_PER_S = 7800
RATIO_GOAL = 0.8
SPEEDUP_GOAL = 5.0
#: kafka-python's throughput settings tried (the lab's: linger 5 ms, batches of 16 KiB).
TUNINGS = [{"linger_ms": 20, "batch_size": 256 * 1024}, {"linger_ms": 50, "batch_size": 1024 * 1024},
           {"linger_ms": 5, "batch_size": 256 * 1024}]


class Cpu:
    """CPU seconds of this process and of the processes ``pids`` (the broker, the proxy) over a ``with`` block."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids, self.took = pids, {}

    def _now(self) -> dict[str, float]:
        import psutil

        t = os.times()
        out = {"producer": t.user + t.system}
        for name, pid in self.pids.items():
            try:
                c = psutil.Process(pid).cpu_times()
                out[name] = c.user + c.system
            except psutil.Error:
                pass
        return out

    def __enter__(self) -> Cpu:
        self._start = self._now()
        return self

    def __exit__(self, *exc) -> None:
        end = self._now()
        self.took = {k: end[k] - v for k, v in self._start.items() if k in end}


def _config(bootstrap: str, topic: str, events: int, client: str):
    from lab.config import make_config

    return make_config(pipeline="plain", events=events, rate=0, topic=topic, kafka_bootstrap=bootstrap,
                       name=f"bench-{client}", producer_client=client)


def _maker(cfg, bootstrap: str, tmp: Path):
    from lab.events import EventLog
    from lab.run.producer import LedgeredProducer

    return LedgeredProducer(cfg, bootstrap, tmp / "unused.sqlite", EventLog(tmp, "producer"))


def _events(seed: int, events: int) -> tuple[list[str], list[str]]:
    from lab.faults.catalogue import event_keys
    from lab.run.produced_events import event_ids

    return event_ids(seed, events), event_keys(seed, events)


def raw_kafka_python(bootstrap: str, topic: str, events: int, tuning: dict | None = None) -> float:
    """kafka-python, no ledger: the lab's ``KafkaProducer``, or with ``tuning`` (same semantics); seconds."""
    from lab.run.produced_events import event_value

    cfg = _config(bootstrap, topic, events, "kafka-python")
    ids, keys = _events(cfg.seed, events)
    with tempfile.TemporaryDirectory(prefix="lab-bench-producers-") as tmp:
        maker = _maker(cfg, bootstrap, Path(tmp))
        t = time.perf_counter()
        if tuning is None:
            producer = maker._make_producer()
            key_of = keys.__getitem__
        else:
            from kafka import KafkaProducer

            p = cfg.producer  # the lesson block's semantic settings, with throughput ones on top
            producer = KafkaProducer(
                bootstrap_servers=bootstrap, acks="all", retries=p.retries, enable_idempotence=p.idempotence,
                max_in_flight_requests_per_connection=p.max_in_flight, request_timeout_ms=p.request_timeout_ms,
                delivery_timeout_ms=maker._delivery_timeout_ms(), max_block_ms=10000, retry_backoff_ms=100,
                reconnect_backoff_ms=100, reconnect_backoff_max_ms=1000, compression_type=None, **tuning)
            encoded = [k.encode() for k in keys]
            key_of = encoded.__getitem__
        send = producer.send
        for seq in range(events):
            now = time.time()
            send(topic, key=key_of(seq), value=event_value(ids[seq], seq, keys[seq], int(now * 1000), now))
        producer.flush()
        producer.close()
        return time.perf_counter() - t


def raw_confluent(bootstrap: str, topic: str, events: int) -> float:
    """confluent-kafka, no ledger, no delivery callback: the lab's settings, ``poll(0)`` every ``POLL_EVERY``
    sends as the ledgered loop polls; seconds."""
    from lab.kafka.confluent_producer import POLL_EVERY
    from lab.run.produced_events import event_value

    cfg = _config(bootstrap, topic, events, "confluent")
    ids, keys = _events(cfg.seed, events)
    with tempfile.TemporaryDirectory(prefix="lab-bench-producers-") as tmp:
        t = time.perf_counter()
        producer = _maker(cfg, bootstrap, Path(tmp))._make_confluent()
        produce, poll = producer.produce, producer.poll
        for seq in range(events):
            now = time.time()
            value = event_value(ids[seq], seq, keys[seq], int(now * 1000), now)
            try:
                produce(topic, value, keys[seq])
            except BufferError:
                producer.produce_waiting(topic, value, keys[seq])
            if not seq % POLL_EVERY:
                poll(0)
        producer.flush(120)
        producer.close(5)
        return time.perf_counter() - t


def confluent_reports(bootstrap: str, topic: str, events: int) -> float:
    """:func:`raw_confluent`, a delivery callback per send keeping ``(seq, partition, offset, time)``; seconds."""
    from lab.kafka.confluent_producer import POLL_EVERY
    from lab.run.produced_events import event_value, seq_of

    cfg = _config(bootstrap, topic, events, "confluent")
    ids, keys = _events(cfg.seed, events)
    kept: list = []
    keep, now_s = kept.append, time.time

    def report(err, msg) -> None:
        keep((seq_of(msg.value()), msg.partition(), msg.offset(), now_s()))

    with tempfile.TemporaryDirectory(prefix="lab-bench-producers-") as tmp:
        t = time.perf_counter()
        producer = _maker(cfg, bootstrap, Path(tmp))._make_confluent()
        produce, poll = producer.produce, producer.poll
        for seq in range(events):
            now = time.time()
            value = event_value(ids[seq], seq, keys[seq], int(now * 1000), now)
            try:
                produce(topic, value, keys[seq], on_delivery=report)
            except BufferError:
                producer.produce_waiting(topic, value, keys[seq], on_delivery=report)
            if not seq % POLL_EVERY:
                poll(0)
        producer.flush(120)
        producer.close(5)
        took = time.perf_counter() - t
    if len(kept) != events:
        raise RuntimeError(f"confluent_reports: {len(kept)} delivery reports for {events} sends")
    return took


def ledgered(bootstrap: str, topic: str, events: int, client: str) -> tuple[float, dict]:
    """The ledgered producer as a run starts it; seconds from ``producer-start`` to ``producer-done``, and its
    counts."""
    from lab.events import read_events

    cfg = _config(bootstrap, topic, events, client)
    with tempfile.TemporaryDirectory(prefix="lab-bench-producers-") as tmp:
        lp = _maker(cfg, bootstrap, Path(tmp))
        lp.start()
        lp.join()
        timeline = read_events(Path(tmp))
    start = next(e["t"] for e in timeline if e["type"] == "producer-start")
    done = next(e for e in timeline if e["type"] == "producer-done")
    counts = {k: done[k] for k in ("sent", "acked", "failed", "unknown")}
    if lp.stats.error or counts["acked"] != events:
        raise RuntimeError(f"the ledgered producer ({client}) did not have every send acknowledged: {counts}, "
                           f"error {lp.stats.error}")
    return done["t"] - start, counts


def producer_comparison(bootstrap: str, events: int = EVENTS, partitions: int = 3, rounds: int = 5,
                        pids: dict[str, int] | None = None, tunings: list[dict] | None = None) -> dict:
    """Every client's events/s on the broker at ``bootstrap`` (module docstring), each topic checked whole.

    Parameters
    ----------
    bootstrap : str
        The address the runs' producers use (the lab's proxy).
    pids : dict, optional
        ``{"broker": pid, "proxy": pid}``: their CPU per event is recorded too.

    Raises
    ------
    RuntimeError
        When a topic holds another number of records than ``events``, or the ledgered producer did not
        have every send acknowledged.
    """
    from lab.kafka import tools as kafka_tools

    stamp = int(time.time())
    measured: dict[str, list[dict]] = {}

    def measure(name: str, n: int, run) -> dict:
        topic = f"bench-producers.{stamp}.{name}.{len(measured.get(name, []))}"
        kafka_tools.create_topic(bootstrap, topic, partitions)
        with Cpu(pids or {}) as cpu:
            took = run(topic, n)
        counts = None
        if isinstance(took, tuple):
            took, counts = took
        stored = sum(kafka_tools.end_offsets(bootstrap, topic, partitions).values())
        if stored != n:
            raise RuntimeError(f"{name}: topic {topic} holds {stored} records, {n} were sent")
        entry = {"per_s": round(n / took), "seconds": round(took, 2), "events": n, "topic_records": stored,
                 "cpu_us_per_event": {k: round(v / n * 1e6, 2) for k, v in cpu.took.items()},
                 "load_average": [round(x, 2) for x in os.getloadavg()]}
        if counts:
            entry["counts"] = counts
        measured.setdefault(name, []).append(entry)
        print(f"  {name}: {entry['per_s']:,}/s ({stored:,} records in the topic; CPU us/event "
              f"{entry['cpu_us_per_event']})", flush=True)
        return entry

    tries = []
    for tuning in tunings or TUNINGS:
        e = measure("kafka_python_tuning", max(1, events // 4),
                    lambda t, n, tu=tuning: raw_kafka_python(bootstrap, t, n, tu))
        tries.append({**tuning, "per_s": e["per_s"], "events": e["events"]})
    best = max(tries, key=lambda x: x["per_s"])
    tuning = {k: v for k, v in best.items() if k not in ("per_s", "events")}
    measure("kafka_python_lab", events, lambda t, n: raw_kafka_python(bootstrap, t, n))
    measure("kafka_python_tuned", events, lambda t, n: raw_kafka_python(bootstrap, t, n, tuning))
    measure("ledgered_kafka_python", events, lambda t, n: ledgered(bootstrap, t, n, "kafka-python"))
    for _ in range(rounds):  # in turns: a passing load falls on both alike
        measure("confluent_raw", events, lambda t, n: raw_confluent(bootstrap, t, n))
        measure("confluent_reports", events, lambda t, n: confluent_reports(bootstrap, t, n))
        measure("ledgered_confluent", events, lambda t, n: ledgered(bootstrap, t, n, "confluent"))

    def summary(name: str) -> dict:
        trials = measured[name]
        median = statistics.median(x["per_s"] for x in trials)
        return {"per_s": round(median), **({"trials": trials} if len(trials) > 1 else trials[0])}

    clients = {name: summary(name) for name in ("kafka_python_lab", "kafka_python_tuned", "confluent_raw",
                                                "confluent_reports", "ledgered_kafka_python", "ledgered_confluent")}
    raw = {name: clients[name]["per_s"] for name in ("kafka_python_lab", "kafka_python_tuned", "confluent_raw")}
    fastest = max(raw, key=raw.get)
    led = clients["ledgered_confluent"]["per_s"]
    ratio = led / raw[fastest]
    # Each round's pair, measured one after the other, as a ratio of its own.
    pairs = [round(e["per_s"] / r["per_s"], 3)
             for r, e in zip(measured["confluent_raw"], measured["ledgered_confluent"])]
    # The ceiling: a producer that only keeps each delivery report, against the raw client, round by round.
    ceiling = [round(e["per_s"] / r["per_s"], 3)
               for r, e in zip(measured["confluent_raw"], measured["confluent_reports"])]
    # The ledger's own cost: the ledgered producer against the ceiling, round by round.
    own = [round(e["per_s"] / r["per_s"], 3)
           for r, e in zip(measured["confluent_reports"], measured["ledgered_confluent"])]
    return {
        "bootstrap": "the lab's proxy (BrokerInfo.bootstrap), as runs produce",
        "events": events, "partitions": partitions, "rounds": rounds,
        "clients": clients,
        "tuning": tuning, "tunings_tried": tries,
        "fastest_raw": fastest,
        "ledgered_over_fastest_raw": round(ratio, 3),
        "ledgered_over_confluent_raw_per_round": pairs,
        "ledgered_over_confluent_raw_round_median": statistics.median(pairs),
        "reports_over_confluent_raw_per_round": ceiling,
        "reports_over_confluent_raw_round_median": statistics.median(ceiling),
        "ledgered_over_reports_per_round": own,
        "ledgered_over_reports_round_median": statistics.median(own),
        "ledgered_kafka_python_over_kafka_python_lab": round(
            clients["ledgered_kafka_python"]["per_s"] / raw["kafka_python_lab"], 3),
        "speedup_vs_7800": round(led / BEFORE_PER_S, 2),
        "goals": {"ratio": RATIO_GOAL, "ratio_met": ratio >= RATIO_GOAL,
                  "speedup": SPEEDUP_GOAL, "speedup_met": led / BEFORE_PER_S >= SPEEDUP_GOAL},
    }


def main(argv=None) -> int:
    from lab.broker import embedded as broker

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=EVENTS)
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5, help="turns of the confluent pair (raw, ledgered); medians")
    p.add_argument("--out", default=str(RESULTS))
    a = p.parse_args(argv)
    result = {"command": " ".join([".venv/bin/python", "bench/producers.py", *sys.argv[1:]]), "exit_status": None,
              "what": __doc__.splitlines()[0], "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "machine": machine()}
    with tempfile.TemporaryDirectory(prefix="lab-bench-producers-") as tmp:
        info = broker.start_embedded(Path(tmp) / "broker")
        try:
            print(f"{a.events:,} events per client through the proxy at {info.bootstrap} ...", flush=True)
            result.update(producer_comparison(info.bootstrap, a.events, a.partitions, a.rounds,
                                              pids={"broker": info.broker_pid, "proxy": info.proxy_pid}))
            result["broker"] = f"{info.product} {info.version}"
        finally:
            broker.stop_embedded(info)
    import confluent_kafka

    result["versions"] = {"kafka-python": version("kafka-python"), "confluent-kafka": version("confluent-kafka"),
                          "librdkafka": confluent_kafka.libversion()[0]}
    result["machine_after"] = {"load_average": [round(x, 2) for x in os.getloadavg()]}
    result["exit_status"] = 0
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    c = result["clients"]
    print(f"kafka-python lab {c['kafka_python_lab']['per_s']:,}/s, tuned {c['kafka_python_tuned']['per_s']:,}/s "
          f"({result['tuning']}), confluent raw {c['confluent_raw']['per_s']:,}/s; ledgered kafka-python "
          f"{c['ledgered_kafka_python']['per_s']:,}/s, confluent {c['ledgered_confluent']['per_s']:,}/s: "
          f"{result['ledgered_over_fastest_raw']} of the fastest raw ({result['fastest_raw']}; per round, median "
          f"{result['ledgered_over_confluent_raw_round_median']}), "
          f"{result['speedup_vs_7800']}x 7.8k/s; written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
