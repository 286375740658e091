"""The kafka-eos driver's transactional producer (:mod:`lab.pipelines.kafka_eos`): its settings, and what its errors
and its epoch say, for either client of ``--txn-client``.

``python``: kafka-python's ``KafkaProducer`` (transactions v1: it ends a transaction with ``EndTxn`` version 3 at
most, so every transaction of a driver runs under one epoch). ``java``: Kafka's Java client in a JVM beside the
driver (:class:`lab.broker.java_producer.JavaTxnProducer`, ``kafka-clients`` 4.4.0: transactions v2, a new epoch per
transaction), offering the same calls and error classes, so the driver's checks (every send acknowledged before the
commit, every call bounded) are the same for both.

Delivery guarantee: none of its own; the settings are those the driver's guarantee needs (idempotence, ``acks=all``).
"""

from __future__ import annotations

#: The transaction timeout the coordinator enforces: an open transaction older than this is aborted
#: and its producer fenced. A live driver's transaction must outlast a broker fault it rides out:
#: measured, broker-crash@at=2s:for=3s kept the first batch's transaction open about 9 s (the broker
#: back after 5.3 s more), committed once the broker was back, and the run was exactly once. A dead
#: driver's transaction never waits for it: the restart's init_transactions() aborts it (the
#: supervisor restarts a driver 0.2 s after a kill; init_transactions() measured 0.2-0.4 s).
TRANSACTION_TIMEOUT_MS = 60_000
#: A request without an answer fails after 10 s and is retried (within the delivery timeout). Measured:
#: ack-loss@at=1s:count=5 dropped the answers to the driver's first batch, which then took one such
#: timeout longer (first batch done at 11.2 s), and the run was exactly once.
REQUEST_TIMEOUT_MS = 10_000
#: How long init_transactions() and a send waiting for metadata may block before a KafkaTimeoutError; also the
#: bound on the consumer's offset look-ups.
MAX_BLOCK_MS = 30_000


def producer(bootstrap: str, txn_id: str, delivery_timeout_ms: int, client: str = "python"):
    """The transactional producer (``client``: ``--txn-client``); every setting that decides delivery is stated here,
    for Kafka's Java client by its Java names (:mod:`lab.broker.java_producer`)."""
    if client == "java":
        from lab.broker.java_producer import JavaTxnProducer

        return JavaTxnProducer({
            "bootstrap.servers": bootstrap, "transactional.id": txn_id, "enable.idempotence": "true", "acks": "all",
            "retries": 2**31 - 1, "max.in.flight.requests.per.connection": 5,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "delivery.timeout.ms": delivery_timeout_ms,
            "request.timeout.ms": REQUEST_TIMEOUT_MS, "max.block.ms": MAX_BLOCK_MS, "linger.ms": 5,
            "client.id": txn_id})
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=txn_id,
        # Transactions need an idempotent producer writing to every in-sync replica.
        enable_idempotence=True,
        acks="all",
        # Idempotence makes each retry safe (the broker drops a repeated sequence number), so only the
        # time bound decides when a send gives up: the delivery timeout, not a count.
        retries=2**31 - 1,
        max_in_flight_requests_per_connection=5,  # the most idempotence keeps in order
        transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
        delivery_timeout_ms=delivery_timeout_ms,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        max_block_ms=MAX_BLOCK_MS,
        linger_ms=5,
        # The driver creates the output topic with the input's partition count; a metadata request
        # must never create it first with the broker's default of one.
        allow_auto_create_topics=False,
        # Named after the transactional id, so the lab's proxy can cut this client alone (leader-unreachable).
        client_id=txn_id,
    )


def fenced(error) -> bool:
    """Whether a Kafka error says a newer producer with this transactional id fenced this one.

    kafka-python raises the fencing itself from a transactional call, but a send after it raises a plain
    ``KafkaError`` that carries the ``ProducerFencedError`` as its argument (kafka-python 3.0, measured). Under
    transactions v2 (the Java client) a send of an epoch that is over is refused with ``INVALID_PRODUCER_EPOCH``.
    """
    from kafka.errors import InvalidProducerEpochError, ProducerFencedError

    kinds = (ProducerFencedError, InvalidProducerEpochError)
    return isinstance(error, kinds) or any(isinstance(a, kinds) for a in getattr(error, "args", ()))


def epoch(producer) -> tuple[int | None, int | None]:
    """``(producer id, epoch)`` after init_transactions() (kafka-python keeps them in its transaction manager; the
    Java client's are read by its JVM)."""
    if hasattr(producer, "producer_id_and_epoch"):
        return producer.producer_id_and_epoch
    pe = getattr(getattr(producer, "_transaction_manager", None), "producer_id_and_epoch", None)
    return getattr(pe, "producer_id", None), getattr(pe, "epoch", None)


def kafka_python_version() -> str:
    """kafka-python's version, as the eos-init event names the client."""
    from importlib.metadata import version

    return version("kafka-python")
