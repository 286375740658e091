"""The ledgered producer's settings that change delivery semantics, all passed to its client explicitly.

Part of a run's configuration (:class:`lab.config.RunConfig`'s ``producer`` group); given flat as parameters
(``acks=``, ``retries=``, ``idempotence=``, ``transactional=``, ``producer_client=``).
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.errors import LabError, choices_error

ACKS = ("0", "1", "all")
#: The ledgered producer's Kafka client. kafka-python is the lessons' client (its behaviour is what the notebooks
#: show: producer settings, lost acknowledgements, idempotence, transactions, and what :mod:`lab.kafka.transactions`
#: guards against); confluent-kafka (librdkafka) sends the same events several times as fast
#: (``bench/producers.py``), for large runs.
PRODUCER_CLIENTS = ("kafka-python", "confluent")


@dataclass(frozen=True)
class ProducerSettings:
    """Producer settings that change semantics; all passed to the client explicitly.

    kafka-python 3.x turns idempotence off silently when ``acks`` is not ``all``
    or ``retries`` is 0, so :func:`validate` rejects those combinations instead.
    ``producer_client`` is the client that sends (:data:`PRODUCER_CLIENTS`): both get the
    same settings (:mod:`lab.kafka.confluent_producer` names librdkafka's).
    """

    acks: str = "all"
    retries: int = 5
    idempotence: bool = True
    request_timeout_ms: int = 3000
    linger_ms: int = 5
    max_in_flight: int = 5
    transactional: bool = False
    transaction_size: int = 100
    producer_client: str = "kafka-python"

    @property
    def isolation_level(self) -> str:
        """What readers must use: transactional output is only final once committed."""
        return "read_committed" if self.transactional else "read_uncommitted"

    def validate(self) -> None:
        if self.producer_client not in PRODUCER_CLIENTS:
            raise choices_error("producer client", self.producer_client, PRODUCER_CLIENTS)
        if str(self.acks) not in ACKS:
            raise choices_error("acks", self.acks, ACKS)
        if self.retries < 0:
            raise LabError(f"retries must be >= 0, got {self.retries}")
        if self.transactional and not self.idempotence:
            raise LabError("a transactional producer is idempotent: use --idempotence on with --transactional on")
        if self.transaction_size < 1:
            raise LabError(f"transaction_size must be >= 1, got {self.transaction_size}")
        if self.idempotence and (str(self.acks) != "all" or self.retries == 0):
            raise LabError(
                f"idempotence needs acks=all and retries > 0 (got acks={self.acks}, retries={self.retries}); "
                "turn idempotence off or change acks/retries"
            )
