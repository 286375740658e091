"""A share group's dead-letter topic (KIP-1191, Apache Kafka 4.4): where the broker moves what it gives up on.

Without one (Kafka's default: the group's ``errors.deadletterqueue.topic.name`` is blank), a record delivered
``share.delivery.count.limit`` times and never acknowledged is *archived*: the group skips it and nothing else
keeps it. With one, the broker also writes it to the dead-letter topic: its key and value (with
``errors.deadletterqueue.copy.record.enable``) and six headers that say where it came from
(:data:`HEADERS`). Measured on 4.4.0: the original record's own headers are not copied; the move is written
by the broker within a second of the last delivery's lock ending.

What the broker requires, each stated here rather than left to a default:

- the topic's name starts with the broker's ``errors.deadletterqueue.topic.name.prefix`` (``dlq.``, Kafka's
  default: the lab's brokers keep it, :data:`PREFIX`);
- the topic exists with ``errors.deadletterqueue.group.enable=true`` (a topic config; without it the broker
  refuses to write there). The lab creates it before the group is set (:func:`create_topic`), so the broker's
  ``errors.deadletterqueue.auto.create.topics.enable`` is never relied on.

The pure core is :func:`topic_name`, :func:`group_configs` and :func:`from_headers`; :func:`create_topic`,
:class:`Watch` (the driver's) and :func:`read_dead_letters` (the audit's) are the I/O. Delivery effect: a
dead-lettered record is neither delivered to the group's consumers again nor lost: the audit counts it
``dead-lettered`` (:mod:`lab.audit.auditor`).
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.errors import LabError

#: ``--dlq``: whether the run's share group has a dead-letter topic (``off``: Kafka's default, none).
DLQ_MODES = {
    "off": "no dead-letter topic (Kafka's default): a record past the delivery limit is archived, kept nowhere",
    "on": "the group's dead-letter topic dlq.<topic>: a record past the delivery limit is moved there",
}
#: The broker's required prefix of dead-letter topic names (``errors.deadletterqueue.topic.name.prefix``'s default).
PREFIX = "dlq."
#: The headers the broker writes on each dead-lettered record (KIP-1191), by what they hold.
HEADERS = {
    "topic": "__dlq.errors.topic",
    "partition": "__dlq.errors.partition",
    "offset": "__dlq.errors.offset",
    "group": "__dlq.errors.group",
    "delivery_count": "__dlq.errors.delivery.count",
    "message": "__dlq.errors.message",
}


@dataclass(frozen=True)
class DeadLetter:
    """One record of a dead-letter topic: where it came from (its headers), and where it now is."""

    topic: str
    partition: int
    offset: int
    group: str
    delivery_count: int
    message: str
    dlq_offset: int
    timestamp_ms: int
    value: bytes | None = None


def topic_name(topic: str) -> str:
    """The run's dead-letter topic: ``dlq.<topic>``."""
    return PREFIX + topic


def group_configs(dlq: str, topic: str) -> dict[str, str]:
    """The share group's dead-letter configs for ``--dlq`` (none with ``off``: the group keeps Kafka's blank)."""
    if dlq == "off":
        return {}
    return {"errors.deadletterqueue.topic.name": topic_name(topic),
            # [false] the record's key and value too, so the moved event is readable, not only its place
            "errors.deadletterqueue.copy.record.enable": "true"}


def from_headers(headers, dlq_offset: int, timestamp_ms: int, value: bytes | None = None) -> DeadLetter | None:
    """A :class:`DeadLetter` from one dead-letter record's headers (``[(key, bytes)]``); None without them."""
    h = {k: v.decode(errors="replace") if isinstance(v, bytes) else str(v) for k, v in headers or ()}
    try:
        return DeadLetter(topic=h[HEADERS["topic"]], partition=int(h[HEADERS["partition"]]),
                          offset=int(h[HEADERS["offset"]]), group=h.get(HEADERS["group"], ""),
                          delivery_count=int(h.get(HEADERS["delivery_count"]) or 0),
                          message=h.get(HEADERS["message"], ""), dlq_offset=dlq_offset, timestamp_ms=timestamp_ms,
                          value=value)
    except (KeyError, ValueError):
        return None


def _theirs(record, topic: str, group: str | None, with_value: bool = False) -> DeadLetter | None:
    """A dead-letter topic's record as a :class:`DeadLetter` when it came from ``topic`` (and ``group``), else None."""
    d = from_headers(record.headers, record.offset, record.timestamp, record.value if with_value else None)
    return d if d is not None and d.topic == topic and (group is None or d.group == group) else None


def create_topic(bootstrap: str, topic: str) -> None:
    """Create the run's dead-letter topic for ``topic`` (one partition), allowed to take a share group's records.

    Raises
    ------
    LabError
        When the broker does not create it (its words).
    """
    from lab.kafka import tools as kafka_tools

    kafka_tools.create_topic(bootstrap, topic_name(topic), 1, configs={"errors.deadletterqueue.group.enable": "true"})


def read_dead_letters(bootstrap: str, topic: str, group: str | None = None,
                      timeout_s: float = 30.0) -> list[DeadLetter]:
    """Every record of ``topic``'s dead-letter topic from ``topic`` (and ``group`` when given), in the log's order.

    Raises
    ------
    LabError
        When the dead-letter topic cannot be read to its end within ``timeout_s``.
    """
    from kafka import TopicPartition

    from lab.kafka import tools as kafka_tools

    name = topic_name(topic)
    try:
        ends = kafka_tools.end_offsets(bootstrap, name, 1, timeout_s=timeout_s)
    except TimeoutError as e:
        raise LabError(str(e)) from None
    c = kafka_tools.consumer(bootstrap)
    out = []
    try:
        for r in kafka_tools.read_to_end(c, {TopicPartition(name, 0): ends[0]}, timeout_s, name):
            d = _theirs(r, topic, group, with_value=True)
            if d is not None:
                out.append(d)
    except TimeoutError as e:
        raise LabError(str(e)) from None
    finally:
        c.close()
    return out


class Watch:
    """The share driver's look at the dead-letter topic: what the broker moved since the last look.

    A kafka-python consumer assigned to the topic's one partition from its beginning (no group); each
    :meth:`new` is one poll that does not wait.
    """

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from kafka import TopicPartition

        from lab.kafka import tools as kafka_tools

        self.topic, self.group = topic, group
        self.consumer = kafka_tools.consumer(bootstrap)
        tp = TopicPartition(topic_name(topic), 0)
        self.consumer.assign([tp])
        self.consumer.seek_to_beginning(tp)

    def new(self) -> list[DeadLetter]:
        """The records the broker moved since the last look, from this run's group (a poll that does not wait)."""
        out = []
        for records in self.consumer.poll(timeout_ms=0).values():
            for r in records:
                d = _theirs(r, self.topic, self.group)
                if d is not None:
                    out.append(d)
        return out

    def close(self) -> None:
        self.consumer.close()
