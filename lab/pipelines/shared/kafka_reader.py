"""Which Kafka reader a Spark pipeline's session uses: the lab's ``labkafka`` source or Spark's ``kafka``.

The ``structured`` pipeline streams through it (:mod:`lab.pipelines.structured.kafka_input`
builds the stream); the ``direct`` pipeline reads each batch's planned ranges through it.

``--kafka-reader`` (``LAB_KAFKA_READER``)
-----------------------------------------
``auto``      Spark's ``kafka`` format when its connector
              (``spark-sql-kafka-0-10``, cached by ``lab fetch`` and added to
              every session, or ``LAB_SPARK_PACKAGES``) is on the driver's
              classpath; else ``labkafka``.
``labkafka``  the lab's Python data source (kafka-python inside Spark tasks,
              no jar): :mod:`lab.spark.kafka_source`.
``spark``     Spark's ``kafka`` format; a clear error when the connector is
              absent.

Delivery effect: none; either reader replays a batch's logged offset range.
"""

from __future__ import annotations

from lab.errors import DriverConfigError

#: Spark's Kafka connector class; on the classpath when ``format("kafka")`` works.
KAFKA_CONNECTOR_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def connector_on_classpath(spark) -> bool:
    """Whether Spark's Kafka connector can be loaded by this session's driver."""
    loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        spark._jvm.java.lang.Class.forName(KAFKA_CONNECTOR_CLASS, False, loader)
    except Exception:  # py4j wraps the JVM's ClassNotFoundException
        return False
    return True


def resolve_reader(spark, choice: str) -> str:
    """``labkafka`` or ``spark``: the reader a run uses for ``--kafka-reader choice``.

    ``auto`` picks ``spark`` when the connector is on the classpath (the pinned
    jars ``lab fetch`` caches, which :func:`lab.spark.session.session_conf` adds;
    or ``LAB_SPARK_PACKAGES``).

    Raises
    ------
    DriverConfigError
        ``choice`` is ``spark`` and the connector is not on the classpath (with how
        to get it). The supervisor does not restart a driver for it.
    """
    if choice == "labkafka":
        return "labkafka"
    found = connector_on_classpath(spark)
    if choice == "spark" and not found:
        raise DriverConfigError(
            "--kafka-reader spark: Spark's Kafka connector is not on the classpath. Run `lab fetch` once "
            "(it caches the pinned connector jars, which every Spark session then loads), "
            "or use --kafka-reader labkafka (no jar needed)")
    return "spark" if found else "labkafka"


def kafka_records(df):
    """Spark's Kafka rows as :data:`lab.kafka.read.RECORD_COLUMNS`, the value unparsed, for a task that parses the
    values itself (:func:`lab.kafka.read.rows_of_records`); ``partition`` an int, as the event columns have it."""
    from pyspark.sql import functions as F

    return df.select("value", F.col("partition").cast("int").alias("partition"), "offset")


def task_consumer_options(fetch_wait_ms: int | None = None) -> dict:
    """The options of Spark's ``kafka`` reader for its tasks' consumers, beyond what a read needs to be right:
    throughput only, a task still reads exactly its offset range (the structured and direct pipelines both set
    them). ``fetch_wait_ms``: ``LAB_TASK_FETCH_WAIT_MS`` when None (:class:`lab.host.start_tuning.StartTuning`).
    """
    from lab.kafka.read import POLL_RECORDS

    if fetch_wait_ms is None:
        from lab.host.start_tuning import StartTuning

        fetch_wait_ms = StartTuning.from_env().task_fetch_wait_ms
    return {
        # Measured on this 2-core machine (200,000 records, 3 partitions, through the proxy, while a test
        # suite ran): a batch read (count) 100,000 -> 120,000 records/s (medians of 4); a streaming query
        # into the append sink, warm JVM, 100,000 offsets a trigger, 35,600 -> 46,500 records/s (4 queries
        # each, alternated). Larger fetches (kafka.max.partition.fetch.bytes 4 MiB, kafka.fetch.max.bytes
        # 16 MiB) and kafka.receive.buffer.bytes=-1 measured no difference, so they are not set.
        "kafka.max.poll.records": POLL_RECORDS,
        "kafka.fetch.max.wait.ms": str(fetch_wait_ms),
    }
