"""Small Kafka helpers, and the one place consumer settings are defined.

Consumers here use ``assign()`` and never join a consumer group: a group
rejoin after a crash can wait for the old member's session to expire, while
assignment is instant. Offsets can still be committed to a group id
(``group_id`` without subscription).

Every kafka-python consumer the lab creates comes from :func:`consumer`:
:data:`CONSUMER_DEFAULTS`, plus :data:`READ_SETTINGS` for consumers that
read ranges in bulk (Spark tasks, the receiver's feeder, the audit's whole-topic
reads: :func:`bulk_consumer`), plus what a
pipeline's own semantics set (group id, isolation level, poll size, its
commit mode). Measurements of the settings below: 200,000 records of the
lab's events on the embedded broker, on this 2-core machine.
"""

from __future__ import annotations

import time

from lab.errors import LabError

#: Settings of every consumer the lab creates (kafka-python 3.0's default in brackets).
CONSUMER_DEFAULTS = dict(
    # [True] Offsets are committed where a pipeline's protocol says (--commit, --offsets, --ack),
    # never by a timer the protocol does not know about (plain's --commit auto turns it back on).
    enable_auto_commit=False,
    # ["latest"] A group without a committed offset starts at the topic's beginning: every
    # acknowledged event must be read, including those produced before the consumer started.
    auto_offset_reset="earliest",
    # [30000] A request without an answer fails after 5 s. Not measurable with the lab's faults:
    # a broker-outage refuses connections at once, and end_offsets during one gave up after 30 s
    # with either value.
    request_timeout_ms=5000,
    # [500] A fetch that finds nothing new returns after at most 100 ms (a record that arrives
    # answers it at once: fetch_min_bytes is 1).
    fetch_max_wait_ms=100,
    # [1 MiB] the default, stated because READ_SETTINGS raises it.
    max_partition_fetch_bytes=1 << 20,
    # [50, 30000] Retry a lost connection soon, at most 1 s apart, so a consumer is back within
    # a second of a broker-outage's end. Measured no difference after 5 s and 15 s cuts of the
    # lab's proxy (next record 0.05-0.08 s after the cut ended with either maximum).
    reconnect_backoff_ms=100,
    reconnect_backoff_max_ms=1000,
)

#: What a consumer that reads ranges in bulk adds to :data:`CONSUMER_DEFAULTS`: the range
#: reads of Spark tasks (:func:`lab.kafka.read.read_range`) and the receiver's feeder.
READ_SETTINGS = dict(
    # ["earliest" above] A range that has left the broker must fail the read, never silently
    # continue at other offsets and deliver a different set of records.
    auto_offset_reset="none",
    # [True] The broker checked each batch's CRC when it was produced, and TCP guards the transfer.
    # Measured with kafka-python's pure-Python CRC32C, before the C crc32c module was pinned (for the
    # producer, bench/results/kafka_crc.json): 38,000 records/s with the check, 146,000 without (the
    # check was three quarters of a read). With the C module: 200,000 records read in 4.02 s with the check,
    # 3.26 s without (medians of 8 in turns, bench/README.md, Past experiments; the rounds' own differences
    # have a median of 0.57 s, the check slower in 7 of 8), about half a second more on the largest run's
    # audit, for records the broker checked that cross loopback TCP only. labkafka's checkCrcs turns it on.
    check_crcs=False,
    # [1 MiB, 50 MiB] Larger fetches per partition and response. Measured no difference on
    # loopback (one partition, 5 trials: median 89,000 records/s at 4 MiB vs 108,000 at 1 MiB,
    # within the trials' spread of 76,000-122,000); kept as the settings the pipeline benchmark's
    # like-for-like baseline was measured with (bench/results/pipelines.json).
    max_partition_fetch_bytes=4 << 20,
    fetch_max_bytes=16 << 20,
)


#: The feature that turns eligible leader replicas (KIP-966) on (1) and off (0).
ELR_FEATURE = "eligible.leader.replicas.version"


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 15.0, *, replication: int = 1,
                 configs: dict | None = None, features: dict | None = None) -> dict:
    """Create ``topic`` (no error if it exists with the same partition count); the broker's finalized features.

    ``replication`` copies of each partition, and ``configs`` (topic configs such
    as ``min.insync.replicas``) set on it, so they never depend on the broker's defaults.
    ``features`` (``{name: level}``) are finalized first, cluster-wide (KIP-584: an upgrade, or a safe
    downgrade), e.g. ``{"eligible.leader.replicas.version": 0}``. Returns ``{name: level}`` of every
    finalized feature as the broker then reports it (``{}`` when it reports none).

    Raises
    ------
    LabError
        If the topic exists with a different partition count, or the broker does not answer.
    """
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            # Each try bounded by what is left: kafka-python's own bootstrap waits 30 s, so a host that accepts
            # connections but does not answer as Kafka held a run's start for 31 s (measured).
            left_ms = max(1000, int((deadline - time.monotonic()) * 1000))
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=min(5000, left_ms),
                                     bootstrap_timeout_ms=min(5000, left_ms))
        except Exception as e:  # broker still starting
            last = e
            time.sleep(0.2)
            continue
        try:
            if features:
                _finalize(admin, features)
            try:
                admin.create_topics([NewTopic(topic, partitions, replication, topic_configs=dict(configs or {}))])
            except TopicAlreadyExistsError:
                pass
            # Asked through the same client: a consumer of its own cost 0.1 s a run (measured, 25 matrix rows).
            have = _described_partitions(admin, topic, time.monotonic() + DESCRIBE_WAIT_S)
            finalized = _finalized_features(admin)
        finally:
            admin.close()
        if not have:
            raise LabError(f"topic {topic!r} on {bootstrap} was created, but the broker did not describe it within "
                           f"{DESCRIBE_WAIT_S:g} s")
        if have != partitions:
            raise LabError(f"topic {topic!r} already exists with {have} partitions, not {partitions}")
        return finalized
    raise LabError(f"could not create topic {topic!r} on {bootstrap} within {timeout_s:g} s: {last}")


def _levels(admin) -> dict:
    """``{name: level}`` of the broker's finalized features (``describe_features``' errors propagate)."""
    return {name: f["finalized"][1] for name, f in sorted(admin.describe_features().items()) if "finalized" in f}


def _finalized_features(admin) -> dict:
    try:
        return _levels(admin)
    except Exception:  # noqa: BLE001 - a broker without KIP-584's ApiVersions v3 fields reports none
        return {}


def _finalize(admin, features: dict) -> None:
    """Set each feature's level, upgrading or safely downgrading; :class:`LabError` naming one the broker refuses."""
    have = _levels(admin)
    for name, level in features.items():
        if have.get(name, 0) == level:
            continue
        how = "UPGRADE" if level > have.get(name, 0) else "SAFE_DOWNGRADE"
        answer = admin.update_features({name: (how, level)}).get(name)
        if answer != "OK":
            raise LabError(f"the broker refused feature {name}={level}: {answer}")


def consumer(bootstrap: str, **overrides):
    """A kafka-python consumer: :data:`CONSUMER_DEFAULTS` with ``overrides`` on top.

    The only place the lab constructs a ``KafkaConsumer``; bulk readers pass
    ``**READ_SETTINGS``.
    """
    from kafka import KafkaConsumer

    return KafkaConsumer(bootstrap_servers=bootstrap, **{**CONSUMER_DEFAULTS, **overrides})


def bulk_consumer(bootstrap: str, isolation_level: str, **overrides):
    """A consumer for reading whole topics (an audit's reads, :func:`read_to_end`): :data:`READ_SETTINGS`,
    polls of up to 5,000 records, ``isolation_level``, and ``overrides`` on top.

    Without the read settings a 200,000-event run's audit read its topic in 10.8 s, with them in
    3.1 s (measured, :func:`topic_copies`); the broker checked each batch's CRC when it was produced.
    """
    return consumer(bootstrap, **{**READ_SETTINGS, "isolation_level": isolation_level, "max_poll_records": 5000,
                                  **overrides})


def poll_records(consumer, max_records: int) -> list:
    """One ``poll()`` (up to 200 ms) of ``consumer``: its records in partition order, then offset order.

    A retriable Kafka error is an empty poll, and the next poll tries again: a
    cluster's broker died under the request. Measured on the three-broker
    cluster: kafka-python 3.x raised ``KafkaConnectionError`` out of ``poll()``
    when ``leader-crash`` killed the broker that was the group's coordinator,
    and the driver exited. A broker that stays away shows as a run without
    progress (the supervisor's deadline), never as a silent loop.
    """
    from kafka.errors import KafkaError

    try:
        polled = consumer.poll(timeout_ms=200, max_records=max_records)
    except KafkaError as e:
        if not getattr(e, "retriable", False):
            raise
        time.sleep(0.2)
        return []
    return [r for tp in sorted(polled, key=lambda t: t.partition) for r in polled[tp]]


#: Seconds a topic just created has to appear in the metadata (measured: 0.04 s on a quiet broker).
DESCRIBE_WAIT_S = 10.0


def _described_partitions(admin, topic: str, deadline: float) -> int:
    """How many partitions ``topic`` has in the metadata ``admin`` reads, once it has any (0 at ``deadline``)."""
    while True:
        try:
            described = admin.describe_topics([topic])
        except Exception:  # noqa: BLE001 - a topic just created may be unknown to the broker asked for a moment
            described = []
        have = sum(len(t.get("partitions") or ()) for t in described if t.get("name") == topic
                   and not t.get("error_code"))
        if have or time.monotonic() >= deadline:
            return have
        time.sleep(0.05)


def partition_count(bootstrap: str, topic: str, timeout_s: float = 10.0) -> int:
    c = consumer(bootstrap)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            parts = c.partitions_for_topic(topic)
            if parts:
                return len(parts)
            time.sleep(0.1)
        return 0
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, partitions: int, timeout_s: float = 5.0) -> dict[int, int]:
    """Log end offsets per partition (transaction markers included): ListOffsets(latest), each partition's
    high watermark, as a ``read_uncommitted`` reader sees it. A fresh consumer each call.

    Asks again until every partition has answered or ``timeout_s`` passed: kafka-python 3.0.12's ``end_offsets``
    leaves out a partition whose leader it does not know yet and then fails with ``KeyError`` (measured: just after a
    broker's SIGKILL and restart, while it was still recovering a topic's partitions).

    Raises
    ------
    TimeoutError
        When some partition has not answered within ``timeout_s``.
    """
    from kafka import TopicPartition
    from kafka.errors import KafkaTimeoutError

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    deadline = time.monotonic() + timeout_s
    c = consumer(bootstrap)
    try:
        while True:
            try:
                ends = c.end_offsets(tps, timeout_ms=max(100, int((deadline - time.monotonic()) * 1000)))
                return {tp.partition: ends[tp] for tp in tps}
            except (KeyError, KafkaTimeoutError) as e:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no end offset of {topic} partition {e} within {timeout_s} s") from None
                time.sleep(0.2)
    finally:
        c.close()


def topic_copies(bootstrap: str, topic: str, partitions: int, isolation_level: str = "read_uncommitted",
                 timeout_s: float = 120.0, key=None) -> dict:
    """Each event id's copies in the topic, read straight from the broker: ``{id: [copies, partition, offset]}``
    with the partition and offset of its first copy.

    Reads every partition from the beginning to its log end (stopping on the
    consumer's position, since transaction markers occupy offsets). ``key``, if
    given, names a record from its decoded JSON value in place of its ``"id"``;
    a record it cannot name (a value that is not JSON, a missing field) is skipped.

    Raises
    ------
    TimeoutError
        When the topic cannot be read to its end within ``timeout_s``.
    """
    import json

    from kafka import TopicPartition

    ends = end_offsets(bootstrap, topic, partitions)
    c = bulk_consumer(bootstrap, isolation_level)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    counts: dict[str, list] = {}
    try:
        for r in read_to_end(c, {tp: ends[tp.partition] for tp in tps}, timeout_s, topic):
            try:
                eid = (key or _event_id)(json.loads(r.value))
            except (ValueError, KeyError, TypeError):
                continue
            if eid in counts:
                counts[eid][0] += 1
            else:
                counts[eid] = [1, r.partition, r.offset]
    finally:
        c.close()
    return counts


def _event_id(value: dict) -> str:
    return value["id"]


def read_to_end(c, ends: dict, timeout_s: float, what: str):
    """Every record of ``ends``' partitions from the beginning up to its end offset there, in poll order.

    ``c`` is a consumer (assigned and seeked here); ``ends`` maps each
    ``TopicPartition`` to the offset to stop at. The loop stops on the consumer's
    position, not on the last record seen, since transaction markers occupy
    offsets; records at or beyond an end offset (written after it was taken) are
    left out, so the read is one snapshot.

    Raises
    ------
    TimeoutError
        When the partitions cannot be read to their ends within ``timeout_s`` (naming ``what``).
    """
    tps = list(ends)
    c.assign(tps)
    c.seek_to_beginning(*tps)
    deadline = time.monotonic() + timeout_s
    while any(c.position(tp) < ends[tp] for tp in tps):
        if time.monotonic() > deadline:
            raise TimeoutError(f"could not read {what} to its end within {timeout_s:g} s")
        for tp, records in c.poll(timeout_ms=200).items():
            for r in records:
                if r.offset < ends[tp]:
                    yield r
