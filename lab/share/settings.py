"""The share pipeline's settings: what its group is set to, none left to the broker's defaults.

Group configs (KIP-932), set on the run's share group (``lab-<run id>``) before its consumers start:

``share.auto.offset.reset``        ``earliest``: the group starts at the topic's first record (the default,
                                   ``latest``, would skip what the producer sent before the first consumer).
``share.record.lock.duration.ms``  :data:`LOCK_MS`: how long an acquired record stays a consumer's before the
                                   broker gives it to another. The broker's default is 30 s with a floor of 15 s
                                   (``group.share.min.record.lock.duration.ms``); the lab's brokers lower the floor
                                   (:mod:`lab.broker.apache`) so a dead consumer's records come back within seconds.
``share.delivery.count.limit``     :data:`DELIVERY_LIMIT` (Kafka's default, stated): a record delivered this many
                                   times and not acknowledged is archived, dropped by policy.
``share.isolation.level``          the run's isolation level (Kafka's default is ``read_uncommitted``).
``errors.deadletterqueue.*``       with ``--dlq on`` only (:mod:`lab.share.dlq`): the group's dead-letter topic;
                                   with ``off`` the group keeps Kafka's blank topic name: no dead-letter topic.
"""

from __future__ import annotations

from lab.errors import LabError, choices_error
from lab.share import dlq as share_dlq

#: Milliseconds a share consumer holds an acquired record before the broker may give it to another.
LOCK_MS = 3000
#: Deliveries of one record before the broker archives it (Kafka's default, group.share.delivery.count.limit).
DELIVERY_LIMIT = 5
#: The share pipeline's consumer processes (``--consumers``): its default and its bounds (2 cores).
DEFAULT_CONSUMERS = 2
MAX_CONSUMERS = 8
#: What ``--commit`` means for the share pipeline: when a poll's records are acknowledged.
SHARE_COMMITS = {
    "auto": "implicit acknowledgement: a poll's records are accepted with the next poll (after the sink returned)",
    "after-output": "each record accepted after the sink returned, then committed: at-least-once",
    "before-output": "each record accepted and committed before the sink is written: at-most-once",
}


def group_name(run_id: str) -> str:
    """The run's share group."""
    return f"lab-{run_id}"


def group_configs(cfg) -> dict[str, str]:
    """The share group's configuration (module docstring)."""
    return {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": str(LOCK_MS),
        "share.delivery.count.limit": str(DELIVERY_LIMIT),
        "share.isolation.level": cfg.isolation_level,
        **share_dlq.group_configs(cfg.kafka.dlq, cfg.topic),
    }


def check(cfg, spec) -> None:
    """Raise :class:`LabError` for a bad share setting (only ``--pipeline share`` sets ``--consumers``, ``--dlq``)."""
    if cfg.kafka.dlq not in share_dlq.DLQ_MODES:
        raise choices_error("--dlq", cfg.kafka.dlq, share_dlq.DLQ_MODES)
    if not spec.share_group:
        if cfg.kafka.consumers != DEFAULT_CONSUMERS:
            raise LabError(f"--consumers is the share pipeline's setting; this run's pipeline is {cfg.pipeline!r}")
        if cfg.kafka.dlq != "off":
            raise LabError(f"--dlq is the share pipeline's setting (a share group's dead-letter topic); this run's "
                           f"pipeline is {cfg.pipeline!r}")
        return
    if (isinstance(cfg.kafka.consumers, bool) or not isinstance(cfg.kafka.consumers, int)
        or not 1 <= cfg.kafka.consumers <= MAX_CONSUMERS):
        raise LabError(f"consumers {cfg.kafka.consumers!r}: valid are 1 to {MAX_CONSUMERS} share consumers")
    if cfg.kafka.commit not in SHARE_COMMITS:
        raise LabError(f"commit mode {cfg.kafka.commit!r} for the share pipeline; valid: {', '.join(SHARE_COMMITS)}")
