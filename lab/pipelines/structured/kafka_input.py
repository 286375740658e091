"""Where the ``structured`` pipeline's events come from: the lab's ``labkafka`` source or Spark's ``kafka``.

Both give the same columns (:data:`lab.spark.kafka_source.SCHEMA`: ``event_id``,
``seq``, ``key``, ``partition``, ``offset``), one Spark partition per Kafka
partition with new offsets, the same admission control (at most
``max_batch_records`` offsets per micro-batch) and the same isolation level,
so everything after the source (``foreachBatch``, the sinks, the named
points, the checkpoint) is one code path. One difference of where, not of
what: with Spark's reader a stateless query's database sink gets the records
and its Python tasks parse them (``parse_in_task``), into the same rows.

Which of the two a run uses (``--kafka-reader``, ``LAB_KAFKA_READER``: ``auto``,
``labkafka``, ``spark``) is decided by
:func:`lab.pipelines.shared.kafka_reader.resolve_reader`, which the ``direct``
pipeline shares. :func:`spark_kafka_options` lists what the ``spark`` reader
passes to the connector.

Delivery guarantee
------------------
Receipt is exactly once with either reader: both replay a micro-batch's
offset range from the offset log after a restart (``failOnDataLoss`` is on
for Spark's reader, so a range no longer in Kafka fails the query instead of
being skipped).
"""

from __future__ import annotations

import json

from lab.errors import LabError
from lab.kafka.read import EVENT_FIELDS, NOT_AN_EVENT, OPTIONAL_FIELDS
from lab.pipelines.shared.kafka_reader import kafka_records, task_consumer_options

#: The event fields of a record's JSON value (:data:`lab.kafka.read.EVENT_FIELDS`) as a Spark DDL schema.
VALUE_SCHEMA = ", ".join(f"{name} {t}" for name, t in EVENT_FIELDS + OPTIONAL_FIELDS)


def events_from_kafka_rows(df):
    """Spark's Kafka rows (``key``, ``value``, ``topic``, ``partition``, ``offset``, ...) as the lab's event columns.

    The same rule as :func:`lab.kafka.read.event_fields`, in Spark SQL: the
    fields :data:`lab.kafka.read.EVENT_FIELDS` of the JSON value, then the
    record's partition and offset (:data:`lab.kafka.read.COLUMNS`).

    On failure: a value that is not a lab event (not JSON, or without ``id``,
    ``seq`` or ``key``) fails the batch with its partition and offset
    (:data:`lab.kafka.read.NOT_AN_EVENT`), as the ``labkafka`` reader does,
    instead of arriving as a row of nulls.
    """
    from pyspark.sql import functions as F

    value = F.from_json(F.col("value").cast("string"), VALUE_SCHEMA, {"mode": "FAILFAST"})
    parsed = df.select(value.alias("v"), "partition", "offset")
    not_event = F.col("v").isNull()
    for name, _ in EVENT_FIELDS:
        not_event = not_event | F.col(f"v.{name}").isNull()
    message = F.format_string(NOT_AN_EVENT.format(partition="%d", offset="%d"), F.col("partition"), F.col("offset"))
    # COLUMNS' order and types (the test of this module compares the schema with labkafka's).
    return parsed.select(
        F.when(not_event, F.raise_error(message)).otherwise(F.col("v.id")).alias("event_id"),
        F.col("v.seq").alias("seq"), F.col("v.key").alias("key"),
        F.col("partition").cast("int").alias("partition"), F.col("offset").cast("long").alias("offset"),
        *(F.col(f"v.{name}").alias(name) for name, _ in OPTIONAL_FIELDS))


def kafka_event_stream(spark, reader: str, bootstrap: str, topic: str, partitions: int, max_batch_records: int,
                isolation_level: str, parse_in_task: bool = False):
    """The streaming DataFrame of events from ``topic``, through ``reader`` (``labkafka`` or ``spark``).

    Both start at the earliest offsets (a new query) or at the checkpoint's
    (a restarted one); the options each source gets are :data:`READER_OPTIONS`'.

    ``parse_in_task`` (``spark`` reader only): the records' columns
    :data:`lab.kafka.read.RECORD_COLUMNS` instead of the event columns, for an
    output whose Python task parses the values itself
    (:func:`lab.kafka.read.rows_of_records`). Measured over 1,000,000 events
    (``bench/spark_stages.py``, stages ``to_python`` and ``to_python_raw``):
    the records to Python and parsed there by Arrow's JSON reader take half
    the time of Spark SQL's ``from_json`` and the hop of its columns.

    Raises
    ------
    LabError
        ``reader`` is neither ``labkafka`` nor ``spark``.
    """
    if reader not in READER_OPTIONS:
        raise LabError(f"unknown Kafka reader {reader!r}; valid: labkafka, spark")
    # lesson: kafka-source
    fmt, options = READER_OPTIONS[reader]
    stream = spark.readStream.format(fmt)
    for key, value in options(bootstrap, topic, partitions, max_batch_records, isolation_level).items():
        stream = stream.option(key, value)
    records = stream.load()
    if reader == "labkafka":
        return records
    return kafka_records(records) if parse_in_task else events_from_kafka_rows(records)
    # end lesson: kafka-source



def kafka_record_stream(spark, bootstrap: str, topic: str, partitions: int, max_batch_records: int | None,
                        isolation_level: str):
    """The streaming DataFrame of ``topic``'s records as they are (``key``, ``value``, ``partition``), through Spark's
    ``kafka`` format with :func:`spark_kafka_options`: what Spark's Kafka sink copies to the output topic.

    ``max_batch_records`` None: no ``maxOffsetsPerTrigger`` (real-time mode, whose batches end by time).
    The ``partition`` column sends each record to the output topic's partition of the same number.
    """
    options = spark_kafka_options(bootstrap, topic, partitions, max_batch_records or 0, isolation_level)
    if max_batch_records is None:
        del options["maxOffsetsPerTrigger"]
    stream = spark.readStream.format("kafka")
    for key, value in options.items():
        stream = stream.option(key, value)
    return stream.load().select("key", "value", "partition")


def labkafka_options(bootstrap: str, topic: str, partitions: int, max_batch_records: int,
                     isolation_level: str) -> dict:
    """The options the ``labkafka`` reader passes to the lab's source (:mod:`lab.spark.kafka_source` documents each)."""
    return {"bootstrap": bootstrap, "topic": topic, "partitions": partitions,
            "maxRecordsPerTrigger": max_batch_records, "isolationLevel": isolation_level}


def spark_kafka_options(bootstrap: str, topic: str, partitions: int, max_batch_records: int,
                        isolation_level: str, fetch_wait_ms: int | None = None) -> dict:
    """The options the ``spark`` reader passes to ``readStream.format("kafka")``, in order.

    :func:`kafka_event_stream` sets exactly these, and notebooks print them
    for a run (:func:`lab.notebook.kafka_reader_options`). ``fetch_wait_ms``:
    ``LAB_TASK_FETCH_WAIT_MS`` when None (:class:`lab.host.start_tuning.StartTuning`).

    ``assign``               fixed partitions, no consumer-group subscription (as labkafka reads):
                             the offsets live in the checkpoint, never in a group.
    ``startingOffsets``      ``earliest`` for a new query; a restarted one starts from its offset log.
    ``maxOffsetsPerTrigger`` admission control: at most this many offsets per micro-batch.
    ``failOnDataLoss``       ``true``: a logged range no longer in Kafka fails the query, never skipped.
    ``kafka.isolation.level`` the run's ``isolation`` (read_committed hides aborted transactions).
    ``kafka.max.poll.records`` records one ``poll()`` of a task's consumer may return: 10,000
                             (:data:`lab.kafka.read.POLL_RECORDS`, as labkafka's reads) instead of
                             Kafka's 500. Throughput only: a task still reads exactly its offset range.
    ``kafka.fetch.max.wait.ms`` 20 ms instead of Kafka's 500 (:data:`lab.host.start_tuning.TASK_FETCH_WAIT_MS`):
                             a task's offset look-ups no longer wait behind a fetch the broker holds.
    """
    return {
        "kafka.bootstrap.servers": bootstrap,
        "assign": json.dumps({topic: list(range(partitions))}),
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": max_batch_records,
        "failOnDataLoss": "true",
        "kafka.isolation.level": isolation_level,
        **task_consumer_options(fetch_wait_ms),
    }


#: Per reader: the source format ``readStream.format`` gets, and the function giving its options.
#: ("labkafka" is :data:`lab.spark.kafka_source.SHORT_NAME`, written out: that module imports pyspark, and
#: :mod:`lab.config` imports this one.)
READER_OPTIONS = {"labkafka": ("labkafka", labkafka_options), "spark": ("kafka", spark_kafka_options)}
