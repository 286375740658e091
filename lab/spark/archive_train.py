"""The Spark driver class archive's training run: ``python -m lab.spark.archive_train WORK ARCHIVE``.

Started by :func:`lab.spark.archive.build`: a driver's work, briefly, in a JVM
that writes its loaded classes on exit. A leaf that no module imports.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lab.host.class_archive import BUILD_TIMEOUT_S


def train(work: Path, archive: Path) -> None:
    """What drivers do, briefly, in a JVM that writes its loaded classes to ``archive`` on exit."""
    from lab.host import jars
    from lab.host.jar_sets import SPARK_KAFKA_JARS
    from lab.spark.session import (
        SQL_TASK_MODULES,
        spark_session,
        start_python_workers,
        start_sql_python_workers,
        with_task_retries,
    )

    connector = not jars.missing(SPARK_KAFKA_JARS)
    spark = spark_session(with_task_retries("local[2]"), work, "lab-class-archive", kafka_connector=connector,
                          archive_at_exit=archive)
    sc = spark.sparkContext
    from lab.spark.kafka_source import register

    register(spark)
    start_sql_python_workers(spark, SQL_TASK_MODULES)
    start_python_workers(sc)
    if connector:
        # Planning only (no broker): loads the connector's source, options and schema classes.
        _ = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
             .option("subscribe", "t").load().selectExpr("CAST(value AS STRING)").schema)
        _ = (spark.read.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9").option("subscribe", "t")
             .option("startingOffsets", json.dumps({"t": {"0": 0}}))
             .option("endingOffsets", json.dumps({"t": {"0": 1}}))
             .load().schema)
        _kafka_consumer(spark)

    done = []

    def each(df, batch_id):
        df.mapInArrow(_passthrough, df.schema).collect()
        done.append(batch_id)

    query = (spark.readStream.format("rate").option("rowsPerSecond", 50).load()
             .writeStream.foreachBatch(each).option("checkpointLocation", str(work / "checkpoint"))
             .trigger(processingTime="0.2 seconds").start())
    deadline = time.monotonic() + 60
    while len(done) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    query.stop()

    from pyspark.streaming import StreamingContext

    ssc = StreamingContext(sc, 0.2)
    ssc.checkpoint(str(work / "dstream"))
    seen = []
    ssc.queueStream([sc.parallelize(range(4), 2)]).map(lambda x: x).foreachRDD(lambda rdd: seen.append(rdd.count()))
    ssc.start()
    deadline = time.monotonic() + 30
    while not seen and time.monotonic() < deadline:
        time.sleep(0.1)
    ssc.stop(stopSparkContext=False, stopGraceFully=False)
    spark.stop()
    # The JVM writes the archive as it exits, which it does when its stdin closes; wait for that.
    from pyspark import SparkContext

    proc = SparkContext._gateway.proc
    SparkContext._gateway.shutdown()
    proc.stdin.close()
    proc.wait(timeout=BUILD_TIMEOUT_S)


def _kafka_consumer(spark) -> None:
    """A Kafka consumer made, polled briefly against a closed port, and closed: the client's classes load."""
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    props.put("bootstrap.servers", "127.0.0.1:9")
    props.put("reconnect.backoff.max.ms", "100")
    des = jvm.org.apache.kafka.common.serialization.ByteArrayDeserializer
    consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(props, des(), des())
    try:
        tps = jvm.java.util.ArrayList()
        tps.add(jvm.org.apache.kafka.common.TopicPartition("t", 0))
        consumer.assign(tps)
        consumer.poll(jvm.java.time.Duration.ofMillis(300))
    finally:
        consumer.close(jvm.java.time.Duration.ofMillis(100))


def _passthrough(batches):
    yield from batches


if __name__ == "__main__":
    train(Path(sys.argv[1]), Path(sys.argv[2]))
