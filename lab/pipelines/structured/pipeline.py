"""The ``structured`` pipeline: Spark Structured Streaming over the lab's Kafka source.

The query reads the topic with :mod:`lab.spark.kafka_source`, or with Spark's own
``kafka`` format when its connector is on the classpath (``--kafka-reader``,
:mod:`lab.pipelines.structured.kafka_input`; admission control either way:
``max_batch_records`` offsets per micro-batch), runs on a processing-time
trigger of ``batch_interval_s``, and keeps its offset and commit logs in
``<run_dir>/checkpoint``. A restarted driver recovers from that checkpoint:
a batch in the offset log without a commit-log entry is run again with the
same offsets and the same batch id.

Output
------
``append`` / ``idempotent`` / ``transactional``
    ``foreachBatch``; inside it each Spark partition (one Kafka partition's
    range) is written *by its task* through :func:`lab.sinks.reader.open_sink` with
    batch key ``batch-<batch id>-kafka-<Kafka partition>``: named by the Kafka
    partition of its rows, not by the Spark partition index, because Spark's
    Kafka connector does not keep the index order between a batch's first
    run and its replay.
``topic``
    Spark's Kafka sink into ``<topic>.out``, the only output of real-time
    mode (``--trigger real-time``): :mod:`lab.pipelines.structured.kafka_sink`.
``files``
    Spark's own Parquet file sink (the ``FileStreamSink`` that
    ``writeStream.format("parquet")`` creates), called from ``foreachBatch``
    so that the named points below exist for it too. A batch's files are
    committed by its entry in ``sink-files/_spark_metadata``; a batch id
    already there is skipped.

Stateful queries
----------------
``--query window-count``, ``dedupe`` and ``session-count`` put a stateful operator
between the source and ``foreachBatch``: :mod:`lab.pipelines.structured.stateful`
builds them and writes the counts of ``window-count`` and ``session-count``; the named points, the
checkpoint and recovery are the ones below. A stateful query also writes
``state-progress`` per batch (Spark's own figures for its state store).

Delivery guarantee
------------------
Receipt is exactly once (replayable ranges + offset log). End to end:

``append``         at-least-once: a batch re-run after a crash, or a task
                   retried after a failure, stores its rows again.
``idempotent``     exactly-once state (upsert on the event id).
``transactional``  exactly-once: a part whose batch key is committed is skipped.
``files``          exactly-once: the metadata log decides what is committed.
``topic``          at-least-once: a batch run again sends its records again.

Named points (a ``driver-crash@batch=N:<point>`` blocks there until the
supervisor kills the driver's process group):

``after-offset-log``            start of the ``foreachBatch`` function, once the
                                batch is logged (``batch-start``; its rows are
                                the ranges' offsets, or a count when the producer
                                is transactional): the batch is in the offset
                                log, no output has started.
``mid-output``                  inside the task of Spark partition 0, after part
                                of its rows are written (database sinks; other
                                tasks of the batch may have finished by then),
                                or handed to the file writer, whose part file is
                                open and uncommitted, once the batch's other
                                tasks have finished their files (files).
``after-output-before-commit``  end of the ``foreachBatch`` function: the sink
                                returned; Spark writes the commit log after it.

``task-failure@batch=N`` makes the task of Spark partition 0 fail once after
writing part of its rows; Spark retries it (the master is given task
retries, e.g. ``local[2]`` runs as ``local[2,4]``). The hooks inside the
task are :func:`lab.pipelines.shared.tasks.midway_hook`, shared with the ``direct``
pipeline; the tasks themselves are :mod:`lab.pipelines.structured.tasks`'. Rows come from the
source's Arrow batches (:func:`lab.kafka.read.rows_of_arrow`) or, with Spark's reader and a
stateless query, from Kafka's records parsed in the task (:func:`lab.kafka.read.rows_of_records`).

Crashes kill the driver's process group: the driver, its JVM, and the
Python workers the JVM starts directly. PySpark's worker daemon puts itself
and the task workers it forks in their own process group; they exit (SIGHUP
from the daemon) as soon as the JVM's pipe to the daemon closes, so a task
that is not blocked at a point can finish a sink transaction in that short
window, as a real executor may outlive its driver for a moment.

On failure
----------
A query that stops with an error (a task failing on every retry, a broken
checkpoint) ends the driver with that error; the supervisor restarts it and
recovery is by the checkpoint. SIGTERM stops the query once no batch is in
flight (or after :data:`STOP_WAIT_S`), then the session.
"""

from __future__ import annotations

import os
import threading
import time

from lab import events as ev
from lab.engines.spark import may_use_connector
from lab.events import read_events
from lab.pipelines.driver import DriverContext
from lab.pipelines.structured.checkpoint import Checkpoint
from lab.pipelines.structured.tasks import database_writer, files_passthrough
from lab.queries import COUNT_QUERIES
from lab.sinks.spec import FILES_MODE, TOPIC_MODE, SinkSpec
from lab.spark.trigger import MIN_REAL_TIME_S, REAL_TIME_MIN_CONF, parse_trigger

STOP_WAIT_S = 15.0  #: Seconds a SIGTERM waits for the batch in flight before the query is stopped anyway.
POLL_S = 0.1  #: Seconds between looks at the checkpoint's commit log.

# -- the driver ----------------------------------------------------------------
class _BatchLog:
    """What the foreachBatch function tells the commit watcher (shared between threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight: int | None = None
        self.done: dict[int, dict] = {}


def _parquet_file_sink(spark, path: str):
    """Spark's own file sink object, as ``writeStream.format("parquet").option("path", path)`` makes it."""
    jvm = spark._jvm
    utils = jvm.org.apache.spark.api.python.PythonUtils
    fmt = jvm.org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat()
    return jvm.org.apache.spark.sql.execution.streaming.sinks.FileStreamSink(
        spark._jsparkSession, path, fmt, utils.toSeq(jvm.java.util.ArrayList()),
        utils.toScalaMap(jvm.java.util.HashMap()))


def run(ctx: DriverContext) -> None:
    """Run the streaming query until SIGTERM; report progress from the commit log.

    Set-up: the SparkSession (:func:`_start_spark`, no delivery effect; a standby
    waits for its turn after it), then the query (:func:`_start_query`), whose
    batches :class:`_ForeachBatch` writes. The loop: until SIGTERM or the query's
    end, ``batch-done`` and progress for each commit-log entry
    (:func:`_report_until_stopped`). The stop: the query once no batch is in
    flight (:func:`_stop_query`), then the session.

    Delivery guarantee: see the module docstring (decided by ``--sink``).

    Raises
    ------
    Exception
        The query's own error when it stops with one (the supervisor restarts the driver).
    """
    # The driver's imports, all before its session starts: bench/process_imports.py times these lines as a
    # structured driver's imports before its JVM (its test holds them here). The helpers import their names again.
    from pyspark import StorageLevel  # noqa: F401

    from lab.engines.spark import STATE_STORES  # noqa: F401
    from lab.kafka.read import earliest_offsets  # noqa: F401
    from lab.pipelines.shared.kafka_reader import resolve_reader  # noqa: F401
    from lab.pipelines.structured import stateful
    from lab.pipelines.structured.kafka_input import kafka_event_stream  # noqa: F401
    from lab.spark.kafka_source import register  # noqa: F401
    from lab.spark.session import (  # noqa: F401
        SQL_TASK_MODULES,
        SQL_WORKER_IMPORTS,
        TASK_ATTEMPTS,
        query_ended,
        skip_accumulator_wait,
        spark_session,
        start_sql_python_workers,
        warm_up,
        with_task_retries,
    )

    cfg = ctx.config
    spec = SinkSpec.load(ctx.run_dir)
    checkpoint = Checkpoint(ctx.run_dir / "checkpoint")
    spark, reader, warm = _start_spark(ctx, to_topic=spec.mode == TOPIC_MODE)
    # Everything above has no delivery effect; a standby waits here for its turn (lab.pipelines.driver).
    ctx.await_turn()
    ctx.events.write(ev.KAFKA_READER, reader=reader, asked=cfg.spark.kafka_reader)
    if spec.mode == TOPIC_MODE:
        _run_topic_query(ctx, spark, checkpoint, reader)
        return
    # A stateless query's database sinks parse the records in their tasks; others need the columns in Spark.
    parse_in_task = reader == "spark" and cfg.query == "passthrough" and spec.mode != FILES_MODE
    batches = _ForeachBatch(ctx, spark, spec, checkpoint, parse_in_task)
    query = _start_query(ctx, spark, reader, checkpoint, batches.process, parse_in_task)
    ctx.phase("query")
    committed = checkpoint.last_committed()
    states = _StateReports(ctx, stateful.state_progress) if cfg.query != "passthrough" else None
    try:
        committed = _report_until_stopped(ctx, query, checkpoint, batches.log, states, committed)
        _stop_query(ctx, query, checkpoint, batches.log, states, committed)
    finally:
        warm.join(STOP_WAIT_S)
        skip_accumulator_wait(spark.sparkContext)
        spark.stop()


def _session_conf(cfg) -> dict[str, str]:
    """The query's Spark settings: task retries, the stop's timeout, and real-time mode's floor or the state store."""
    from lab.engines.spark import STATE_STORES
    from lab.pipelines.structured import stateful
    from lab.spark.session import TASK_ATTEMPTS

    extra = {"spark.task.maxFailures": str(TASK_ATTEMPTS),
             "spark.sql.streaming.stopTimeout": str(int(STOP_WAIT_S * 1000))}
    if parse_trigger(cfg.spark.trigger).real_time:
        # Spark refuses intervals below 5 s by default (INVALID_STREAMING_REAL_TIME_MODE_TRIGGER_INTERVAL); the lab
        # allows its own floor, so that a sweep of intervals fits in a lesson.
        extra[REAL_TIME_MIN_CONF] = f"{int(MIN_REAL_TIME_S * 1000)}ms"
    else:
        # Real-time mode refuses any state store provider set for the session (STREAMING_REAL_TIME_MODE.
        # SQL_CONFIGURATION_NOT_SUPPORTED, measured on 4.3.0); its queries here are stateless.
        extra[stateful.STATE_STORE_CONF] = STATE_STORES[cfg.spark.state_store]
        extra.update(stateful.session_conf(cfg.query))
    return extra


def _start_spark(ctx: DriverContext, to_topic: bool):
    """``(session, Kafka reader, Python workers' warm-up or None)``: everything before the query, with no delivery
    effect.

    The reader is the one ``--kafka-reader`` resolves to (:mod:`lab.pipelines.shared.kafka_reader`).
    """
    from lab.pipelines.shared.kafka_reader import resolve_reader
    from lab.spark.kafka_source import register
    from lab.spark.session import (
        SQL_TASK_MODULES,
        SQL_WORKER_IMPORTS,
        spark_session,
        start_sql_python_workers,
        warm_up,
        with_task_retries,
    )

    cfg = ctx.config
    # Spark otherwise resolves the host name and may pick a public interface for its services.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = spark_session(with_task_retries(cfg.spark.spark_master), ctx.run_dir,
                          app_name=f"lab-structured-{ctx.run_id}", extra=_session_conf(cfg),
                          kafka_connector=may_use_connector(cfg, cfg.spec), phase=ctx.phase,
                          worker_imports=SQL_WORKER_IMPORTS)
    reader = resolve_reader(spark, cfg.spark.kafka_reader)
    # Python workers started beside the query's start and planning (JVM work), not before it (measured,
    # bench/startup.py, restarted driver to first batch done, medians of 3: 10.0 s before, 9.0 s beside).
    # Spark's Kafka sink runs no Python in its tasks: none to start.
    warm = None if to_topic else warm_up(ctx, start_sql_python_workers, spark, SQL_TASK_MODULES)
    if reader == "labkafka":
        # Only then: registering starts Spark's look-up of Python data sources, a Python process of its
        # own (measured: 1.2 s, on the start's critical path), which format("kafka") does not need.
        register(spark)
    return spark, reader, warm


def _run_topic_query(ctx: DriverContext, spark, checkpoint: Checkpoint, reader: str) -> None:
    """The ``topic`` sink's query (:func:`lab.pipelines.structured.kafka_sink.run_query`) until SIGTERM; then the
    session stops."""
    from lab.pipelines.structured.kafka_sink import run_query
    from lab.spark.session import skip_accumulator_wait

    try:
        run_query(ctx, spark, checkpoint, reader)
    finally:
        skip_accumulator_wait(spark.sparkContext)
        spark.stop()


def _start_query(ctx: DriverContext, spark, reader: str, checkpoint: Checkpoint, process, parse_in_task: bool):
    """Start the streaming query: the source, a stateful operator (``--query``), ``foreachBatch(process)``, the
    checkpoint.

    The progress the checkpoint already holds is reported first (:func:`_report_recovered`).
    """
    from lab.pipelines.structured import stateful
    from lab.pipelines.structured.kafka_input import kafka_event_stream

    cfg = ctx.config
    # A transactional producer's events are final only once committed: read_committed then.
    # lesson: structured-query
    source = kafka_event_stream(spark, reader, ctx.bootstrap, cfg.topic, cfg.partitions, cfg.max_batch_records,
                                cfg.isolation_level, parse_in_task)
    output_mode = "append"
    if cfg.query != "passthrough":
        source, output_mode = stateful.stateful_query(source, cfg.query, cfg.event_time.window_s,
                                                      cfg.event_time.watermark_s,
                                                      gap_ms=int(round(cfg.event_time.session_gap_s * 1000)))
    _report_recovered(ctx, checkpoint)
    query = (source.writeStream
             .queryName(f"lab_structured_{cfg.sink}")
             .outputMode(output_mode)
             .foreachBatch(process)
             .option("checkpointLocation", str(checkpoint.path))
             .trigger(processingTime=f"{cfg.batch_interval_s:g} seconds")
             .start())
    # end lesson: structured-query
    return query


class _ForeachBatch:
    """The ``foreachBatch`` function (:meth:`process`), and the :class:`_BatchLog` it fills for the commit watcher."""

    def __init__(self, ctx: DriverContext, spark, spec: SinkSpec, checkpoint: Checkpoint, parse_in_task: bool) -> None:
        self.ctx, self.cfg, self.spark, self.spec, self.checkpoint = ctx, ctx.config, spark, spec, checkpoint
        self.parse_in_task = parse_in_task  # the database writer gets Kafka's records (kafka_event_stream)
        self.file_sink = _parquet_file_sink(spark, spec.path) if spec.mode == FILES_MODE else None
        self.log = _BatchLog()
        self.first_start: dict[int, int] | None = None

    def process(self, batch_df, batch_id) -> None:
        """Write one micro-batch: ``batch-start``, ``after-offset-log``, the output, ``after-output-before-commit``.

        Spark calls it once the batch is in the offset log, and writes the commit
        log after it returns. Delivery guarantee: the sink mode's (module
        docstring). What ``batch-done`` will say waits in :attr:`log` until the
        commit watcher sees the batch's commit-log entry.
        """
        from pyspark import StorageLevel

        ctx, log = self.ctx, self.log
        batch = int(batch_id)
        began = round(time.time(), 6)
        with log.lock:
            log.in_flight = batch
        data = batch_df
        try:
            ranges = self.ranges(batch)
            if self.cfg.producer.transactional and self.cfg.query == "passthrough":
                # Transaction markers (and aborted records) occupy offsets: only a count tells the rows;
                # the cache keeps the output from reading Kafka a second time.
                data = batch_df.persist(StorageLevel.MEMORY_AND_DISK)
                rows = data.count()
            else:
                # Without producer transactions every offset holds one record: the batch's rows are its
                # ranges' lengths, known without a Spark job (measured: a fifth more records/s than
                # counting first). batch-done has the rows the output tasks read. A stateful query's
                # DataFrame is its output, not its input: its offsets are counted (transaction markers too).
                rows = sum(end - start for start, end in ranges.values())
            # ``began``: when Spark handed over the planned batch.
            ctx.batch_start(batch, ranges, rows, began=began)
            ctx.point("after-offset-log", batch)
            parts, counted = self._write(data, batch, len(ranges))
            ctx.point("after-output-before-commit", batch)
            info = _batch_info(rows, parts, counted)
            with log.lock:
                log.done[batch] = info
        finally:
            if data is not batch_df:
                data.unpersist()
            with log.lock:
                log.in_flight = None

    def ranges(self, batch: int) -> dict[int, tuple[int, int]]:
        """Batch ``batch``'s offset range per Kafka partition, from the checkpoint's offset log."""
        from lab.kafka.read import earliest_offsets

        if self.first_start is None and self.checkpoint.end_offsets(batch - 1) is None:
            # Batch 0 starts at the source's initial offset (earliest): Spark's record of it, else the broker's.
            self.first_start = (self.checkpoint.initial_offsets()
                                or earliest_offsets(self.ctx.bootstrap, self.cfg.topic, self.cfg.partitions))
        return self.checkpoint.ranges(batch, self.first_start or {})

    def _write(self, data, batch: int, kafka_partitions: int) -> tuple[list | None, int | None]:
        """The batch's output, by ``--sink`` and ``--query``; ``(the tasks' reports, the sum of the windows' changes)``.

        The files sink reports nothing (None, None); only a count query has the sum.
        Each task carries the batch's ``mid-output`` and ``task-failure`` hooks.
        """
        from lab.pipelines.structured import stateful

        ctx, cfg = self.ctx, self.cfg
        fail_once = ctx.task_failure_due(batch) is not None
        if self.file_sink is not None:
            out = data.mapInArrow(files_passthrough(ctx, batch, fail_once, self.spec.path, kafka_partitions - 1),
                                  data.schema)
            self.file_sink.addBatch(batch, out._jdf)
            return None, None
        if cfg.query in COUNT_QUERIES:
            previous = (None if cfg.query == "session-count"  # its rows carry their change
                        else stateful.previous_counts(self.spark, str(self.checkpoint.path), batch))
            parts = data.mapInArrow(stateful.window_writer(ctx, batch, fail_once, previous),
                                    stateful.WINDOW_PART_SCHEMA).collect()
            return parts, sum(p["counted"] for p in parts)
        parts = data.mapInArrow(database_writer(ctx, batch, fail_once, self.parse_in_task),
                                "part int, rows long, outcome string").collect()
        return parts, None


def _batch_info(rows: int, parts: list | None, counted: int | None) -> dict:
    """What ``batch-done`` says of a batch: its rows (as its tasks counted them, when they report), skipped parts,
    windows."""
    info = {"rows": rows}
    if parts is not None:
        info["rows"] = sum(p["rows"] for p in parts)
        info["skipped_parts"] = sum(1 for p in parts if p["outcome"] == "skipped")
    if counted is not None:
        # The batch's contribution to the windows: the sum of its changes (what a replay adds again).
        info.update(windows=info.pop("rows"), rows=rows, counted=counted)
    return info


def _report_until_stopped(ctx: DriverContext, query, checkpoint: Checkpoint, log: _BatchLog, states,
                          committed: int) -> int:
    """Until SIGTERM or the query's end: ``batch-done`` and progress per new commit-log entry; the last batch reported.

    Raises
    ------
    Exception
        The query's own error when it stopped with one.
    """
    from lab.spark.session import query_ended

    while not ctx.stopping and not query_ended(query):
        committed = _report_commits(ctx, checkpoint, log, committed)
        if states is not None and committed >= 0 and committed not in states.seen:
            # Spark posts a batch's progress just after its commit: asked for only until it has come.
            states.look(query.lastProgress)
        time.sleep(POLL_S)
    return committed


def _stop_query(ctx: DriverContext, query, checkpoint: Checkpoint, log: _BatchLog, states, committed: int) -> None:
    """Stop the query once no batch is in flight (or after :data:`STOP_WAIT_S`); report the commits that came
    meanwhile."""
    deadline = time.monotonic() + STOP_WAIT_S
    while log.in_flight is not None and time.monotonic() < deadline:
        time.sleep(POLL_S)
    try:
        query.stop()
    except Exception as e:  # a batch cut short by the stop is re-run by the next query
        ctx.events.write(ev.QUERY_STOP_ERROR, error=repr(e)[:300])
    _report_commits(ctx, checkpoint, log, committed)
    if states is not None:
        for progress in query.recentProgress:
            states.look(progress)


class _StateReports:
    """Writes ``state-progress`` once per batch from the query's progress reports."""

    def __init__(self, ctx: DriverContext, state_progress) -> None:
        self.ctx = ctx
        self.state_progress = state_progress  # lab.pipelines.structured.stateful.state_progress
        self.seen: set[int] = set()

    def look(self, progress: dict | None) -> None:
        state = self.state_progress(progress) if progress else None
        if state is not None and state["batch"] not in self.seen:
            self.seen.add(state["batch"])
            self.ctx.events.write(ev.STATE_PROGRESS, **state)


def _report_commits(ctx: DriverContext, checkpoint: Checkpoint, log: _BatchLog, committed: int) -> int:
    """Log ``batch-done`` and write progress for batches whose commit-log entry appeared."""
    latest = checkpoint.last_committed()
    if latest <= committed:
        return committed
    for batch in range(committed + 1, latest + 1):
        with log.lock:
            info = log.done.pop(batch, None)
        if info is not None:
            ctx.batch_done(batch, **info)
    positions = checkpoint.end_offsets(latest)
    if positions is not None:
        ctx.progress(positions, latest)
    return latest


def _report_recovered(ctx: DriverContext, checkpoint: Checkpoint) -> None:
    """On (re)start: progress from the checkpoint, and ``batch-done`` for a commit the last driver left unlogged.

    A driver killed between Spark's commit-log write and its own next look
    at the log never said the batch was done; the checkpoint says so now.
    """
    latest = checkpoint.last_committed()
    if latest < 0:
        return
    events = read_events(ctx.run_dir)
    if not any(e["type"] == ev.BATCH_DONE and e.get("batch") == latest for e in events):
        starts = [e for e in events if e["type"] == ev.BATCH_START and e.get("batch") == latest]
        if starts:
            ctx.batch_done(latest, rows=starts[-1]["rows"], recovered=True)
    positions = checkpoint.end_offsets(latest)
    if positions is not None:
        ctx.progress(positions, latest)
