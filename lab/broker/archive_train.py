"""The Kafka broker class archive's training run: ``python -m lab.broker.archive_train WORK ARCHIVE``.

Started by :func:`lab.broker.archive.ensure`; a leaf that no module imports,
so the broker's modules never import back up into the embedded broker.
"""

from __future__ import annotations

import sys
from pathlib import Path


def train(work: Path, archive: Path) -> None:
    """A broker that writes its loaded classes to ``archive`` when it stops, serving a run's requests meanwhile."""
    from kafka import KafkaProducer

    from lab.broker import embedded as broker
    from lab.kafka import tools as kafka_tools

    info = broker.start_embedded(work / "broker", archive_at_exit=archive)
    try:
        kafka_tools.create_topic(info.bootstrap, "train", 2)
        producer = KafkaProducer(bootstrap_servers=info.bootstrap, acks="all", enable_idempotence=True)
        for i in range(500):
            producer.send("train", str(i).encode())
        producer.flush()
        producer.close()
        txn = KafkaProducer(bootstrap_servers=info.bootstrap, acks="all", enable_idempotence=True,
                            transactional_id="lab-archive-training")
        txn.init_transactions()
        for commit in (True, False):
            txn.begin_transaction()
            txn.send("train", b"in a transaction")
            if commit:
                txn.commit_transaction()
            else:
                txn.abort_transaction()
        txn.close()
        consumer = kafka_tools.consumer(info.bootstrap, group_id="lab-archive-training", enable_auto_commit=False,
                                        auto_offset_reset="earliest", isolation_level="read_committed")
        consumer.subscribe(["train"])
        seen = 0
        for _ in range(50):
            seen += sum(len(r) for r in consumer.poll(timeout_ms=200).values())
            if seen >= 501:
                break
        consumer.commit()
        consumer.close()
    finally:
        broker.stop_embedded(info)  # SIGTERM: Kafka's clean shutdown, then the JVM writes the archive
    if not archive.is_file():
        raise SystemExit(f"the training broker stopped without writing {archive}; see {work / 'broker'}")


if __name__ == "__main__":
    train(Path(sys.argv[1]), Path(sys.argv[2]))
