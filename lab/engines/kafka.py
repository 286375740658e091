"""The pipelines that are a Kafka client only (plain, share, kafka-eos): their options group and checks.

``--commit`` (when a consumer commits, or a share consumer acknowledges), ``--consumers`` (the share group's
consumers), ``--dlq`` (the share group's dead-letter topic), ``--trust-commit``, ``--delivery-timeout`` and
``--txn-client`` (kafka-eos's transactional producer).
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.engines.hooks import Engine
from lab.errors import choices_error
from lab.kafka import eos_settings
from lab.share import settings as share_settings

COMMIT_MODES = {
    "auto": "offsets committed on a timer inside poll() (kafka-python auto-commit)",
    "after-output": "offsets committed after the sink returns: at-least-once",
    "before-output": "offsets committed before the sink is written: at-most-once",
}


@dataclass(frozen=True)
class KafkaOptions:
    """The Kafka clients' settings that change semantics (every run has them; only these pipelines change them)."""

    commit: str = "auto"
    consumers: int = share_settings.DEFAULT_CONSUMERS
    dlq: str = "off"
    trust_commit: bool = False
    delivery_timeout_s: float = eos_settings.DELIVERY_TIMEOUT_S
    txn_client: str = eos_settings.DEFAULT_TXN_CLIENT


def check(cfg, spec, pipelines) -> None:
    if cfg.kafka.commit not in COMMIT_MODES:
        raise choices_error("commit mode", cfg.kafka.commit, COMMIT_MODES)
    eos_settings.check(cfg)
    share_settings.check(cfg, spec)


def _needs_commit_before_output(cfg) -> str | None:
    # Only that commit order has a moment between the commit and the output; with another, a plan
    # naming it would wait out the deadline and end with the fault not applied.
    if cfg.kafka.commit == "before-output":
        return None
    return (f"point after-commit-before-output exists only with --commit before-output "
            f"(this run: --commit {cfg.kafka.commit})")


def prepare(cfg, spec, write_event) -> None:
    """A share run's state reader is compiled once (``lab fetch`` does it online); here only when missing.

    A kafka-eos run with ``--txn-client java`` needs a JVM, which an external broker does not bring: without one,
    the error names how to get Java before any driver starts (not after three of them failed). Its classes are
    compiled by the driver when missing, from the broker's jar set.
    """
    if spec.share_group:
        from lab.share.build import STATE

        STATE.ensure()
    if cfg.kafka.txn_client == "java":
        from lab.host.java import find_java

        find_java()


ENGINE = Engine(name="kafka", words="Kafka (no engine)", options=KafkaOptions, check=check,
                stated=lambda cfg, spec: eos_settings.stated(cfg),
                requirements={"after-commit-before-output": _needs_commit_before_output},
                prepare=prepare)
