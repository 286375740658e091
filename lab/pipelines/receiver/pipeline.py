"""The ``receiver`` pipeline: Spark Streaming (DStreams) with Spark's own receiver and write-ahead log.

What runs
---------
* Spark's ``socketTextStream`` receiver (a real ``Receiver``, run by Spark's
  ``ReceiverTracker`` inside an executor: the driver JVM under ``local[N]``,
  an executor JVM under ``local-cluster``). It stores every line into blocks
  (one every ``spark.streaming.blockInterval``, 200 ms) at storage level
  ``MEMORY_AND_DISK_SER`` with ``--replication`` copies, and reports them to
  the driver.
* ``--wal on`` sets ``spark.streaming.receiver.writeAheadLog.enable``: each
  block is also written to ``<run_dir>/checkpoint/receivedData`` before it is
  reported, and the driver logs block allocations in its own write-ahead log
  (``receivedBlockMetadata``). Both logs close their file after each write
  (``closeFileAfterWrite``): Hadoop's checksummed local file system flushes
  only whole 512-byte checksum chunks, so after a ``kill -9`` the tail of a
  record Spark counted as logged could be missing; a closed file is complete.
* The Kafka side of the receiver is :class:`lab.pipelines.receiver.feed.Feeder`,
  a thread of this driver that writes the topic's records to the receiver's
  socket and commits offsets to the run's group by ``--ack``; its docstring
  describes the protocol, including how the ``StreamingListener`` below tells
  it which records Spark has stored.
* ``--query window-count``: ``updateStateByKey`` running counts per key
  (:func:`lab.pipelines.receiver.running_counts.with_running_counts`), state in the DStream
  checkpoint; the output writes the keys whose count changed, with the change.
* ``foreachRDD`` writes each batch through the run's sink (rows
  ``(event_id, seq, partition, offset)``, batch key ``batch-<n>-time-<ms>``,
  the DStream recipe for transactional output). Rows are collected to the
  driver and written there.
* The checkpoint is ``<run_dir>/checkpoint``; every driver attempt calls
  ``StreamingContext.getOrCreate``, so a restarted driver recovers the DStream
  graph (including the receiver's port, which is why the feeder keeps its
  port in ``<run_dir>/receiver.json``), re-runs the batches the checkpoint
  lists as pending and, with the write-ahead log, their blocks. A standby
  driver (:mod:`lab.run.driver_process`) starts its JVM and SparkSession ahead;
  the feeder (that port) and the checkpoint wait for its turn.
* ``--max-batch`` caps the receiver's rate at ``max_batch_records /
  batch_interval_s`` records/s (``spark.streaming.receiver.maxRate``).

Batches
-------
DStream batches are named by time. The lab numbers the batches that carry
records (0, 1, 2, ...) in the order Spark allocates them and writes
``batch-submitted`` with the batch time and Spark's record count. A batch
recovered by a later driver attempt keeps its number (looked up by batch time
in the timeline). ``batch-start`` (rows = Spark's count, before the blocks are
read), ``batch-done`` (with the offset ranges read) and ``batch-lost`` follow.

``batch-lost`` is written when a batch yields fewer rows than Spark allocated
to it when it was first submitted: its blocks are gone. That is the no-WAL
driver crash (the recovered batch is empty: the blocks lived in the dead
driver's memory) and the executor crash with replication 1 (the only copy
died with the executor; the job fails or Spark skips the missing blocks).
Even with ``--wal off`` the driver keeps its block *metadata* log
(``checkpoint/receivedBlockMetadata``, written whenever a checkpoint
directory is set), so a restarted driver allocates blocks reported before the
crash to its first batch although their data is gone: that batch is reported
lost too. The
batch's surviving rows are written, the event records expected and read
counts, and the pipeline goes on; a restart never loops on such a batch.

Progress (what the auditor splits lost from unseen by)
------------------------------------------------------
``progress.json`` holds the group's committed offsets: the offsets a
restarted receiver reads from. An event below them that never reached the
sink will never be read again, so calling it lost is honest; an event at or
above them will be read again (unseen until then). Records held in the
write-ahead log but not committed sit above the committed offsets: they will
be read again *and* recovered from the log, which is where the duplicates of
the WAL come from. While a batch already committed is still being written,
a live audit counts its events as lost for that moment; the final audit
comes after a clean stop, which first lets the receiver store every line it
was handed (:meth:`Feeder.finish`), then waits until the batches holding them
have written their output (:mod:`lab.pipelines.receiver.stop`), so nothing
is in flight then. The supervisor's drain check
uses the same offsets: committed up to the log end.

Delivery guarantee (what the lab measures; notebook 01 shows the table)
-----------------------------------------------------------------------
``--wal off``  a driver crash loses the blocks of every allocated, unfinished
               batch (their offsets are committed in both ack modes) and, with
               ``--ack auto``, what the receiver had buffered: loss.
``--wal on --ack stored``  at-least-once: recovered batches are output again,
               stored-but-uncommitted records are sent again: duplicates.
``--wal on --ack auto``  what was handed over and committed but still in the
               receiver's buffers at the crash is lost; the rest duplicates.
``executor-crash``  with ``--ack stored``: replication 2 keeps a copy of every
               block (no loss); replication 1 loses the blocks not yet
               processed. ``--ack auto`` also loses the receiver's buffer.
Output is at-least-once with ``append`` (a recovered batch is written
again); ``idempotent`` stores each event once; ``transactional`` skips a
recovered batch already committed, but not records the feeder sent again.

Faults and named points
-----------------------
``driver-crash``       any trigger. Named points (need ``batch=N``):
  ``mid-output``                  half the batch's rows committed to the sink.
  ``after-output-before-commit``  the sink returned; Spark has not yet marked
                                  the batch complete in its checkpoint.
  ``after-wal-before-ack``        ``--wal on --ack stored`` only: Spark has
                                  allocated batch N (its blocks are in the
                                  write-ahead log) and the feeder has not yet
                                  committed their offsets. Any other setting
                                  fails the driver at start with a message.
``executor-crash``     the supervisor kills the receiver's executor (this
                       driver names it with ``executor-target`` whenever the
                       receiver starts). With ``batch=N`` the driver waits at
                       batch N's start, before reading its blocks, until the
                       kill has happened, so the outcome does not depend on
                       timing.
``receiver-restart``   the feeder closes the receiver's connection (gracefully:
                       the receiver reads every line it was handed, then
                       Spark restarts it, and it reconnects after
                       ``spark.streaming.receiverRestartDelay``, 2 s); the
                       feeder resumes from the committed offsets.

On failure
----------
A failing output job (blocks gone) is reported as ``batch-lost`` and does not
stop the stream. Any other error ends the driver with it (the supervisor
restarts it). SIGTERM stops cleanly: the feeder finishes, the batches holding
what it handed over complete, then the StreamingContext stops
(:mod:`lab.pipelines.receiver.stop`; Spark's graceful stop when a wait runs out).
"""

from __future__ import annotations

import json
import threading
import time

from lab import events as ev
from lab.errors import DriverConfigError
from lab.events import EventTail, read_events
from lab.pipelines.driver import DriverContext
from lab.pipelines.receiver import stop as receiver_stop
from lab.pipelines.receiver.conf import max_rate, spark_conf
from lab.pipelines.receiver.epoch import decode_line
from lab.pipelines.receiver.feed import Feeder
from lab.pipelines.receiver.reach import Reach, unreachable_message
from lab.pipelines.receiver.stop import BatchTimes
from lab.pipelines.shared.tasks import EXECUTOR_KILL_WAIT_S, executor_pid

#: Where the feeder's port is kept between driver attempts.
PORT_FILE = "receiver.json"
#: Seconds between looks at the timeline for receiver-restart faults.
TAIL_S = 0.1

_RUNTIME: _Runtime | None = None


def _output(batch_time, rdd) -> None:
    """The ``foreachRDD`` function; module-level so the checkpoint pickles it by reference."""
    if _RUNTIME is None:
        raise RuntimeError("receiver pipeline runtime not initialised")
    _RUNTIME.output(batch_time, rdd)


class BatchBook:
    """Batch numbers by batch time, shared by the listener and the output (thread-safe).

    Rebuilt from the timeline on each driver attempt, so a recovered batch
    keeps its number and its first record count.
    """

    def __init__(self, ctx: DriverContext) -> None:
        self.ctx = ctx
        self.lock = threading.Lock()
        self.by_time: dict[int, tuple[int, int]] = {}
        top = -1
        for e in read_events(ctx.run_dir):
            if e["type"] == ev.BATCH_SUBMITTED and e["time"] not in self.by_time:
                self.by_time[e["time"]] = (e["batch"], e["records"])
            if e["type"] in (ev.BATCH_SUBMITTED, ev.BATCH_START, ev.BATCH_DONE):
                top = max(top, int(e.get("batch", -1)))
        self.next = top + 1
        self.seen_here: set[int] = set()
        self.recovered: set[int] = set()

    def assign(self, batch_ms: int, records: int) -> tuple[int | None, int, bool]:
        """``(number, records at first submission, recovered)`` for a batch; number is None for an empty new batch."""
        with self.lock:
            known = self.by_time.get(batch_ms)
            if known is None and records <= 0:
                return None, 0, False
            if batch_ms not in self.seen_here:
                self.seen_here.add(batch_ms)
                if known is not None:
                    self.recovered.add(batch_ms)
                if known is None:
                    known = (self.next, records)
                    self.by_time[batch_ms] = known
                    self.next += 1
                    self.ctx.events.write(ev.BATCH_SUBMITTED, batch=known[0], time=batch_ms, records=records,
                                          attempt=self.ctx.attempt)
                else:
                    self.ctx.events.write(ev.BATCH_SUBMITTED, batch=known[0], time=batch_ms, records=records,
                                          attempt=self.ctx.attempt, recovered=True, first_records=known[1])
            return known[0], known[1], batch_ms in self.recovered


class _Runtime:
    """Everything the output function, the listener and the main loop share in one driver attempt."""

    def __init__(self, ctx: DriverContext, feeder: Feeder, book: BatchBook) -> None:
        from lab.sinks.reader import open_sink

        self.ctx = ctx
        self.cfg = ctx.config
        self.feeder = feeder
        self.book = book
        self.sink = open_sink(ctx.run_dir)
        self.lock = threading.Lock()
        self.committed: dict[int, int] = {}
        self.last_done = ctx.last_batch()
        # A restarted driver first runs the batches it recovers; until one of them is done, the
        # group's committed offsets say nothing about what reached the sink, so progress waits.
        self.recovering = ctx.attempt > 1
        self.ssc = None
        self.started_ms = int(time.time() * 1000)
        self.batch_times = BatchTimes()  # for the clean stop (lab.pipelines.receiver.stop)
        self.reach = Reach()  # whether the receiver reaches the feeder (lab.pipelines.receiver.reach)

    # -- progress ---------------------------------------------------------------
    def on_commit(self, committed: dict[int, int]) -> None:
        with self.lock:
            self.committed = dict(committed)
            if not self.recovering:
                self.ctx.progress(self.committed, self.last_done)

    def _done(self, batch: int) -> None:
        with self.lock:
            self.recovering = False
            self.last_done = max(self.last_done, batch)
            self.ctx.progress(self.committed, self.last_done)

    # -- Spark facts --------------------------------------------------------------
    def records_of(self, batch_ms: int) -> int:
        """Records Spark allocated to batch ``batch_ms`` (its input info, as the listener reports it)."""
        jssc = self.ssc._jssc
        jtime = self.ssc.sparkContext._jvm.org.apache.spark.streaming.Time(batch_ms)
        it = jssc.ssc().scheduler().inputInfoTracker().getInfo(jtime).valuesIterator()
        total = 0
        while it.hasNext():
            total += int(it.next().numRecords())
        return total

    # -- the output --------------------------------------------------------------
    def output(self, batch_time, rdd) -> None:
        """Write one DStream batch to the sink.

        Delivery guarantee: the sink mode's, per batch key. On failure of
        the job that reads the blocks (blocks gone with an executor), the
        batch is reported as ``batch-lost`` and written with the rows that
        could be read (none); the stream goes on.
        """
        ctx = self.ctx
        batch_ms = int(round(batch_time.timestamp() * 1000))
        now = self.records_of(batch_ms)
        batch, first, recovered = self.book.assign(batch_ms, now)
        if batch is None:
            return
        expected = max(first, now)
        # began: when the receiver started filling this batch (its data arrived during the interval before it).
        ctx.batch_start(batch, {}, now, time=batch_ms, recovered=recovered, first_records=first,
                        began=round(batch_ms / 1000 - self.cfg.batch_interval_s, 3))
        self._await_planned_executor_kill(batch)
        error, counts = None, None
        try:
            lines = rdd.collect()
        except Exception as e:  # py4j error from a job whose blocks are gone
            lines, error = [], _first_line(e)
        if self.cfg.query == "window-count":
            from lab.pipelines.receiver.running_counts import split_tagged

            lines, counts = split_tagged(lines)
        rows = [decode_line(line) for line in lines]
        ranges: dict[int, tuple[int, int]] = {}
        for partition in {r[2] for r in rows}:
            offsets = [r[3] for r in rows if r[2] == partition]
            ranges[partition] = (min(offsets), max(offsets) + 1)
        if len(rows) < expected:
            if error is None and self.cfg.spark.wal == "off" and batch_ms < self.started_ms:
                error = "blocks stored before the driver crash were in its memory, not in a write-ahead log"
            elif error is None:
                error = "blocks missing when the batch was read (gone with an executor)"
            ctx.events.write(ev.BATCH_LOST, batch=batch, time=batch_ms, expected_rows=expected, rows=len(rows),
                             missing=expected - len(rows), reason=error, attempt=ctx.attempt)
        key, midway = f"batch-{batch}-time-{batch_ms}", (lambda: ctx.point("mid-output", batch))
        if counts is None:
            self.sink.write_batch(rows, key, on_midway=midway)
        else:  # window-count: the running counts per key that changed, with their change
            self.sink.write_windows(counts, key, on_midway=midway)
        ctx.point("after-output-before-commit", batch)
        extra = {} if counts is None else {"windows": len(counts), "counted": sum(c[4] for c in counts)}
        ctx.batch_done(batch, len(rows), time=batch_ms, ranges={str(p): list(r) for p, r in sorted(ranges.items())},
                       **extra)
        self._done(batch)

    def _await_planned_executor_kill(self, batch: int) -> None:
        """Hold batch ``batch`` until the supervisor has carried out an executor crash planned for it."""
        planned = [f for f in list(self.ctx.pending) if f.kind == "executor-crash" and f.batch == batch]
        if not planned:
            return
        fault = planned[0]
        self.ctx.pending.remove(fault)
        deadline = time.monotonic() + EXECUTOR_KILL_WAIT_S
        while time.monotonic() < deadline:
            if any(e["type"] == ev.FAULT and e.get("index") == fault.index for e in read_events(self.ctx.run_dir)):
                return
            time.sleep(0.05)
        self.ctx.events.write(ev.EXECUTOR_CRASH_NOT_SEEN, batch=batch, index=fault.index)

    def close(self) -> None:
        self.sink.close()


def _make_listener(runtime: _Runtime):
    from pyspark.streaming.listener import StreamingListener

    ctx = runtime.ctx
    wal_ack_point = ctx.config.spark.wal == "on" and ctx.config.spark.ack == "stored"

    class Listener(StreamingListener):
        """Passes Spark's batch allocations to the feeder; names the receiver's executor."""

        def onBatchSubmitted(self, batchSubmitted) -> None:
            try:
                info = batchSubmitted.batchInfo()
                batch_ms = int(info.batchTime().milliseconds())
                records = int(info.numRecords())
                batch, _, _ = runtime.book.assign(batch_ms, records)
                if batch is not None and records > 0 and wal_ack_point:
                    ctx.point("after-wal-before-ack", batch)
                # Before the feeder counts it: once the feeder has counted every line, the clean stop waits for
                # this batch to complete.
                runtime.batch_times.submitted(batch_ms, records)
                runtime.feeder.batch_allocated(batch_ms, records)
            except Exception as e:  # never let the listener bus swallow a bug silently
                ctx.events.write(ev.RECEIVER_LISTENER_ERROR, error=repr(e)[:300])

        def onBatchCompleted(self, batchCompleted) -> None:
            try:
                runtime.batch_times.completed(int(batchCompleted.batchInfo().batchTime().milliseconds()))
            except Exception as e:
                ctx.events.write(ev.RECEIVER_LISTENER_ERROR, error=repr(e)[:300])

        def onReceiverStarted(self, receiverStarted) -> None:
            runtime.reach.receiver_started(time.monotonic())
            try:
                info = receiverStarted.receiverInfo()
                executor = str(info.executorId())
                pid = executor_pid(executor)
                ctx.events.write(ev.RECEIVER_STARTED, executor_id=executor, location=str(info.location()), pid=pid)
                if pid is not None:
                    ctx.events.write(ev.EXECUTOR_TARGET, pid=pid, executor_id=executor, why="runs the receiver")
            except Exception as e:
                ctx.events.write(ev.RECEIVER_LISTENER_ERROR, error=repr(e)[:300])

        def onReceiverError(self, receiverError) -> None:
            try:
                info = receiverError.receiverInfo()
                message = str(info.lastErrorMessage())[:300]
                runtime.reach.receiver_error(message)
                ctx.events.write(ev.RECEIVER_ERROR, executor_id=str(info.executorId()), message=message)
            except Exception:
                pass

    return Listener()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    for line in text:
        if "Could not compute split" in line or "not found" in line:
            return line.strip().lstrip(": ")[:300]
    return (text[0] if text else repr(e))[:300]


def _feeder_port(ctx: DriverContext) -> int:
    path = ctx.run_dir / PORT_FILE
    try:
        return int(json.loads(path.read_text())["port"])
    except (OSError, ValueError, KeyError):
        return 0


def _check_points(ctx: DriverContext) -> None:
    """The driver's guard against a planned point these settings make impossible (also checked before start).

    Raises
    ------
    DriverConfigError
        ``after-wal-before-ack`` without ``--wal on --ack stored``: no restart can reach it.
    """
    for f in ctx.pending:
        why = f.point and ctx.config.why_not(f.point)
        if why:
            raise DriverConfigError(why)


def run(ctx: DriverContext) -> None:
    """Run the DStream pipeline until SIGTERM, recovering from the checkpoint when there is one.

    Set-up: the session, then (a standby's turn come) the feeder (:func:`_start_feeder`) and the
    StreamingContext, recovered or new (:func:`_streaming_context`). The loop:
    :func:`_watch_until_stopped`, until SIGTERM. The stop: :mod:`lab.pipelines.receiver.stop`;
    after an error the context stops at once, before the feeder and the sink close.

    Delivery guarantee: see the module docstring (decided by ``--wal``,
    ``--ack``, ``--replication`` and ``--sink``).

    Raises
    ------
    DriverConfigError
        A named point that does not exist with these settings (the run ends without restarts).
    Exception
        The StreamingContext's own error, or the feeder's (the supervisor
        restarts the driver).
    """
    global _RUNTIME
    _check_points(ctx)
    # Imported before the session, where a standby has them done before its turn (:func:`_streaming_context`
    # imports them again); pyspark.streaming alone measured 1.8-2.8 ms once the rest was imported.
    from pyspark import StorageLevel  # noqa: F401
    from pyspark.streaming import StreamingContext  # noqa: F401

    from lab.spark.session import driver_addresses, skip_accumulator_wait, spark_session

    spark = spark_session(ctx.config.spark.spark_master, ctx.run_dir, app_name=f"lab-receiver-{ctx.run_id}",
                          extra=spark_conf(ctx.config), phase=ctx.phase)
    # Everything above has no delivery effect; a standby waits here for its turn (lab.pipelines.driver). The feeder
    # binds the port the last driver's receiver was fed on (the checkpoint's socket stream names it): only free now.
    ctx.await_turn()
    book = BatchBook(ctx)
    # The receiver runs on an executor: in the compose stack that is another container, which reaches the
    # feeder by the driver's name (measured: on 127.0.0.1 it was refused at every restart until the deadline).
    bind, advertised = driver_addresses()
    runtime = _RUNTIME = _start_feeder(ctx, book, bind)
    runtime.feeder.start()
    ssc = _streaming_context(runtime, spark.sparkContext, advertised)
    tail = EventTail(ctx.run_dir)
    tail.read_new()  # faults before this attempt are history
    ssc.start()
    ctx.phase("query")
    stopped = False
    try:
        stopped = _watch_until_stopped(runtime, ssc, tail, advertised)
        if not stopped:
            # Drained or not, the last batches may still have their output to write: lab.pipelines.receiver.stop.
            # LAB_QUICK_STOP: both quick parts of the stop, or neither
            quick = skip_accumulator_wait(spark.sparkContext)
            receiver_stop.stop(ssc, runtime.feeder, runtime.batch_times, ctx.events, quick_stop=quick)
            stopped = True
    finally:
        if not stopped:  # an error: stop the batches before the runtime they call goes away
            _quietly(lambda: ssc.stop(stopSparkContext=True, stopGraceFully=False))
        runtime.feeder.stop()
        runtime.close()
        _RUNTIME = None
        _quietly(spark.stop)


def _start_feeder(ctx: DriverContext, book: BatchBook, bind: str) -> _Runtime:
    """The runtime around a feeder listening on ``bind``, at the last driver's port (kept in :data:`PORT_FILE`).

    The feeder is not started yet; once it is, its commits are the runtime's progress (:meth:`_Runtime.on_commit`).
    """
    cfg = ctx.config
    holder: dict = {}
    feeder = Feeder(ctx.bootstrap, cfg.topic, cfg.partitions, f"lab-{ctx.run_id}", _feeder_port(ctx), cfg.spark.ack,
                    ctx.events, on_commit=lambda c: holder["runtime"].on_commit(c), rate=max_rate(cfg),
                    isolation_level=cfg.isolation_level, host=bind)
    port = feeder.start_listening()
    (ctx.run_dir / PORT_FILE).write_text(json.dumps({"port": port}))
    runtime = _Runtime(ctx, feeder, book)
    holder["runtime"] = runtime
    return runtime


def _streaming_context(runtime: _Runtime, sc, advertised: str):
    """The StreamingContext, rebuilt from ``<run_dir>/checkpoint`` when it holds one, else new; its listener added.

    A new one is the receiver (``socketTextStream`` to the feeder's port, ``--replication``
    copies of each block), ``--query window-count``'s running counts and one output action,
    :func:`_output`. Delivery guarantee: with ``--wal on`` a recovered context reads its
    pending batches' blocks again from the write-ahead log. Writes ``receiver-context``.
    """
    from pyspark import StorageLevel
    from pyspark.streaming import StreamingContext

    ctx, cfg, port = runtime.ctx, runtime.cfg, runtime.feeder.port
    checkpoint = str((ctx.run_dir / "checkpoint").resolve())
    # lesson: receiver-wal
    storage = StorageLevel.MEMORY_AND_DISK_2 if cfg.spark.replication == 2 else StorageLevel.MEMORY_AND_DISK

    def create() -> StreamingContext:
        ssc = StreamingContext(sc, cfg.batch_interval_s)
        lines = ssc.socketTextStream(advertised, port, storage)
        if cfg.query == "window-count":
            from lab.pipelines.receiver.running_counts import with_running_counts

            lines = with_running_counts(lines)
        lines.foreachRDD(_output)
        return ssc

    recovered = (ctx.run_dir / "checkpoint").is_dir() and any((ctx.run_dir / "checkpoint").glob("checkpoint-*"))
    ssc = StreamingContext.getOrCreate(checkpoint, create)
    # end lesson: receiver-wal
    runtime.ssc = ssc
    # its pending batches come back without a record count (lab.pipelines.receiver.stop)
    if recovered and runtime.book.by_time:
        runtime.batch_times.hold_through(max(runtime.book.by_time) + receiver_stop.RECOVERED_SLACK_BATCHES
                                         * int(cfg.batch_interval_s * 1000))
    ssc.addStreamingListener(_make_listener(runtime))
    ctx.events.write(ev.RECEIVER_CONTEXT, recovered=recovered, port=port, wal=cfg.spark.wal, ack=cfg.spark.ack,
                     replication=cfg.spark.replication, attempt=ctx.attempt)
    return ssc


def _watch_until_stopped(runtime: _Runtime, ssc, tail: EventTail, advertised: str) -> bool:
    """Watch the running context until SIGTERM; True when it ended by itself first.

    Every :data:`TAIL_S`: the feeder's error is raised, a receiver that cannot reach the feeder ends
    the run (:class:`DriverConfigError`), a ``receiver-restart`` fault drops the receiver's connection.
    """
    ctx, feeder = runtime.ctx, runtime.feeder
    while not ctx.stopping:
        if ssc.awaitTerminationOrTimeout(TAIL_S):
            return True
        if feeder.error is not None:
            raise feeder.error
        why = runtime.reach.unreached(feeder.accepted, time.monotonic())
        if why is not None:  # a restart would be refused the same way: one line, the run ends
            raise DriverConfigError(unreachable_message(advertised, feeder.port, why))
        for e in tail.read_new():
            if e["type"] == ev.FAULT and e.get("kind") == "receiver-restart":
                feeder.drop_connection(f"receiver-restart fault {e.get('index')}")
    return False


def _quietly(stop) -> None:
    """Call ``stop``, ignoring its error: the driver is ending already, and its own error (if any) is the one to
    raise."""
    try:
        stop()
    except Exception:
        pass
