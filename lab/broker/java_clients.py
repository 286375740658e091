"""Kafka's own Java client programs the lab runs against its broker: ``lab/broker/java`` compiled once into the cache
(:mod:`lab.host.java_build`).

``LabTxnProducer`` writes transactions with Kafka's Java client (the broker's jar set, ``kafka-clients`` 4.4.0), which
speaks transactions v2 (KIP-890) to a broker that finalizes it (:mod:`lab.lessons.txn_epochs`). ``lab fetch``
compiles it once, online, as it does the Storm topology and the Samza job: an image or a bundle carries the classes.
Delivery effect: its own transactions, each committed only after every send in it succeeded.
"""

from __future__ import annotations

from pathlib import Path

from lab.host.jar_sets import KAFKA_JARS
from lab.host.java_build import JavaSources

TXN_PRODUCER = JavaSources("txn-producer", Path(__file__).resolve().parent / "java", KAFKA_JARS,
                           "lab.broker.LabTxnProducer")
#: The same classes' ``LabTxnServer``: Kafka's Java producer called one request at a time
#: (:mod:`lab.broker.java_producer`).
TXN_SERVER = JavaSources("txn-producer", TXN_PRODUCER.source_dir, KAFKA_JARS, "lab.broker.LabTxnServer")
