"""The structured pipeline into Spark's Kafka sink (``--sink topic``), in micro-batches or in real-time mode.

The query copies every record of the run's topic, key and value as they are,
to ``<topic>.out`` (:func:`lab.sinks.topic.output_topic`), partition for
partition, with ``writeStream.format("kafka")``: no ``foreachBatch``, so
Spark's own sink writes inside the tasks. With ``--query dedupe`` it copies
the first record of each event id only (:func:`first_copies`); with
``--query window-count`` it writes each (window, key)'s running count as it changes
(:func:`window_updates`). Both keep state, in micro-batches and in real-time mode
alike. ``--trigger`` decides the batches (:mod:`lab.spark.trigger`): a processing-time trigger of ``--batch-interval``,
or real-time mode, whose batch lasts its interval and whose offset-log entry
is written when it ends.

Timeline
--------
The driver learns of a batch from the checkpoint only: when batch N's commit
appears it writes ``batch-start`` (``began``: the batch's ``batchTimestampMs``
from its offset-log entry; ranges from N-1's end offsets to N's) and
``batch-done``, then progress at N's end offsets.

Delivery guarantee
------------------
Receipt exactly once (the offset log); output at-least-once (Spark's
documentation: the Kafka sink may write a record again when a batch is run
again). The producer Spark's tasks use is set, not defaulted:
:data:`PRODUCER_OPTIONS`. Audited like every output topic (:mod:`lab.sinks.topic`);
the sink writes no transactions, so both isolation levels read the same.
With ``dedupe`` the state is exactly once (a batch's state is committed with
its offsets, and a batch run again starts from the state its predecessor
committed) while the output stays at-least-once: a batch cut short had sent
its first copies already, and its re-run sends them again, its state not
knowing them. ``window-count`` likewise: the state's counts are exact, and the
updates the cut batch had sent are sent again, the same counts; a reader that
keeps the last count of each (window, key), as an ``update`` stream is read,
gets the exact counts. :func:`lab.views.trigger.state_table` reads the state.

On failure
----------
A driver killed while Spark wrote a log entry leaves its temp file, which real-time mode refuses to start
over (:func:`remove_unfinished_log_files` removes it first, ``checkpoint-temp-removed``). A query that stops with an
error ends the driver with it (the supervisor restarts the driver, recovery is by the checkpoint). SIGTERM stops the
query (a batch cut short is run again by the next driver).
"""

from __future__ import annotations

import time

from lab import events as ev
from lab.errors import LabError
from lab.kafka import tools as kafka_tools
from lab.pipelines.driver import DriverContext
from lab.sinks.topic import output_topic
from lab.spark.trigger import parse_trigger

#: Seconds between looks at the checkpoint's commit log.
POLL_S = 0.1
#: The Kafka producer inside Spark's sink. ``acks=all`` and idempotence (no duplicate from a retried send within
#: one producer; a batch run again is another producer); ``linger.ms=0``: a record goes out as it comes, so the
#: latency measured is the pipeline's, not a batching delay's (Kafka 4's clients default to 5 ms).
PRODUCER_OPTIONS = {"kafka.acks": "all", "kafka.enable.idempotence": "true", "kafka.linger.ms": "0"}


def remove_unfinished_log_files(checkpoint_dir) -> list[str]:
    """Remove the temp files a killed driver left in the offset and commit logs; the names removed.

    Spark writes a log entry as ``.<batch>.<uuid>.tmp`` (and its ``.crc``) and renames it to ``<batch>``;
    a temp file is never an entry. A kill in between leaves it behind, and measured on 4.3.0 in real-time
    mode (killed while batch 0's commit was being written: a zero-byte ``commits/.0.<uuid>.tmp``, no
    offset entry) every restarted query then failed at once with ``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``
    ("commits should be empty on batch 0"): the checkpoint could never be resumed.
    """
    removed = []
    for log in ("offsets", "commits"):
        d = checkpoint_dir / log
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir()):
            if f.name.startswith(".") and (f.name.endswith(".tmp") or f.name.endswith(".tmp.crc")):
                f.unlink()
                removed.append(f"{log}/{f.name}")
    return removed


def report_commits(ctx: DriverContext, checkpoint, committed: int, first_start: dict[int, int] | None) -> int:
    """``batch-start``, ``batch-done`` and progress for every batch committed after ``committed``; the newest."""
    latest = checkpoint.last_committed()
    for batch in range(committed + 1, latest + 1):
        ranges = checkpoint.ranges(batch, first_start or {})
        rows = sum(e - s for s, e in ranges.values())
        began = checkpoint.batch_timestamp_ms(batch)
        ctx.batch_start(batch, ranges, rows, **({"began": began / 1000} if began is not None else {}),
                        from_checkpoint=True)
        ctx.batch_done(batch, rows=rows)
    if latest > committed:
        positions = checkpoint.end_offsets(latest)
        if positions is not None:
            ctx.progress(positions, latest)
    return max(latest, committed)


def first_copies(records):
    """``records`` (key, value, partition) with the first record of each event id only: the lab's ``dedupe`` into
    the Kafka sink.

    ``dropDuplicates(["event_id"])``, the id read from the value: real-time mode refuses
    ``dropDuplicatesWithinWatermark`` (:mod:`lab.spark.trigger`), and the same query runs in both triggers so that
    they compare. No watermark: no id leaves the state during a run, so Spark's state reader finds every id the
    query has seen (one state row each; a run of 1,000,000 events keeps 1,000,000).
    """
    from pyspark.sql import functions as F

    # lesson: structured-dedupe-state
    return (records.withColumn("event_id", F.get_json_object(F.col("value").cast("string"), "$.id"))
            .dropDuplicates(["event_id"])
            .drop("event_id"))
    # end lesson: structured-dedupe-state


#: The fields of a ``window-count`` record's value in the output topic (its key: ``<window_start>/<key>``).
WINDOW_FIELDS = ("window_start", "window_end", "key", "count")


def window_updates(records, window_s: float):
    """``records`` (key, value, partition) counted per event-time tumbling window of ``window_s`` and key: the lab's
    ``window-count`` into the Kafka sink, one record per change of a count.

    ``groupBy(window(event_ts), key).count()`` in update mode, the event time and key read from the value. No
    watermark: no window leaves the state during a run, so Spark's state reader finds every (window, key) the query
    has counted, and no event is late. Each output record's key is ``<window_start>/<key>``: every update of one
    count goes to one partition of the output topic, in the order it was sent. Its value is the JSON object of
    :data:`WINDOW_FIELDS` (window bounds in epoch ms).
    """
    from pyspark.sql import functions as F

    value = F.col("value").cast("string")
    # lesson: structured-window-updates
    timed = records.select(F.get_json_object(value, "$.key").alias("key"),
                           F.timestamp_millis(F.get_json_object(value, "$.event_time_ms").cast("long"))
                           .alias("event_ts"))
    counts = timed.groupBy(F.window("event_ts", f"{int(round(window_s * 1000))} milliseconds"), "key").count()
    # end lesson: structured-window-updates
    start, end = F.unix_millis("window.start"), F.unix_millis("window.end")
    return counts.select(F.concat_ws("/", start.cast("string"), "key").alias("key"),
                         F.to_json(F.struct(start.alias("window_start"), end.alias("window_end"), "key", "count"))
                         .alias("value"))


def run_query(ctx: DriverContext, spark, checkpoint, reader: str) -> None:
    """Run the Kafka-sink query until SIGTERM (module docstring).

    Raises
    ------
    LabError
        When the resolved reader is not Spark's connector (the Kafka sink comes with it).
    Exception
        The query's own error when it stops with one.
    """
    from lab.kafka.read import earliest_offsets
    from lab.pipelines.structured.kafka_input import kafka_record_stream
    from lab.spark.session import query_ended

    cfg = ctx.config
    trigger = parse_trigger(cfg.spark.trigger)
    if reader != "spark":
        raise LabError(f"the Kafka sink needs Spark's Kafka connector; the reader resolved to {reader!r} "
                       "(run `lab fetch`, and use --kafka-reader auto or spark)")
    out = output_topic(cfg.topic)
    kafka_tools.create_topic(ctx.bootstrap, out, cfg.partitions, replication=cfg.cluster.nodes,
                             configs=cfg.topic_configs)
    removed = remove_unfinished_log_files(checkpoint.path)
    if removed:
        ctx.events.write(ev.CHECKPOINT_TEMP_REMOVED, files=removed)
    # lesson: structured-kafka-sink
    records = kafka_record_stream(spark, ctx.bootstrap, cfg.topic, cfg.partitions,
                                  None if trigger.real_time else cfg.max_batch_records, cfg.isolation_level)
    if cfg.query == "dedupe":
        records = first_copies(records)
    elif cfg.query == "window-count":
        records = window_updates(records, cfg.event_time.window_s)
    writer = (records.writeStream
              .queryName(f"lab_structured_topic_{trigger.mode.replace('-', '_')}")
              .format("kafka")
              .option("kafka.bootstrap.servers", ctx.bootstrap)
              .option("topic", out)
              .options(**PRODUCER_OPTIONS)
              .option("checkpointLocation", str(checkpoint.path))
              .outputMode("update"))
    if trigger.real_time:
        writer = writer.trigger(realTime=trigger.spark_duration())
    else:
        writer = writer.trigger(processingTime=f"{cfg.batch_interval_s:g} seconds")
    query = writer.start()
    # end lesson: structured-kafka-sink
    ctx.phase("query")
    committed = checkpoint.last_committed()
    if committed >= 0:
        positions = checkpoint.end_offsets(committed)
        if positions is not None:
            ctx.progress(positions, committed)
    first_start = None
    while not ctx.stopping and not query_ended(query):
        if checkpoint.last_committed() > committed:
            if first_start is None:
                first_start = checkpoint.initial_offsets() or earliest_offsets(ctx.bootstrap, cfg.topic, cfg.partitions)
            committed = report_commits(ctx, checkpoint, committed, first_start)
        time.sleep(POLL_S)
    try:
        query.stop()
    except Exception as e:  # a batch cut short by the stop is run again by the next query
        ctx.events.write(ev.QUERY_STOP_ERROR, error=repr(e)[:300])
    if checkpoint.last_committed() > committed:
        report_commits(ctx, checkpoint, committed, first_start or checkpoint.initial_offsets() or {})
