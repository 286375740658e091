"""The ledgered producer's second client: confluent-kafka (librdkafka), with the lab's producer settings.

kafka-python is the lab's client (``--producer-client kafka-python``, the default): the lessons show its
behaviour. ``--producer-client confluent`` sends the same events through ``confluent_kafka.Producer``
instead, for large runs: measured on the lab's broker through its proxy, 200,000 events
(``bench/producers.py``), several times kafka-python's rate, most of a send's work done in C.

Every setting that decides what a send means is given here (:func:`confluent_config`), in librdkafka's
names, with the values the kafka-python producer gets; none is left to a librdkafka default that
differs from kafka-python's. A delivery report's error is mapped to the ledger's words by
:func:`is_definite_rejection`, the rule the kafka-python path keeps.

One difference measured: a produce request whose answer is lost (``ack-loss``) is retried after
``request.timeout.ms``; when the partition has taken more than five batches since, the broker answers
"out of order sequence number". Those records are ``unknown`` (:data:`OUT_OF_ORDER_SEQUENCE_NUMBER`), and
with ``--transactional on`` librdkafka takes it as a fatal error: the producer stops, its open transaction's
sends unknown, the events after it never sent (4 of 8 runs of ``ack-loss@at=0.5s:count=4`` at 1,000 events/s;
kafka-python goes on).

Delivery guarantee: none of its own; the producer's settings (acks, idempotence, retries,
transactions) decide it, as they do for kafka-python.
"""

from __future__ import annotations

import time

from lab.kafka.producer_settings import ProducerSettings
from lab.kafka.transactions import CallTimedOut

#: Sends between two ``poll(0)`` calls at full speed (``--rate 0``). Each call releases the GIL and serves
#: the delivery reports waiting; once a send: 2.8 us of the producing thread's CPU per event, once every 64:
#: 2.6 (200,000 events, no ledger). A paced run polls at every send.
POLL_EVERY = 64
#: How long a full local queue may hold a send (librdkafka's ``BufferError``) before it counts as failed:
#: kafka-python's ``max_block_ms`` in the lab's settings (10 s), so both clients give up alike.
BLOCK_S = 10.0


def confluent_config(p: ProducerSettings, bootstrap: str, transactional_id: str | None,
                     delivery_timeout_ms: int) -> dict:
    """librdkafka's configuration for the ledgered producer's settings ``p`` (every semantic one stated).

    ``delivery_timeout_ms``: how long a send may take, retries included
    (:meth:`lab.run.producer.LedgeredProducer._delivery_timeout_ms`).
    """
    config = {
        "bootstrap.servers": bootstrap,
        # What an acknowledgement waits for: "0", "1" or "all", as kafka-python's acks.
        "acks": p.acks,
        # librdkafka retries INT32_MAX times by default; --retries decides it here as for kafka-python.
        "retries": p.retries,
        # Off by default in librdkafka, on in kafka-python: stated, never left to either.
        "enable.idempotence": p.idempotence,
        # More than one request in flight reorders a retried batch unless the producer is idempotent.
        "max.in.flight.requests.per.connection": p.max_in_flight,
        # librdkafka's request.timeout.ms is the broker's wait for its replicas only; its wait for a produce
        # response is socket.timeout.ms (60 s by default). kafka-python's request_timeout_ms is both, so both
        # are set: an acknowledgement the proxy drops (ack-loss) is retried after request_timeout_ms, as with
        # kafka-python, and not after 60 s, when the send has already run out of its delivery timeout.
        "request.timeout.ms": p.request_timeout_ms,
        "socket.timeout.ms": p.request_timeout_ms,
        # A send's whole life, retries included (kafka-python's delivery_timeout_ms; librdkafka: 300 s).
        "message.timeout.ms": delivery_timeout_ms,
        "linger.ms": p.linger_ms,
        # kafka-python waits a fixed 100 ms before a retry; librdkafka backs off exponentially up to
        # retry.backoff.max.ms (1 s by default): fixed here too, so retries come as often.
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 100,
        "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1000,
        # librdkafka's default partitioner (consistent_random, CRC32) puts a key on another partition than
        # kafka-python's and Java's murmur2; this one puts every key where kafka-python does.
        "partitioner": "murmur2_random",
        # kafka-python's transaction_timeout_ms (60 s), which librdkafka shares: stated.
        "transaction.timeout.ms": 60000,
        # enable.gapless.guarantee is left off, librdkafka's default: an idempotent producer that finds a gap goes
        # on, as kafka-python does. Not stated because librdkafka warns on stderr whenever the property is set.
        # Uncompressed batches, as kafka-python's default compression_type.
        "compression.type": "none",
        # librdkafka writes its own log lines to stderr: at its default level every reconnect while a broker is
        # down (a broker-crash: about 20 lines a second) and every coordinator retry reach the learner's terminal.
        # Errors only; what a send came to is the ledger's to say.
        "log_level": 3,
    }
    if transactional_id:
        config["transactional.id"] = transactional_id
    return config


#: The broker's answer to a retried batch it can no longer match to the first attempt: librdkafka reports the
#: batch's records with it when that attempt's acknowledgement was lost ("rewound sequence number", its actions
#: "MsgPossiblyPersisted"; measured under ack-loss): they may be in the topic, so unknown, not failed.
OUT_OF_ORDER_SEQUENCE_NUMBER = 45


def is_definite_rejection(err) -> bool:
    """True when a delivery report's ``KafkaError`` says the broker certainly did not store the record.

    Only the broker's own answer can say so: an error code above 0 (librdkafka's codes below 0 are its
    own: ``_MSG_TIMED_OUT``, ``_TRANSPORT``, ``_TIMED_OUT``, a purge, any of which may hide a write that
    happened) that is not retriable, and not :data:`OUT_OF_ORDER_SEQUENCE_NUMBER`. A delivery report's
    ``KafkaError`` always reads ``retriable()`` false (confluent-kafka builds it from the code alone), so
    whether the code is retriable is read from kafka-python's table of broker errors, the one the
    kafka-python path judges by.
    """
    from kafka.errors import for_code

    code = err.code()
    if code == OUT_OF_ORDER_SEQUENCE_NUMBER:
        return False
    return code > 0 and not err.retriable() and not getattr(for_code(code), "retriable", False)


class ConfluentProducer:
    """A ``confluent_kafka.Producer`` with the calls the ledgered producer makes of kafka-python's.

    ``produce`` and ``poll`` are the client's own (the send loop calls them directly);
    :meth:`flush`, the transaction calls and :meth:`close` behave as kafka-python's do for the
    ledgered producer: a flush that leaves sends undelivered raises, a transaction call that runs
    out of ``call_s`` raises :class:`lab.kafka.transactions.CallTimedOut` (its outcome unknown).
    Delivery reports are served in the thread that calls ``poll``, ``flush`` or a transaction call.
    """

    def __init__(self, config: dict, call_s: float, block_s: float = BLOCK_S) -> None:
        from confluent_kafka import Producer

        self.client = Producer(config)
        self.produce, self.poll = self.client.produce, self.client.poll
        self.call_s, self.block_s = call_s, block_s

    def produce_waiting(self, *args, **kwargs) -> None:
        """``produce`` that waits, serving delivery reports, while the local queue is full (backpressure, not a
        failure); ``BufferError`` once it stayed full for ``block_s``."""
        deadline = time.monotonic() + self.block_s
        while True:
            try:
                return self.produce(*args, **kwargs)
            except BufferError:
                if time.monotonic() > deadline:
                    raise
                self.poll(0.05)

    def flush(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for every send's delivery report; raise when some are still undelivered."""
        left = self.client.flush(timeout)
        if left:
            raise TimeoutError(f"flush(): {left} sends not delivered after {timeout:g} s")

    def init_transactions(self) -> None:
        self._call("init_transactions()", self.client.init_transactions, self.block_s)

    def begin_transaction(self) -> None:
        self.client.begin_transaction()

    def commit_transaction(self) -> None:
        self._call("commit_transaction()", self.client.commit_transaction, self.call_s)

    def abort_transaction(self) -> None:
        self._call("abort_transaction()", self.client.abort_transaction, self.call_s)

    def _call(self, what: str, call, timeout_s: float) -> None:
        from confluent_kafka import KafkaError, KafkaException

        try:
            call(timeout_s)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError._TIMED_OUT:
                raise CallTimedOut(what, timeout_s) from exc
            raise

    def close(self, timeout: float) -> None:
        """Deliver what can be delivered within ``timeout`` s; purge the rest, its reports served (as errors)."""
        if self.client.flush(timeout):
            self.client.purge()
            self.client.poll(0)
