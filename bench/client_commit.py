"""Two Kafka clients' commits after a send failed inside the transaction: kafka-python and confluent-kafka.

The same fault for each client, on one three-broker cluster started for the benchmark (``lab broker start
--nodes 3`` in a temporary runs directory, stopped at the end): a transactional producer commits a first
transaction (one record per partition, so it knows every leader and is connected to every broker); then the
lab's ``leader-unreachable`` cut (:func:`lab.broker.cluster.cut_output_leader`) takes a broker that leads a
partition of the topic and coordinates nothing away from every client for ``--cut`` seconds; the producer
begins a second transaction, sends ``--records`` records to every partition, flushes (its sends to the cut
broker fail when the delivery timeout, ``--delivery-timeout``, passes) and calls the commit **without checking
its sends**: what the client's commit does is the measurement.

Per client: ``acked`` and ``failed`` sends of the second transaction (from their futures or delivery reports),
``commit`` (``committed``, or ``refused`` with the client's error), and once the cut is over, the second
transaction's records a ``read_committed`` reader gets (``read_committed``). A client that keeps its promise
refuses the commit (then 0 records are read); one that does not commits the acknowledged ones alone.

Run with ``python bench/client_commit.py [--out FILE]``; writes ``bench/results/client_commit.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.machine import machine  # noqa: E402

PARTITIONS = 3


def _kafka_python(bootstrap: str, txn_id: str, delivery_s: float):
    from lab.pipelines.shared.eos_producer import producer as _producer

    p = _producer(bootstrap, txn_id, int(delivery_s * 1000))  # the kafka-eos driver's producer, every setting
    p.init_transactions()

    def transaction(topic: str, label: str, records: int) -> dict:
        p.begin_transaction()
        futures = [p.send(topic, value=json.dumps({"id": f"{label}-{part}-{i}"}).encode(), partition=part)
                   for part in range(PARTITIONS) for i in range(records)]
        p.flush(timeout=delivery_s + 15)
        out = {"acked": sum(f.succeeded() for f in futures), "failed": sum(f.failed() for f in futures),
               "error": next((repr(f.exception)[:200] for f in futures if f.failed()), None)}
        try:
            p.commit_transaction()  # unchecked on purpose: the client's own decision is the measurement
            out["commit"] = "committed"
        except Exception as e:
            out.update(commit="refused", commit_error=repr(e)[:300])
            try:
                p.abort_transaction()
            except Exception:
                pass
        return out

    return transaction, lambda: p.close(timeout=5)


def _confluent(bootstrap: str, txn_id: str, delivery_s: float):
    from confluent_kafka import KafkaException, Producer

    # The same settings as the kafka-eos driver's producer, in librdkafka's names.
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "enable.idempotence": True,
                  "acks": "all", "message.timeout.ms": int(delivery_s * 1000), "request.timeout.ms": 10_000,
                  "linger.ms": 5})
    p.init_transactions(30)

    def transaction(topic: str, label: str, records: int) -> dict:
        p.begin_transaction()
        reports = {"acked": 0, "failed": 0, "error": None}

        def on_delivery(err, msg):
            if err is None:
                reports["acked"] += 1
            else:
                reports["failed"] += 1
                reports["error"] = reports["error"] or str(err)[:200]

        for part in range(PARTITIONS):
            for i in range(records):
                p.produce(topic, value=json.dumps({"id": f"{label}-{part}-{i}"}).encode(), partition=part,
                          on_delivery=on_delivery)
        p.flush(delivery_s + 15)
        out = dict(reports)
        try:
            p.commit_transaction(30)
            out["commit"] = "committed"
        except KafkaException as e:
            out.update(commit="refused", commit_error=str(e)[:300])
            try:
                p.abort_transaction(30)
            except KafkaException:
                pass
        return out

    return transaction, lambda: p.flush(5)


# Named by the installed versions, which the figures belong to.
CLIENTS = {f"kafka-python {version('kafka-python')}": _kafka_python,
           f"confluent-kafka {version('confluent-kafka')}": _confluent}


def measure(name: str, broker, topic: str, records: int, cut_s: float, delivery_s: float) -> dict:
    from lab.broker.cluster import cut_output_leader
    from lab.kafka import tools as kafka_tools

    kafka_tools.create_topic(broker.bootstrap, topic, PARTITIONS, replication=3)
    transaction, close = CLIENTS[name](broker.bootstrap, f"{topic}-txn", delivery_s)
    try:
        first = transaction(topic, "first", 1)
        cut = cut_output_leader(broker, topic, cut_s)
        began = time.monotonic()
        second = transaction(topic, "second", records)
    finally:
        close()
    time.sleep(max(0.0, cut_s - (time.monotonic() - began)) + 2)  # the cut over: every broker readable
    copies = kafka_tools.topic_copies(broker.bootstrap, topic, PARTITIONS, isolation_level="read_committed",
                                      timeout_s=60)
    read = sum(c for eid, (c, _, _) in copies.items() if eid.startswith("second-"))
    return {"client": name, "first_commit": first["commit"], "cut_node": cut.get("node"), "cut_leads": cut.get("leads"),
            "coordinators": cut.get("coordinators"), "sent": records * PARTITIONS, **second, "read_committed": read,
            "committed_past_failed_sends": second["commit"] == "committed" and second["failed"] > 0}


def main(argv=None) -> int:
    from lab.broker import shared as shared_broker

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=20, help="records per partition in the second transaction")
    p.add_argument("--cut", type=float, default=20.0, help="seconds the broker is cut off (default 20)")
    p.add_argument("--delivery-timeout", type=float, default=11.0, help="the clients' delivery timeout, s (default 11)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "client_commit.json"))
    a = p.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="lab-bench-client-commit-") as tmp:
        broker = shared_broker.start_detached(tmp, nodes=3)
        try:
            for i, name in enumerate(CLIENTS):
                r = measure(name, broker, f"client-commit.{int(time.time())}.{i}", a.records, a.cut, a.delivery_timeout)
                print(json.dumps(r), flush=True)
                results.append(r)
        finally:
            shared_broker.stop_detached(tmp)
    Path(a.out).write_text(json.dumps({
        "what": __doc__.splitlines()[0], "records_per_partition": a.records, "cut_s": a.cut,
        "delivery_timeout_s": a.delivery_timeout, "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": " ".join([".venv/bin/python", "bench/client_commit.py", *(argv or sys.argv[1:])]),
        "exit_status": 0, "clients": results}, indent=2))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
