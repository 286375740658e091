"""Reading Kafka inside Spark tasks: the lab's one range reader and its one record-to-row rule.

Spark's Python workers import this module for every task that reads Kafka
(the ``direct`` pipeline's RDD tasks, the ``labkafka`` source's reads), so it
imports nothing heavy at its top: kafka-python and pyarrow are imported by
the functions that use them, never PySpark.

Reading a range
---------------
:func:`read_range` reads offsets ``[start, end)`` of one partition with
``assign()`` + ``seek()`` (never a consumer group: a rejoin after a crash
waits for the old member's session) and the consumer settings of
:data:`lab.kafka.tools.READ_SETTINGS`. It stops when the consumer's
*position* reaches ``end``, not when it has seen offset ``end - 1``:
transaction markers occupy offsets and are never returned as records, so a
reader waiting for ``end - 1`` could wait forever. It yields each poll's
records in the range as one list, so callers choose their own batching
(the direct pipeline row by row, the ``labkafka`` source in Arrow chunks
of :data:`ARROW_CHUNK_ROWS`).

Records and rows
----------------
A lab event is a record whose value is the producer's JSON object with (at
least) the fields :data:`EVENT_FIELDS`: ``id`` (string), ``seq`` (integer)
and ``key`` (string); ``event_time_ms`` (integer, :data:`OPTIONAL_FIELDS`) is
read when present (the ``event_time_ms`` column, null without it). :func:`record_row` turns one record into the sink's
row ``(event_id, seq, partition, offset)`` (:data:`lab.sinks.spec.Row`,
columns :data:`ROW_COLUMNS`); :func:`arrow_events` does the same for a
chunk of records at once, into the columns :data:`COLUMNS` (Arrow's JSON
reader parses the chunk in C++; on anything it cannot read, the chunk is
parsed again record by record with :func:`event_fields`, so both give the
same rows or the same error). Every path, Spark's own ``kafka`` reader
included (:func:`lab.pipelines.structured.kafka_input.events_from_kafka_rows`),
fails on a record that is not a lab event with :data:`NOT_AN_EVENT`, naming
its partition and offset.

Delivery guarantee
------------------
Reading ``[start, end)`` returns every record of the range exactly once, in
offset order, and none outside it, every time while the broker keeps them
(with ``read_committed``: none of an aborted transaction, where the broker
honours it).

On failure
----------
:class:`KafkaReadStalled` when the position does not move for ``stall_s``
seconds (broker unreachable longer than that); kafka-python's
``OffsetOutOfRangeError`` when the range has left the broker
(``auto_offset_reset="none"``: never silently read other offsets);
:class:`NotALabEvent` (a ``ValueError``) for a record that is not a lab
event. Spark fails the task and retries it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence

from lab.kafka import tools as kafka_tools

#: Seconds a range read may go without moving its position before it fails (Spark then retries the task).
READ_STALL_S = 60.0
#: Records one ``poll()`` of a range read may return.
POLL_RECORDS = 10_000
#: Rows per Arrow batch the ``labkafka`` source hands to Spark.
ARROW_CHUNK_ROWS = 20_000
#: Isolation levels a range read accepts.
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")

#: The fields of a record's JSON value that make it a lab event, with their types.
EVENT_FIELDS = (("id", "string"), ("seq", "long"), ("key", "string"))
#: Fields of the value a stateful query needs and older events lack: read as null when absent.
OPTIONAL_FIELDS = (("event_time_ms", "long"),)
#: The columns of an event read from Kafka (the ``labkafka`` source's schema, Arrow batches, the files sink).
COLUMNS = (("event_id", "string"), ("seq", "long"), ("key", "string"), ("partition", "int"), ("offset", "long"),
           ("event_time_ms", "long"))
#: The sink's row, :data:`lab.sinks.spec.Row`: these columns, in this order.
ROW_COLUMNS = ("event_id", "seq", "partition", "offset")
#: How every reader names a record that is not a lab event.
NOT_AN_EVENT = "record {partition}@{offset} is not a lab event"

_INT64 = 1 << 63


class KafkaReadStalled(RuntimeError):
    """A range read made no progress for ``stall_s`` seconds."""


class NotALabEvent(ValueError):
    """A record whose value is not the lab's JSON event; the message names its partition and offset."""


# -- records to rows -------------------------------------------------------------
def _not_an_event(value, partition: int, offset: int) -> NotALabEvent:
    shown = value[:80] if isinstance(value, (bytes, bytearray, str)) else value
    return NotALabEvent(f"{NOT_AN_EVENT.format(partition=partition, offset=offset)}: {shown!r}")


def event_fields(value: bytes, partition: int, offset: int) -> tuple[str, int, str]:
    """``(id, seq, key)`` of a record's value: the rule every reader follows.

    The producer writes ``{"id":"<36-char uuid>","seq":N,"key":"kNN",...}``
    with compact separators; that layout is sliced directly (about a third
    of ``json.loads``'s cost, measured), anything else is parsed as JSON.

    Raises
    ------
    NotALabEvent
        The value is not JSON, or lacks ``id`` (string), ``seq`` (64-bit
        integer) or ``key`` (string); the message names ``partition@offset``.
    """
    if value is None:  # a tombstone
        raise _not_an_event(value, partition, offset)
    if value[:7] == b'{"id":"' and value[43:51] == b'","seq":':
        comma = value.find(b",", 51)
        seq = value[51:comma]
        if 0 < len(seq) <= 18 and seq.isdigit() and value[comma:comma + 8] == b',"key":"':
            quote = value.find(b'"', comma + 8)
            key = value[comma + 8:quote]
            if quote > 0 and b"\\" not in key and b"\\" not in value[7:43]:
                try:
                    return value[7:43].decode(), int(seq), key.decode()
                except UnicodeDecodeError:
                    pass  # JSON parsing below names the record
    try:
        event = json.loads(value)
        event_id, seq, key = event["id"], event["seq"], event["key"]
    except (ValueError, KeyError, TypeError):
        raise _not_an_event(value, partition, offset) from None
    if not (isinstance(event_id, str) and isinstance(key, str) and type(seq) is int and -_INT64 <= seq < _INT64):
        raise _not_an_event(value, partition, offset)
    return event_id, seq, key


def record_row(partition: int, offset: int, value: bytes) -> tuple:
    """A Kafka record as the sink's row ``(event_id, seq, partition, offset)``.

    Raises
    ------
    NotALabEvent
        See :func:`event_fields`.
    """
    event_id, seq, _ = event_fields(value, partition, offset)
    return event_id, seq, partition, offset


def _arrow_schema():
    import pyarrow as pa

    types = {"string": pa.string(), "long": pa.int64(), "int": pa.int32()}
    return (pa.schema([(name, types[t]) for name, t in COLUMNS]),
            pa.schema([(n, types[t]) for n, t in EVENT_FIELDS + OPTIONAL_FIELDS]))


def event_time_ms(value: bytes) -> int | None:
    """The event time a lab event carries (``event_time_ms``), or ``None`` when it has none.

    Only called for values :func:`event_fields` has accepted as lab events.
    """
    try:
        stamp = json.loads(value).get("event_time_ms")
    except (ValueError, AttributeError):
        return None
    return stamp if type(stamp) is int and -_INT64 <= stamp < _INT64 else None


def arrow_events(partition: int, offsets: Sequence[int], values: Sequence[bytes]):
    """A chunk of one partition's records as one Arrow batch of :data:`COLUMNS`: :func:`record_row`, vectorised.

    Arrow's JSON reader parses the values joined by newlines (measured: 0.75
    µs a record against 2.1 µs record by record with :func:`event_fields`);
    when it fails, returns another row count, or leaves a field null, the
    chunk is parsed record by record, so the result, or the error naming
    the first bad record, is the one :func:`event_fields` gives.

    Raises
    ------
    NotALabEvent
        See :func:`event_fields`.
    """
    import pyarrow as pa

    schema, value_schema = _arrow_schema()
    fields = None
    try:
        import pyarrow.json as pa_json

        blob = b"\n".join(values)
        # One line per record, or Arrow's rows would not line up with the offsets.
        if len(values) and blob.count(b"\n") == len(values) - 1:
            table = pa_json.read_json(
                pa.BufferReader(blob), read_options=pa_json.ReadOptions(use_threads=False, block_size=len(blob) + 1),
                parse_options=pa_json.ParseOptions(explicit_schema=value_schema, unexpected_field_behavior="ignore"))
            if table.num_rows == len(values) and all(table.column(n).null_count == 0 for n, _ in EVENT_FIELDS):
                fields = [table.column(n).combine_chunks() for n, _ in EVENT_FIELDS + OPTIONAL_FIELDS]
                for f in fields:  # Arrow's reader lets invalid UTF-8 into a string: the reference path names it
                    f.validate(full=True)
    except Exception:  # anything Arrow cannot read (or a None value): the reference path decides
        fields = None
    if fields is None:  # the first record that is not an event raises here
        parsed = [event_fields(v, partition, o) for o, v in zip(offsets, values)]
        fields = [pa.array([f[i] for f in parsed], value_schema.field(i).type) for i in range(len(EVENT_FIELDS))]
        fields.append(pa.array([event_time_ms(v) for v in values], pa.int64()))
    n = len(offsets)
    return pa.RecordBatch.from_arrays(
        fields[:len(EVENT_FIELDS)] + [pa.array([partition] * n, pa.int32()), pa.array(offsets, pa.int64())]
        + fields[len(EVENT_FIELDS):], schema=schema)


def rows_of_arrow(batches: Iterable) -> list[tuple]:
    """Arrow batches with :data:`COLUMNS` as sink rows ``(event_id, seq, partition, offset)``."""
    rows: list[tuple] = []
    for b in batches:
        cols = b.to_pydict()
        rows.extend(zip(*(cols[c] for c in ROW_COLUMNS)))
    return rows


#: The columns of a Kafka record as Spark's ``kafka`` reader hands them to a task that parses them itself.
RECORD_COLUMNS = ("value", "partition", "offset")


def rows_of_records(batches: Iterable) -> list[tuple]:
    """Arrow batches of Kafka records (:data:`RECORD_COLUMNS`) as sink rows, each value parsed by :func:`arrow_events`.

    The same rows, or the same :class:`NotALabEvent` naming the first bad
    record, as :func:`record_row` gives record by record and Spark SQL's
    :func:`lab.pipelines.structured.kafka_input.events_from_kafka_rows` in the
    JVM. A batch may hold several Kafka partitions; each run of one
    partition is parsed as one chunk.
    """
    rows: list[tuple] = []
    for b in batches:
        if not b.num_rows:
            continue
        cols = b.to_pydict()
        values, partitions, offsets = (cols[c] for c in RECORD_COLUMNS)
        start = 0
        for i in range(1, len(partitions) + 1):
            if i == len(partitions) or partitions[i] != partitions[start]:
                rows.extend(rows_of_arrow([arrow_events(partitions[start], offsets[start:i], values[start:i])]))
                start = i
    return rows


# -- reading a range -------------------------------------------------------------
def read_range(bootstrap: str, topic: str, partition: int, start: int, end: int, *, stall_s: float = READ_STALL_S,
               isolation_level: str = "read_uncommitted", check_crcs: bool = False,
               poll_records: int = POLL_RECORDS) -> Iterator[list]:
    """Yield the records of ``topic``-``partition`` at offsets ``[start, end)``, one list per poll.

    Each record is kafka-python's ``ConsumerRecord`` (``.offset``,
    ``.value``, ...); lists are never empty. ``check_crcs`` turns the
    client's CRC32C check back on (see :data:`lab.kafka.tools.READ_SETTINGS`).

    Delivery guarantee: every record of the range exactly once, in offset
    order; none outside it.

    Raises
    ------
    KafkaReadStalled
        The position did not move for ``stall_s`` seconds.
    kafka.errors.OffsetOutOfRangeError
        ``start`` is no longer in the broker.
    """
    from kafka import TopicPartition

    tp = TopicPartition(topic, partition)
    consumer = kafka_tools.consumer(bootstrap, **{**kafka_tools.READ_SETTINGS, "check_crcs": check_crcs},
                                    isolation_level=isolation_level)
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        position, last_move = start, time.monotonic()
        while position < end:
            records = consumer.poll(timeout_ms=200, max_records=poll_records).get(tp, [])
            if records and records[-1].offset >= end:
                records = [r for r in records if r.offset < end]
            if records:
                yield records
            now_at = consumer.position(tp)
            if now_at > position:
                position, last_move = now_at, time.monotonic()
            elif time.monotonic() - last_move > stall_s:
                raise KafkaReadStalled(
                    f"{topic}-{partition}: stuck at offset {position} of [{start}, {end}) for {stall_s:g} s")
    finally:
        consumer.close()


def arrow_chunks(polls: Iterable[list], partition: int, chunk_rows: int = ARROW_CHUNK_ROWS) -> Iterator:
    """The records of :func:`read_range` as Arrow batches (:func:`arrow_events`) of at least ``chunk_rows`` rows.

    The last batch holds what is left; no batch is empty.
    """
    offsets: list[int] = []
    values: list[bytes] = []
    for records in polls:
        for r in records:
            offsets.append(r.offset)
            values.append(r.value)
        if len(offsets) >= chunk_rows:
            yield arrow_events(partition, offsets, values)
            offsets, values = [], []
    if offsets:
        yield arrow_events(partition, offsets, values)


def earliest_offsets(bootstrap: str, topic: str, partitions: int, consumer=None) -> dict[int, int]:
    """The first offset of each partition: where a stream with no stored position begins.

    ``consumer``: a kafka-python consumer to ask (a fresh one, closed again, when omitted).

    Raises
    ------
    Exception
        kafka-python's error when the broker does not answer.
    """
    from kafka import TopicPartition

    c = consumer if consumer is not None else kafka_tools.consumer(bootstrap)
    try:
        found = c.beginning_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: int(o) for tp, o in found.items()}
    finally:
        if consumer is None:
            c.close()
