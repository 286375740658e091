"""The ``direct`` pipeline: Spark 1.3's direct Kafka approach, on Spark RDDs, in the open.

PySpark has had no direct Kafka DStream since Spark 3.0, so this module
carries out the protocol of ``DirectKafkaInputDStream`` itself, where you
can read it:

1. Every ``batch_interval_s`` (the first time one interval after the
   driver starts) the driver asks Kafka for the latest offset of each
   partition (the high watermark of a fetch, see
   :func:`lab.kafka_tools.end_offsets`).
2. It plans one :class:`OffsetRange` ``[fromOffset, untilOffset)`` per
   partition, taking at most ``max_batch_records`` offsets per partition per
   batch (like ``spark.streaming.kafka.maxRatePerPartition`` times the
   interval). An interval without new offsets plans no batch.
3. It writes the plan to the checkpoint's offset log *before* anything runs.
4. It builds an RDD with one Spark partition per non-empty range
   (:func:`create_direct_rdd`); each task reads exactly its range with
   kafka-python (``assign`` + ``seek``) and stops on *position*, not on
   "last offset seen", because transaction markers occupy offsets.
5. It runs the transformation (JSON to rows) and the output: each task
   writes its own partition's rows to the sink (``foreachPartition``). The
   output function sees the batch's ranges, as ``HasOffsetRanges`` does.
6. It commits offsets where ``--offsets`` says, then marks the batch done.

After a crash the driver re-runs the last planned batch that is not marked
done, with the same batch number and the same ranges, then continues.
Before anything else a (re)started driver starts its Python workers with
one empty job (:func:`start_python_workers`), so that cost is not a batch's.

The checkpoint (``<run_dir>/checkpoint/``)
------------------------------------------
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
                skipped) raises :class:`lab.sinks.OffsetMismatch` and nothing
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
                                ``transactional`` nothing yet). In local mode
                                the task's Python worker is in the driver's
                                process group, so the crash takes it too.
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
again); a task whose range makes no progress for :data:`READ_STALL_S`
seconds fails and is retried. SIGTERM stops the driver after the batch in
flight.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from lab import events as ev
from lab import kafka_tools
from lab.driver import DriverContext
from lab.errors import LabError
from lab.events import EventTail
from lab.sinks import open_sink

#: The Spark partition whose task carries ``mid-output``, ``task-failure`` and ``executor-crash``.
FAULT_PARTITION = 0
#: Seconds a task may read without moving its position before it fails (Spark then retries it).
READ_STALL_S = 60.0
#: Seconds the task named for an executor crash waits for the kill before it carries on.
EXECUTOR_KILL_WAIT_S = 20.0
#: Seconds the driver keeps retrying an offset look-up or commit before giving up.
KAFKA_RETRY_S = 30.0
#: Records one ``poll()`` of a task's consumer may return.
POLL_RECORDS = 10_000
#: Consumer settings of a task's range read (on top of :data:`lab.kafka_tools.CONSUMER_DEFAULTS`).
#: ``auto_offset_reset="none"``: a range that left the broker must fail the task, never
#: silently read other offsets. ``check_crcs=False``: kafka-python checks CRC32C in pure
#: Python unless the C ``crc32c`` package is installed, which measured as half of a read's
#: time here; the records come over loopback from a broker that checked them on produce.
#: The structured pipeline's source and the bench's raw-consume baseline read the same way.
READ_SETTINGS = dict(auto_offset_reset="none", max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20,
                     check_crcs=False)
#: Name of the checkpoint directory inside the run directory.
CHECKPOINT_DIR = "checkpoint"


class InjectedTaskFailure(RuntimeError):
    """The planned ``task-failure``: raised once inside a task, after part of its rows were written."""


class KafkaReadStalled(RuntimeError):
    """A task's range made no progress for :data:`READ_STALL_S` seconds."""


# -- offset ranges and the offset log ------------------------------------------
@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[fromOffset, untilOffset)`` of one Kafka partition, as Spark's ``OffsetRange``.

    The camelCase field names are Spark's, so code written against
    ``HasOffsetRanges`` reads the same here.
    """

    topic: str
    partition: int
    fromOffset: int
    untilOffset: int

    def count(self) -> int:
        """Offsets in the range (records, unless transaction markers occupy some)."""
        return self.untilOffset - self.fromOffset

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition,
                "fromOffset": self.fromOffset, "untilOffset": self.untilOffset}

    @classmethod
    def from_json(cls, d: dict) -> "OffsetRange":
        return cls(str(d["topic"]), int(d["partition"]), int(d["fromOffset"]), int(d["untilOffset"]))


def ranges_dict(ranges) -> dict[int, tuple[int, int]]:
    """``{partition: (from, until)}``, the shape events and the sink use."""
    return {r.partition: (r.fromOffset, r.untilOffset) for r in ranges}


def plan_ranges(topic: str, start: dict[int, int], latest: dict[int, int], max_per_partition: int) -> list[OffsetRange]:
    """Plan one batch: per partition, from its start up to at most ``max_per_partition`` offsets further.

    Pure: the same positions always give the same plan. Every partition of
    ``latest`` gets a range (possibly empty); a partition whose latest offset
    is behind its start (a broker that lost data) gets an empty range and
    keeps its start, so the next plan still continues the last one.
    """
    out = []
    for p in sorted(latest):
        begin = start.get(p, 0)
        until = max(begin, min(latest[p], begin + max_per_partition))
        out.append(OffsetRange(topic, p, begin, until))
    return out


def _write_atomically(path: Path, text: str) -> None:
    # Readers (a restarted driver, a notebook) must never see half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class OffsetLog:
    """The checkpoint's offset log: ``offsets/<batch>.json`` plans and ``done/<batch>`` markers.

    Parameters
    ----------
    root : Path
        The checkpoint directory (``<run_dir>/checkpoint``); created on first write.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.offsets_dir = self.root / "offsets"
        self.done_dir = self.root / "done"

    @staticmethod
    def _numbers(d: Path, pattern: str) -> list[int]:
        if not d.is_dir():
            return []
        return sorted(int(m.group(1)) for f in d.iterdir() if (m := re.fullmatch(pattern, f.name)))

    def planned(self) -> list[int]:
        """Batch numbers with a plan, ascending."""
        return self._numbers(self.offsets_dir, r"(\d+)\.json")

    def done(self) -> list[int]:
        """Batch numbers marked done, ascending."""
        return self._numbers(self.done_dir, r"(\d+)")

    def plan(self, batch: int) -> dict | None:
        """The logged plan of ``batch`` as written (``None`` if never planned)."""
        try:
            return json.loads((self.offsets_dir / f"{batch}.json").read_text())
        except FileNotFoundError:
            return None

    def ranges(self, batch: int) -> list[OffsetRange] | None:
        plan = self.plan(batch)
        return None if plan is None else [OffsetRange.from_json(r) for r in plan["ranges"]]

    def is_done(self, batch: int) -> bool:
        return (self.done_dir / str(batch)).exists()

    def write_plan(self, batch: int, ranges: list[OffsetRange], offset_store: str) -> None:
        """Log ``batch``'s ranges; refuses to overwrite a logged plan (a batch's ranges never change)."""
        self.offsets_dir.mkdir(parents=True, exist_ok=True)
        path = self.offsets_dir / f"{batch}.json"
        if path.exists():
            raise LabError(f"batch {batch} is already in the offset log {path}; a batch is planned once")
        topic = ranges[0].topic if ranges else None
        head = json.dumps({"batch": batch, "topic": topic, "planned_at": round(time.time(), 6),
                           "offset_store": offset_store})[:-1]
        # One range per line, so the file reads like a table in a notebook or a terminal.
        body = ",\n  ".join(json.dumps(r.to_json()) for r in ranges)
        _write_atomically(path, f'{head},\n "ranges": [\n  {body}\n ]}}\n')

    def mark_done(self, batch: int, rows: int) -> None:
        self.done_dir.mkdir(parents=True, exist_ok=True)
        _write_atomically(self.done_dir / str(batch),
                          json.dumps({"batch": batch, "rows": rows, "done_at": round(time.time(), 6)}) + "\n")

    def pending(self) -> tuple[int, list[OffsetRange]] | None:
        """The last planned batch if it is not done (what a restart re-runs), else ``None``."""
        planned = self.planned()
        if not planned or self.is_done(planned[-1]):
            return None
        return planned[-1], self.ranges(planned[-1])

    def next_positions(self) -> dict[int, int]:
        """``untilOffset`` per partition of the last planned batch (empty before the first)."""
        planned = self.planned()
        return {} if not planned else {r.partition: r.untilOffset for r in self.ranges(planned[-1])}


# -- executors: reading a range ------------------------------------------------
def read_range(bootstrap: str, r: OffsetRange, stall_s: float = READ_STALL_S,
               isolation_level: str = "read_uncommitted") -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(partition, offset, value)`` for every record in ``r``, in offset order.

    Delivery guarantee: every record of the range exactly once, none outside
    it. Stops when the consumer's *position* reaches ``untilOffset``:
    transaction markers occupy offsets and are never returned as records.
    With ``read_committed`` records of aborted transactions are skipped.

    Raises
    ------
    KafkaReadStalled
        The position did not move for ``stall_s`` seconds (Spark retries the task).
    kafka.errors.OffsetOutOfRangeError
        The range is no longer in the broker (``auto_offset_reset="none"``:
        never silently read other offsets).
    """
    from kafka import TopicPartition

    tp = TopicPartition(r.topic, r.partition)
    consumer = kafka_tools.consumer(bootstrap, **READ_SETTINGS, isolation_level=isolation_level)
    try:
        consumer.assign([tp])
        consumer.seek(tp, r.fromOffset)
        position, last_move = r.fromOffset, time.monotonic()
        while position < r.untilOffset:
            for rec in consumer.poll(timeout_ms=200, max_records=POLL_RECORDS).get(tp, ()):
                if rec.offset >= r.untilOffset:
                    break
                yield rec.partition, rec.offset, rec.value
            now_at = consumer.position(tp)
            if now_at > position:
                position, last_move = now_at, time.monotonic()
            elif time.monotonic() - last_move > stall_s:
                raise KafkaReadStalled(f"{r.topic}-{r.partition}: stuck at offset {position} of "
                                       f"[{r.fromOffset}, {r.untilOffset}) for {stall_s:g} s")
    finally:
        consumer.close()


def create_direct_rdd(sc, bootstrap: str, ranges: list[OffsetRange], isolation_level: str = "read_uncommitted"):
    """The batch's Kafka RDD: one Spark partition per range, in the order of ``ranges``.

    Spark partition ``i`` reads ``ranges[i]``. The returned RDD carries
    ``offsetRanges`` (a tuple of :class:`OffsetRange`), as an RDD from
    ``KafkaUtils.createDirectStream`` does through ``HasOffsetRanges``; and
    as there, only this RDD has it, not RDDs derived from it.

    Delivery guarantee: computing a partition twice (a retry) reads the
    same records.
    """
    ranges = tuple(ranges)

    def read(items):
        for r in items:
            yield from read_range(bootstrap, r, isolation_level=isolation_level)

    rdd = sc.parallelize(ranges, max(1, len(ranges))).mapPartitions(read, preservesPartitioning=True)
    rdd.offsetRanges = ranges
    return rdd


def to_row(record: tuple[int, int, bytes]) -> tuple:
    """The transformation: a Kafka record to a sink row ``(event_id, seq, partition, offset)``.

    Raises
    ------
    ValueError
        A record that is not the lab's JSON event, named by partition and offset.
    """
    partition, offset, value = record
    try:
        event = json.loads(value)
        return event["id"], event["seq"], partition, offset
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"record {partition}@{offset} is not a lab event: {value[:80]!r}") from None


# -- executors: faults inside a task -------------------------------------------
def _executor_jvm():
    """The executor JVM this Python worker belongs to (``None`` in local mode, where there is none)."""
    import psutil

    try:
        for p in psutil.Process().parents():
            if any("CoarseGrainedExecutorBackend" in part for part in p.cmdline()):
                return p
    except psutil.Error:
        pass
    return None


def _await_executor_kill(ctx: DriverContext, batch: int) -> None:
    """Name this task's executor for the supervisor's kill and wait for it.

    The Python worker exits as soon as its executor JVM is gone, as it would
    on a dead machine: left running it could finish its output after Spark
    had already rerun the task elsewhere.
    """
    import psutil

    jvm = _executor_jvm()
    if jvm is None:
        return
    ctx.events.write(ev.EXECUTOR_TARGET, pid=jvm.pid, batch=batch, worker_pid=os.getpid())
    deadline = time.monotonic() + EXECUTOR_KILL_WAIT_S
    while time.monotonic() < deadline:
        if not psutil.pid_exists(jvm.pid) or jvm.status() == psutil.STATUS_ZOMBIE:
            os._exit(137)
        time.sleep(0.02)


def _midway_hook(ctx: DriverContext, batch: int, crash_here: bool, fail_once: bool, executor_crash: bool):
    """What the running task does once part of its rows are written (``None``: nothing)."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc.partitionId() != FAULT_PARTITION:
        return None
    first_attempt = tc.attemptNumber() == 0

    def hook() -> None:
        if crash_here:
            ctx.point("mid-output", batch)
        if executor_crash and first_attempt:
            _await_executor_kill(ctx, batch)
        if fail_once and first_attempt:
            raise InjectedTaskFailure(f"planned task-failure in batch {batch}, Spark partition {FAULT_PARTITION}")

    return hook if (crash_here or (first_attempt and (fail_once or executor_crash))) else None


def partition_writer(ctx: DriverContext, batch: int, offset_ranges: tuple, offset_store: str, faults: dict, counters):
    """The ``foreachPartition`` function: one task writes its partition's rows to the sink.

    Batch key ``batch-<batch>-part-<kafka partition>``; with
    ``offset_store == "sink"`` the task's range ``{partition: (from, until)}``
    commits in the same transaction as its rows.

    Delivery guarantee: the sink mode's, per part. On failure the task
    raises (``OffsetMismatch``, the injected failure, a read error); Spark
    retries it, and an ``append`` sink then also holds what the failed
    attempt had committed.
    """
    run_dir, topic = ctx.run_dir, ctx.config.topic

    def write(rows) -> None:
        from pyspark import TaskContext

        tc = TaskContext.get()
        o = offset_ranges[tc.partitionId()]  # HasOffsetRanges: Spark partition i reads range i
        rows = list(rows)
        hook = _midway_hook(ctx, batch, **faults)
        with open_sink(run_dir) as sink:
            outcome = sink.write_batch(
                rows, f"batch-{batch}-part-{o.partition}", on_midway=hook, topic=topic,
                offsets={o.partition: (o.fromOffset, o.untilOffset)} if offset_store == "sink" else None)
        counters["written" if outcome == "written" else "skipped"].add(len(rows))
        if tc.attemptNumber() > 0:
            counters["retried_tasks"].add(1)

    return write


# -- the driver: offset stores ---------------------------------------------------
class OffsetStore:
    """Where the direct stream's offsets are kept (``--offsets``), as seen from the driver.

    Parameters
    ----------
    kind : {"checkpoint", "sink", "kafka"}
    ctx : DriverContext
    """

    def __init__(self, kind: str, ctx: DriverContext) -> None:
        self.kind = kind
        self.ctx = ctx
        self._consumer = None

    def _group(self):
        if self._consumer is None:
            # No subscription: committing to a group needs no group membership (see kafka_tools).
            self._consumer = kafka_tools.consumer(self.ctx.bootstrap, group_id=f"lab-{self.ctx.run_id}")
        return self._consumer

    def stored(self) -> dict[int, int]:
        """The positions this store holds (empty for ``checkpoint``: the offset log is its record)."""
        if self.kind == "sink":
            with open_sink(self.ctx.run_dir) as sink:
                return sink.stored_offsets(self.ctx.config.topic)
        if self.kind == "kafka":
            from kafka import TopicPartition

            cfg = self.ctx.config
            out = {}
            for p in range(cfg.partitions):
                committed = _retry(lambda: self._group().committed(TopicPartition(cfg.topic, p)), self._reset)
                if committed is not None:
                    out[p] = committed
            return out
        return {}

    def commit(self, ranges: list[OffsetRange]) -> None:
        """After the output: commit ``untilOffset`` of every partition to the group (``kafka`` only).

        Raises
        ------
        Exception
            kafka-python's error when the commit still fails after :data:`KAFKA_RETRY_S`
            (the batch is then not marked done and is re-run).
        """
        if self.kind != "kafka":
            return
        from kafka import OffsetAndMetadata, TopicPartition

        offsets = {TopicPartition(r.topic, r.partition): OffsetAndMetadata(r.untilOffset, "", -1) for r in ranges}
        _retry(lambda: self._group().commit(offsets), self._reset)

    def _reset(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close(autocommit=False)
            except Exception:
                pass
            self._consumer = None

    def close(self) -> None:
        self._reset()


def _retry(call, reset=None, within_s: float = KAFKA_RETRY_S):
    """``call()``, retried for ``within_s`` seconds: a broker outage delays the driver, it does not kill it."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return call()
        except Exception:
            if time.monotonic() > deadline:
                raise
            if reset:
                reset()
            time.sleep(0.5)


def earliest_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The first offset of each partition: where a stream with no stored position begins."""
    from kafka import TopicPartition

    def look():
        c = kafka_tools.consumer(bootstrap)
        try:
            found = c.beginning_offsets([TopicPartition(topic, p) for p in range(partitions)])
            return {tp.partition: o for tp, o in found.items()}
        finally:
            c.close()

    return _retry(look)


def recovery_ranges(kind: str, logged: list[OffsetRange], stored: dict[int, int],
                    earliest: dict[int, int]) -> list[OffsetRange]:
    """The ranges a restarted driver re-runs for the unfinished batch ``logged``.

    ``checkpoint``: exactly the logged ranges. ``sink`` / ``kafka``: each
    partition from the store's offset (``earliest`` when it has none) up to
    the logged ``untilOffset``; a partition the store already has
    completely gets an empty range.

    Raises
    ------
    LabError
        When a stored offset lies outside the logged range: store and
        checkpoint disagree about what was done, and guessing could lose or
        repeat data.
    """
    if kind == "checkpoint":
        return list(logged)
    out = []
    for r in logged:
        at = stored.get(r.partition, earliest.get(r.partition, 0))
        if not r.fromOffset <= at <= r.untilOffset:
            raise LabError(f"the {kind} store's offset {at} for partition {r.partition} is outside the unfinished "
                           f"batch's logged range [{r.fromOffset}, {r.untilOffset}); checkpoint and store disagree")
        out.append(OffsetRange(r.topic, r.partition, at, r.untilOffset))
    return out


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
        self.tail.pos = (ctx.run_dir / "events.jsonl").stat().st_size
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
    from lab.spark import TASK_ATTEMPTS, spark_session, start_python_workers, with_task_retries

    cfg = ctx.config
    log = OffsetLog(ctx.run_dir / CHECKPOINT_DIR)
    store = OffsetStore(cfg.offsets, ctx)
    spark = spark_session(with_task_retries(cfg.spark_master), ctx.run_dir, app_name=f"lab-direct-{ctx.run_id}",
                          extra={"spark.task.maxFailures": str(TASK_ATTEMPTS)})
    sc = spark.sparkContext
    try:
        start_python_workers(sc)
        earliest = earliest_offsets(ctx.bootstrap, cfg.topic, cfg.partitions)
        pending = log.pending()
        if pending is not None:
            batch, logged = pending
            ranges = recovery_ranges(cfg.offsets, logged, store.stored(), earliest)
            ctx.progress({r.partition: r.fromOffset for r in ranges}, batch - 1)
            _run_batch(ctx, sc, log, store, batch, ranges, replay=True)
            positions = {r.partition: r.untilOffset for r in ranges}
            batch += 1
        else:
            positions = _start_positions(ctx, log, store, earliest)
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
            ranges = plan_ranges(cfg.topic, positions, latest, cfg.max_batch_records)
            if not any(r.count() for r in ranges):
                ctx.progress(positions, batch - 1)
                continue
            log.write_plan(batch, ranges, cfg.offsets)
            _run_batch(ctx, sc, log, store, batch, ranges, replay=False)
            positions = {r.partition: r.untilOffset for r in ranges}
            batch += 1
    finally:
        store.close()
        spark.stop()


def _start_positions(ctx: DriverContext, log: OffsetLog, store: OffsetStore, earliest: dict[int, int]) -> dict[int, int]:
    """Where the stream continues when no batch is unfinished.

    ``checkpoint``: the last logged batch's ``untilOffset``. ``sink`` /
    ``kafka``: the store's offsets (they are the record of what was output);
    a disagreement with the checkpoint is written to the timeline.
    """
    logged = log.next_positions()
    from_log = {p: logged.get(p, o) for p, o in earliest.items()}
    if store.kind == "checkpoint":
        return from_log
    stored = store.stored()
    positions = {p: stored.get(p, o) for p, o in earliest.items()}
    if positions != from_log:
        ctx.events.write(ev.OFFSETS_DISAGREE, store=store.kind, checkpoint=from_log, stored=positions)
    return positions


def _run_batch(ctx: DriverContext, sc, log: OffsetLog, store: OffsetStore, batch: int,
               ranges: list[OffsetRange], replay: bool) -> None:
    """Run one planned batch: output inside tasks, commit, mark done, report progress.

    Delivery guarantee: the batch's ranges are read exactly; output is the
    sink's and the offset store's. On failure writes ``batch-error`` and
    raises; the batch stays unfinished in the offset log.
    """
    cfg = ctx.config
    rows = sum(r.count() for r in ranges)
    executor_crash = any(f.kind == "executor-crash" and f.batch == batch for f in ctx.pending)

    def announce() -> None:
        ctx.batch_start(batch, ranges_dict(ranges), rows, replay=replay, offset_store=cfg.offsets)

    if not executor_crash:
        announce()
    ctx.point("after-offset-log", batch)
    fail_once = ctx.task_failure_due(batch) is not None
    crash_here = any(f.kind == "driver-crash" and f.point == "mid-output" and f.batch == batch for f in ctx.pending)
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
            kafka_rdd = create_direct_rdd(sc, ctx.bootstrap, active, cfg.producer.isolation_level)
            offset_ranges = kafka_rdd.offsetRanges  # the HasOffsetRanges cast: only the Kafka RDD has them
            faults = {"crash_here": crash_here, "fail_once": fail_once, "executor_crash": executor_crash}
            kafka_rdd.map(to_row).foreachPartition(
                partition_writer(ctx, batch, offset_ranges, cfg.offsets, faults, counters))
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
