"""The ledgered producer's settings that change delivery semantics, all passed to kafka-python explicitly.

Part of a run's configuration (:class:`lab.config.RunConfig`'s ``producer`` group); given flat as parameters
(``acks=``, ``retries=``, ``idempotence=``, ``transactional=``).
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.errors import LabError, choices_error

ACKS = ("0", "1", "all")


@dataclass(frozen=True)
class ProducerSettings:
    """Producer settings that change semantics; all passed to kafka-python explicitly.

    kafka-python 3.x turns idempotence off silently when ``acks`` is not ``all``
    or ``retries`` is 0, so :func:`validate` rejects those combinations instead.
    """

    acks: str = "all"
    retries: int = 5
    idempotence: bool = True
    request_timeout_ms: int = 3000
    linger_ms: int = 5
    max_in_flight: int = 5
    transactional: bool = False
    transaction_size: int = 100

    @property
    def isolation_level(self) -> str:
        """What readers must use: transactional output is only final once committed."""
        return "read_committed" if self.transactional else "read_uncommitted"

    def validate(self) -> None:
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
