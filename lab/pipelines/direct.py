"""The ``direct`` pipeline: Spark 1.3's direct Kafka approach, on Spark RDDs, in the open.

PySpark has had no direct Kafka DStream since Spark 3.0, so this module
carries out the protocol of ``DirectKafkaInputDStream`` itself, where you
can read it:

1. Every ``batch_interval_s`` (the first time one interval after the
   driver starts) the driver asks Kafka for the latest offset of each
   partition (its high watermark, :func:`lab.kafka.tools.end_offsets`).
2. It plans one :class:`OffsetRange` ``[fromOffset, untilOffset)`` per
   partition, taking at most ``max_batch_records`` offsets per partition per
   batch (like ``spark.streaming.kafka.maxRatePerPartition`` times the
   interval). An interval without new offsets plans no batch.
3. It writes the plan to the checkpoint's offset log *before* anything runs.
4. It builds an RDD with one Spark partition per non-empty range
   (:func:`create_direct_rdd`); each task reads exactly its range with
   kafka-python (``assign`` + ``seek``, :func:`lab.kafka.read.read_range`)
   and stops on *position*, not on "last offset seen", because transaction
   markers occupy offsets. With Spark's connector cached (``lab fetch``),
   ``--kafka-reader auto`` reads the same ranges with Spark's own batch Kafka
   source instead (:func:`spark_kafka_records`: per-partition ``startingOffsets``
   and ``endingOffsets``); the offset log stays the lab's.
5. It runs the transformation (JSON to rows, :func:`lab.kafka.read.record_row`)
   and the output: each task
   writes its own partition's rows to the sink (``foreachPartition``; with
   Spark's reader ``mapInArrow``, whose task parses its Arrow batches of
   records at once, :func:`lab.kafka.read.rows_of_records`). The
   output function sees the batch's ranges, as ``HasOffsetRanges`` does.
6. It commits offsets where ``--offsets`` says, then marks the batch done.

After a crash the driver re-runs the last planned batch that is not marked
done, with the same batch number and the same ranges, then continues.
A (re)started driver starts its Python workers with one empty job
(:func:`lab.spark.session.start_python_workers`) on a thread of its own while it
reads the offset log and plans (:func:`lab.spark.session.warm_up`).

The checkpoint (``<run_dir>/checkpoint/``)
------------------------------------------
(Ranges, planning, the offset log and the offset stores are in
:mod:`lab.pipelines.direct_offsets`; the faults inside tasks in
:mod:`lab.pipelines.shared.tasks`.)

``offsets/<batch>.json``  the plan of one batch, written (atomically) before
                          the batch runs and never changed::

                              {"batch": 3, "topic": "events", "planned_at": 1763730000.1, "offset_store": "checkpoint",
                               "ranges": [
                                {"topic": "events", "partition": 0, "fromOffset": 300, "untilOffset": 400},
                                ...
                               ]}

                          Every partition is listed, empty ranges included, so
                          consecutive files chain: a partition's ``fromOffset``
                          in batch N is its ``untilOffset`` in batch N-1.
``done/<batch>``          written after the batch's output (and, with
                          ``--offsets kafka``, its commit) succeeded:
                          ``{"batch": 3, "rows": 300, "done_at": ...}`` (records
                          the output saw).

A batch with an ``offsets`` file and no ``done`` marker is the one a
restarted driver re-runs. A re-run is announced in ``events.jsonl`` as a
second ``batch-start`` of the same batch with ``"replay": true``.

What the driver writes to the timeline (``events.jsonl``)
--------------------------------------------------------
``batch-start``     ``ranges`` ``{partition: [from, until]}`` and ``rows`` (offsets
                    planned), ``replay`` (a re-run after a restart), ``offset_store``.
``batch-done``      ``rows`` (records the output saw), ``written`` / ``skipped``
                    (the sink's answers), ``retried_tasks`` (tasks that succeeded
                    on a later attempt), ``replay``.
``executor-target`` the executor JVM a planned ``executor-crash`` is to hit.
``batch-error``     a batch's job failed; the driver ends with the error.
``offsets-disagree`` on restart, the offset store and the checkpoint named
                    different start offsets (the store's win).

Where offsets are stored (``--offsets``)
----------------------------------------
``checkpoint``  the offset log above is the only record: a restart re-runs
                the unfinished batch with exactly its logged ranges.
                At-least-once output: a crash after the output and before
                the ``done`` marker outputs that batch twice (an ``append``
                sink stores it twice; ``idempotent`` and ``transactional``
                absorb it).
``sink``        each task stores its partition's range in the sink's
                transaction together with its rows (``sink_offsets``, with
                ``--sink transactional``), guarded: a range that does not
                start where the sink's stored offset is (repeated or
                skipped) raises :class:`lab.sinks.spec.OffsetMismatch` and nothing
                commits. On restart the start offsets are read from the sink:
                the unfinished batch is re-run from the sink's offset of
                each partition up to its logged ``untilOffset`` (partitions the
                sink already has drop out). Exactly once.
``kafka``       after the output the driver commits the ``untilOffset`` of
                every partition to the run's consumer group (``lab-<run id>``),
                like ``commitAsync`` after the output, then marks the batch
                done. On restart the start offsets are the group's committed
                offsets. At-least-once: a crash between output and commit
                outputs that batch twice.

Delivery guarantee
------------------
Receipt is exactly once: a range read twice returns the same records. End
to end, the offset store and the sink decide (above); with ``--sink
idempotent`` or ``--sink transactional`` (batch key
``batch-<batch>-part-<kafka partition>``) every store gives exactly once.
Tasks write inside Spark, so a retried task (``task-failure``, or an
executor lost mid-task) writes its rows again: duplicates with ``append``.

Named points and faults
-----------------------
``after-offset-log``            the plan is in the offset log; no output yet.
``mid-output``                  inside the task of Spark partition 0, after
                                part of its rows were written (``append`` and
                                ``idempotent`` have committed the first half;
                                ``transactional`` nothing yet). The task's
                                Python worker is not in the driver's process
                                group: PySpark's worker daemon gives itself and
                                its workers their own (``os.setpgid(0, 0)`` in
                                ``pyspark/daemon.py``). The kill ends the JVM;
                                the daemon sees its pipe close and SIGHUPs its
                                group, so the blocked worker dies with it.
``after-output-before-commit``  every task's output returned; offsets not yet
                                committed (``kafka``) and the batch not marked done.

``task-failure@batch=N``: the task of Spark partition 0 raises once after
writing part of its rows; Spark retries it (``local[N]`` runs as
``local[N,4]``, other masters with ``spark.task.maxFailures=4``).

``executor-crash@batch=N`` (``local-cluster[W,C,M]``): the task of Spark
partition 0 writes part of its rows, names its executor JVM in an
``executor-target`` event and waits; the driver announces ``batch-start``
only then, so the supervisor's SIGKILL lands on that executor in the middle
of that task. The task's Python worker exits with its executor, as it would
with a dead machine, and Spark reruns the task on another executor.

On failure
----------
A batch whose job fails (a task failing on every retry, an
``OffsetMismatch``) writes a ``batch-error`` event and ends the driver with
the error; the supervisor restarts it and the batch is re-run from the
checkpoint. Kafka being unreachable delays batches (the next interval asks
again); a task whose range makes no progress for
:data:`lab.kafka.read.READ_STALL_S` seconds fails and is retried. SIGTERM stops the driver after the batch in
flight.
"""

from __future__ import annotations

import json
import threading
import time

from lab import events as ev
from lab.engines.spark import may_use_connector
from lab.events import EventTail
from lab.kafka import tools as kafka_tools
from lab.kafka.read import earliest_offsets, read_range, record_row
from lab.pipelines.direct_offsets import (
    OffsetLog,
    OffsetRange,
    OffsetStore,
    plan_ranges,
    ranges_dict,
    recovery_ranges,
    retry,
    start_positions,
)
from lab.pipelines.driver import DriverContext
from lab.pipelines.shared.tasks import midway_hook
from lab.sinks.reader import open_sink

#: Name of the checkpoint directory inside the run directory.
CHECKPOINT_DIR = "checkpoint"


# -- executors: the Kafka RDD and the output -------------------------------------
def create_direct_rdd(sc, bootstrap: str, ranges: list[OffsetRange], isolation_level: str = "read_uncommitted"):
    """The batch's Kafka RDD of ``(partition, offset, value)``: one Spark partition per range, in the order of
    ``ranges``.

    Spark partition ``i`` reads ``ranges[i]`` with :func:`lab.kafka.read.read_range`.
    The returned RDD carries ``offsetRanges`` (a tuple of :class:`OffsetRange`),
    as an RDD from ``KafkaUtils.createDirectStream`` does through
    ``HasOffsetRanges``; and as there, only this RDD has it, not RDDs
    derived from it.

    Delivery guarantee: computing a partition twice (a retry) reads the
    same records.
    """
    ranges = tuple(ranges)

    def read(items):
        for r in items:
            for records in read_range(bootstrap, r.topic, r.partition, r.fromOffset, r.untilOffset,
                                      isolation_level=isolation_level):
                for rec in records:
                    yield rec.partition, rec.offset, rec.value

    rdd = sc.parallelize(ranges, max(1, len(ranges))).mapPartitions(read, preservesPartitioning=True)
    rdd.offsetRanges = ranges
    return rdd


def spark_kafka_records(spark, bootstrap: str, ranges: list[OffsetRange], isolation_level: str = "read_uncommitted"):
    """The batch's Kafka records (:data:`lab.kafka.read.RECORD_COLUMNS`) read by Spark's own batch Kafka source.

    ``spark.read.format("kafka")`` with the driver-planned ranges as per-partition
    ``startingOffsets`` / ``endingOffsets`` (``assign``, never a consumer group) and
    ``failOnDataLoss``: a range that left the broker fails the job rather than
    reading other offsets. Spark makes one input partition per Kafka partition, but
    not necessarily in the order of ``ranges``: :func:`partition_writer` finds each
    task's range by the Kafka partition of its rows.

    The tasks' consumers get the throughput settings the structured pipeline's get
    (:func:`lab.pipelines.shared.kafka_reader.task_consumer_options`) and one
    ``kafka.group.id`` for the run's batches: Spark keeps its consumers in a pool keyed by group id and
    partition, and without one each batch's query makes up a new group id, so every batch opened new
    consumers. The group is never joined (``assign``) and nothing is committed to it.

    Delivery guarantee: as :func:`create_direct_rdd`, the same records on every read.
    """
    from lab.pipelines.shared.kafka_reader import kafka_records, task_consumer_options

    topic = ranges[0].topic
    df = (spark.read.format("kafka")
          .options(**task_consumer_options())
          .option("kafka.bootstrap.servers", bootstrap)
          .option("kafka.group.id", f"lab-direct-reader-{topic}")
          .option("assign", json.dumps({topic: [r.partition for r in ranges]}))
          .option("startingOffsets", json.dumps({topic: {str(r.partition): r.fromOffset for r in ranges}}))
          .option("endingOffsets", json.dumps({topic: {str(r.partition): r.untilOffset for r in ranges}}))
          .option("kafka.isolation.level", isolation_level)
          .option("failOnDataLoss", "true")
          .load())
    return kafka_records(df)


def arrow_output(write):
    """``write(rows)`` as a ``mapInArrow`` function over Kafka records: the task parses its records into rows
    (:func:`lab.kafka.read.rows_of_records`), writes them, and yields one empty batch.

    Measured (``bench/pipelines.py``, 1,000,000 events, the same day): the pipeline went from 26,700 to
    42,700 records/s against Spark's Row objects pickled to Python and parsed record by record (with the
    consumer settings above).
    """
    def run(batches):
        import pyarrow as pa

        from lab.kafka.read import rows_of_records

        write(rows_of_records(batches))
        yield pa.RecordBatch.from_pydict({"done": []}, schema=pa.schema([("done", pa.int32())]))

    return run


def partition_writer(ctx: DriverContext, batch: int, offset_ranges: tuple, offset_store: str, faults: dict, counters,
                     by_kafka_partition: bool = False):
    """The ``foreachPartition`` function: one task writes its partition's rows to the sink.

    Batch key ``batch-<batch>-part-<kafka partition>``; with
    ``offset_store == "sink"`` the task's range ``{partition: (from, until)}``
    commits in the same transaction as its rows. ``faults``: the
    ``fail_once`` / ``executor_crash`` flags of :func:`lab.pipelines.shared.tasks.midway_hook`.
    ``by_kafka_partition``: a task's range is the one of its rows' Kafka partition
    (Spark's reader), not the one at its Spark partition index (the lab's RDD).

    Delivery guarantee: the sink mode's, per part. On failure the task
    raises (``OffsetMismatch``, the injected failure, a read error); Spark
    retries it, and an ``append`` sink then also holds what the failed
    attempt had committed.
    """
    run_dir, topic = ctx.run_dir, ctx.config.topic

    def write(rows) -> None:
        from pyspark import TaskContext

        tc = TaskContext.get()
        rows = list(rows)
        if by_kafka_partition:
            # Spark's Kafka source: a task reads one Kafka partition, in an order of Spark's choosing.
            if not rows:
                return  # only a range of transaction markers reads no record: nothing to write
            o = next(r for r in offset_ranges if r.partition == rows[0][2])
        else:
            o = offset_ranges[tc.partitionId()]  # HasOffsetRanges: Spark partition i reads range i
        hook = midway_hook(ctx, batch, **faults)
        with open_sink(run_dir) as sink:
            outcome = sink.write_batch(
                rows, f"batch-{batch}-part-{o.partition}", on_midway=hook, topic=topic,
                offsets={o.partition: (o.fromOffset, o.untilOffset)} if offset_store == "sink" else None)
        counters["written" if outcome == "written" else "skipped"].add(len(rows))
        if tc.attemptNumber() > 0:
            counters["retried_tasks"].add(1)

    return write


# -- the driver ------------------------------------------------------------------
class _Announcer(threading.Thread):
    """Writes ``batch-start`` once the task named for an executor crash is waiting (or at the end).

    The supervisor fires ``executor-crash@batch=N`` at batch N's
    ``batch-start``; announcing it only when a task is mid-output makes the
    kill land inside that task every time.
    """

    def __init__(self, ctx: DriverContext, batch: int, announce) -> None:
        super().__init__(name=f"lab-announce-{batch}", daemon=True)
        self.ctx, self.batch, self._announce = ctx, batch, announce
        self.tail = EventTail(ctx.run_dir)
        self.tail.pos = (ctx.run_dir / ev.EVENTS_FILE).stat().st_size
        self.finish = threading.Event()
        self._lock = threading.Lock()
        self._done = False

    def announce_once(self) -> None:
        with self._lock:
            if not self._done:
                self._done = True
                self._announce()

    def run(self) -> None:
        while not self.finish.wait(0.05):
            if any(e.get("type") == ev.EXECUTOR_TARGET and e.get("batch") == self.batch for e in self.tail.read_new()):
                break
        self.announce_once()


def run(ctx: DriverContext) -> None:
    """Run the direct stream until SIGTERM.

    Delivery guarantee: see the module docstring (receipt exactly once;
    end to end decided by ``--offsets`` and ``--sink``).

    Raises
    ------
    Exception
        A batch's job error (after Spark's task retries), or an offset store
        that disagrees with the checkpoint; the supervisor restarts the
        driver, which re-runs the batch.
    """
    from lab.spark.session import (
        RDD_WORKER_IMPORTS,
        TASK_ATTEMPTS,
        skip_accumulator_wait,
        spark_session,
        start_python_workers,
        warm_up,
        with_task_retries,
    )

    cfg = ctx.config
    log = OffsetLog(ctx.run_dir / CHECKPOINT_DIR)
    store = OffsetStore(cfg.spark.offsets, ctx)
    from lab.pipelines.shared.kafka_reader import resolve_reader

    spark = spark_session(with_task_retries(cfg.spark.spark_master), ctx.run_dir, app_name=f"lab-direct-{ctx.run_id}",
                          extra={"spark.task.maxFailures": str(TASK_ATTEMPTS)},
                          kafka_connector=may_use_connector(cfg, cfg.spec), phase=ctx.phase,
                          worker_imports=RDD_WORKER_IMPORTS)
    sc = spark.sparkContext
    # Spark's batch Kafka source reads the planned ranges with Apache Kafka and its connector;
    # else each task reads its range with kafka-python (lab.kafka.read).
    reader = resolve_reader(spark, cfg.spark.kafka_reader)
    # With what the tasks import (lab.spark.session), beside the driver's planning (see lab.spark.session.warm_up).
    warm = warm_up(ctx, start_python_workers, sc)
    # Everything above has no delivery effect; a standby waits here for its turn (lab.pipelines.driver).
    ctx.await_turn()
    ctx.events.write(ev.KAFKA_READER, reader=reader, asked=cfg.spark.kafka_reader)
    try:
        ctx.phase("query")
        earliest = retry(lambda: earliest_offsets(ctx.bootstrap, cfg.topic, cfg.partitions))
        pending = log.pending()
        if pending is not None:
            batch, logged = pending
            ranges = recovery_ranges(cfg.spark.offsets, logged, store.stored(), earliest)
            ctx.progress({r.partition: r.fromOffset for r in ranges}, batch - 1)
            _run_batch(ctx, sc, log, store, batch, ranges, replay=True, reader=reader)
            positions = {r.partition: r.untilOffset for r in ranges}
            batch += 1
        else:
            positions = start_positions(ctx, log, store, earliest)
            batch = (log.planned() or [-1])[-1] + 1
        ctx.progress(positions, batch - 1)
        # As Spark's batch timer: the first new batch comes one interval after the start.
        next_at = time.monotonic() + cfg.batch_interval_s
        while not ctx.stopping:
            if time.monotonic() < next_at:
                time.sleep(max(0.0, min(0.05, next_at - time.monotonic())))
                continue
            next_at = time.monotonic() + cfg.batch_interval_s
            try:
                latest = kafka_tools.end_offsets(ctx.bootstrap, cfg.topic, cfg.partitions)
            except Exception:
                # Broker unreachable: no batch this interval; the next one asks again.
                continue
            # lesson: direct-ranges
            ranges = plan_ranges(cfg.topic, positions, latest, cfg.max_batch_records)
            if not any(r.count() for r in ranges):
                ctx.progress(positions, batch - 1)
                continue
            log.write_plan(batch, ranges, cfg.spark.offsets)
            _run_batch(ctx, sc, log, store, batch, ranges, replay=False, reader=reader)
            positions = {r.partition: r.untilOffset for r in ranges}
            batch += 1
            # end lesson: direct-ranges
    finally:
        store.close()
        warm.join(30.0)
        skip_accumulator_wait(sc)
        spark.stop()


def _run_batch(ctx: DriverContext, sc, log: OffsetLog, store: OffsetStore, batch: int,
               ranges: list[OffsetRange], replay: bool, reader: str = "labkafka") -> None:
    """Run one planned batch: output inside tasks, commit, mark done, report progress.

    Delivery guarantee: the batch's ranges are read exactly; output is the
    sink's and the offset store's. On failure writes ``batch-error`` and
    raises; the batch stays unfinished in the offset log.
    """
    cfg = ctx.config
    rows = sum(r.count() for r in ranges)
    executor_crash = any(f.kind == "executor-crash" and f.batch == batch for f in ctx.pending)

    def announce() -> None:
        ctx.batch_start(batch, ranges_dict(ranges), rows, replay=replay, offset_store=cfg.spark.offsets)

    if not executor_crash:
        announce()
    ctx.point("after-offset-log", batch)
    fail_once = ctx.task_failure_due(batch) is not None
    # Only non-empty ranges become tasks; Spark partition i reads active[i].
    active = [r for r in ranges if r.count() > 0]
    counters = {k: sc.accumulator(0) for k in ("written", "skipped", "retried_tasks")}
    announcer = None
    if executor_crash:
        ctx.pending = [f for f in ctx.pending if not (f.kind == "executor-crash" and f.batch == batch)]
        announcer = _Announcer(ctx, batch, announce)
        announcer.start()
    try:
        if active:
            faults = {"fail_once": fail_once, "executor_crash": executor_crash}
            if reader == "spark":
                from pyspark.sql import SparkSession

                records = spark_kafka_records(SparkSession.getActiveSession(), ctx.bootstrap, active,
                                              cfg.isolation_level)
                write = partition_writer(ctx, batch, tuple(active), cfg.spark.offsets, faults, counters, True)
                # The transformation (JSON to rows) and the output, in each task.
                records.mapInArrow(arrow_output(write), "done int").collect()
            else:
                kafka_rdd = create_direct_rdd(sc, ctx.bootstrap, active, cfg.isolation_level)
                offset_ranges = kafka_rdd.offsetRanges  # the HasOffsetRanges cast: only the Kafka RDD has them
                # The transformation (JSON to rows), then the output.
                kafka_rdd.map(lambda record: record_row(*record)).foreachPartition(
                    partition_writer(ctx, batch, offset_ranges, cfg.spark.offsets, faults, counters))
    except Exception as e:
        ctx.events.write(ev.BATCH_ERROR, batch=batch, error=repr(e)[-500:])
        raise
    finally:
        if announcer is not None:
            announcer.finish.set()
            announcer.join()
    ctx.point("after-output-before-commit", batch)
    store.commit(ranges)
    # Spark applies a task's accumulator updates once, from its successful attempt: these
    # count the records the output saw, whatever attempts failed on the way.
    written, skipped = counters["written"].value, counters["skipped"].value
    log.mark_done(batch, written + skipped)
    ctx.batch_done(batch, written + skipped, offsets=rows, written=written, skipped=skipped,
                   retried_tasks=counters["retried_tasks"].value, replay=replay)
    ctx.progress({r.partition: r.untilOffset for r in ranges}, batch)
