"""A Kafka source for Spark, written with the Python Data Source API: ``labkafka``.

The structured pipeline reads Kafka with it when ``--kafka-reader labkafka``
says so, or ``auto`` finds Spark's own connector (``spark-sql-kafka-0-10``,
cached by ``lab fetch``) missing (:mod:`lab.pipelines.structured.kafka_input`),
and it is a readable example of what such a connector does: kafka-python
inside Spark tasks, offsets as JSON, admission control. Spark's Python workers load it by this module
name, :mod:`lab.spark.kafka_source`. Register the source once per session, then
use it by its short name::

    from lab.spark.kafka_source import register
    register(spark)
    df = (spark.readStream.format("labkafka")
          .option("bootstrap", "127.0.0.1:9092").option("topic", "events")
          .option("maxRecordsPerTrigger", 500).load())

Options
-------
``bootstrap``             ``host:port`` of the broker (required).
``topic``                 topic to read (required).
``partitions``            partition count; discovered from the broker when absent.
``maxRecordsPerTrigger``  admission control: at most this many offsets per
                          micro-batch, spread over the partitions in proportion
                          to their backlog (as Spark's Kafka connector does).
``startingOffsets``       ``earliest`` (default), ``latest`` or JSON ``{"0": 5}``;
                          where a new streaming query, or a batch read, begins.
``endingOffsets``         batch reads only: ``latest`` (default) or JSON.
``readTimeoutS``          seconds a task may wait without progress before it
                          fails (default 60); Spark then retries the task.
``isolationLevel``        ``read_uncommitted`` (default) or ``read_committed``: with
                          ``read_committed`` records of open or aborted producer
                          transactions are never returned (a range ending inside an
                          open transaction waits for its commit or abort).
``checkCrcs``             ``true`` to verify each record batch's CRC32C in the
                          reader (default ``false``, the reason is at
                          :data:`lab.kafka.tools.READ_SETTINGS`).

Offsets and partitions
----------------------
A streaming offset is JSON ``{"<partition>": next offset}`` with the keys
in partition order, so equal positions always serialise to the same string
(the engine compares offsets as strings). A micro-batch from ``start`` to
``end`` becomes one :class:`KafkaRange` per Kafka partition that has
offsets in ``[start, end)``; empty partitions get no task. The planning is
a pure function of ``(start, end)``, so a batch re-run after a restart has
the same Spark partitions in the same order.

Executors read a range with :func:`lab.kafka.read.read_range` (assigned,
never a consumer group; stops on the consumer's position, because
transaction markers occupy offsets) and hand it to Spark as Arrow batches of
:data:`lab.kafka.read.ARROW_CHUNK_ROWS` rows (:func:`lab.kafka.read.arrow_chunks`).

Delivery guarantee
------------------
Receipt is exactly once per range: reading ``[start, end)`` returns the same
records every time while the broker retains them, and the engine's offset
log replays the same ranges after a restart. What reaches an output is then
decided by the sink.

On failure
----------
``read`` raises :class:`lab.kafka.read.KafkaReadStalled` when a range makes
no progress for ``readTimeoutS`` (broker down longer than that), kafka-python's
``OffsetOutOfRangeError`` when the range is no longer in the broker (never
silently resets to another offset), and :class:`lab.kafka.read.NotALabEvent`
for a record that is not a lab event (naming its partition and offset).
Spark fails the task and retries it.
``latestOffset`` answers "no new data" while the broker cannot be reached,
so an outage delays batches instead of failing the query.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from lab.kafka import tools as kafka_tools
from lab.kafka.read import (
    ARROW_CHUNK_ROWS,
    COLUMNS,
    ISOLATION_LEVELS,
    READ_STALL_S,
    arrow_chunks,
    earliest_offsets,
    read_range as read_records,
)

SHORT_NAME = "labkafka"

#: Rows of the source, one per Kafka record: :data:`lab.kafka.read.COLUMNS`.
SCHEMA = StructType([StructField(name, {"string": StringType, "long": LongType, "int": IntegerType}[t]())
                     for name, t in COLUMNS])

#: The range reader's consumer settings, under the name ``bench/pipelines.py`` imports.


class KafkaRange(InputPartition):
    """Offsets ``[start, end)`` of one Kafka partition: one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"KafkaRange({self.topic}-{self.partition} [{self.start}, {self.end}))"


# -- offsets ---------------------------------------------------------------
def offsets_json(positions: dict) -> dict[str, int]:
    """The canonical offset dict: string keys in partition order."""
    return {str(p): int(positions[p]) for p in sorted(positions, key=int)}


def parse_offsets(offset: dict | str | None) -> dict[int, int]:
    """``{"0": 5}`` (dict or JSON text) to ``{0: 5}``."""
    if offset is None:
        return {}
    if isinstance(offset, str):
        offset = json.loads(offset)
    return {int(p): int(o) for p, o in offset.items()}


def cap_offsets(start: dict[int, int], latest: dict[int, int], max_rows: int) -> dict[int, int]:
    """Admission control: advance at most ``max_rows`` offsets in total.

    Each partition gets a share of ``max_rows`` in proportion to its backlog;
    the rounding remainder goes to the largest fractions, ties to the lower
    partition number, so the same backlog always gives the same plan. No
    partition is skipped or read past its latest offset, so capping delays
    records and never loses them. Transaction markers count as offsets, so a
    capped batch can hold fewer than ``max_rows`` records.
    """
    avail = {p: max(0, latest[p] - start.get(p, 0)) for p in latest}
    total = sum(avail.values())
    if total <= max_rows:
        return dict(latest)
    shares = {p: max_rows * a / total for p, a in avail.items()}
    take = {p: int(s) for p, s in shares.items()}
    remainder = max_rows - sum(take.values())
    for p in sorted(avail, key=lambda q: (-(shares[q] - take[q]), q))[:remainder]:
        take[p] += 1
    return {p: start.get(p, 0) + take[p] for p in latest}


def plan_ranges(topic: str, start: dict[int, int], end: dict[int, int]) -> list[KafkaRange]:
    """One :class:`KafkaRange` per partition with offsets in ``[start, end)``, in partition order.

    A pure function of its arguments: a batch re-run with the same offsets
    gets the same ranges at the same Spark partition indices, so a task
    failure or a mid-output crash hits the same partition each time.
    """
    return [KafkaRange(topic, p, start.get(p, 0), end[p]) for p in sorted(end) if end[p] > start.get(p, 0)]


# -- options ---------------------------------------------------------------
class _Options:
    """The source's options, parsed once and checked with clear messages."""

    def __init__(self, options) -> None:
        opts = {k.lower(): v for k, v in dict(options).items()}
        self.bootstrap = opts.get("bootstrap")
        self.topic = opts.get("topic")
        if not self.bootstrap or not self.topic:
            raise ValueError(f"the {SHORT_NAME} source needs options bootstrap and topic (got {sorted(opts)})")
        self.partitions = int(opts["partitions"]) if opts.get("partitions") else None
        self.max_records = int(opts["maxrecordspertrigger"]) if opts.get("maxrecordspertrigger") else None
        if self.max_records is not None and self.max_records < 1:
            raise ValueError(f"maxRecordsPerTrigger must be >= 1, got {self.max_records}")
        self.starting = opts.get("startingoffsets", "earliest")
        self.ending = opts.get("endingoffsets", "latest")
        self.read_timeout_s = float(opts.get("readtimeouts", READ_STALL_S))
        self.check_crcs = str(opts.get("checkcrcs", "false")).lower() == "true"
        self.isolation_level = opts.get("isolationlevel", "read_uncommitted")
        if self.isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolationLevel {self.isolation_level!r} is not valid; valid: "
                             f"{', '.join(ISOLATION_LEVELS)}")


class _OffsetClient:
    """Driver-side offset look-ups (one long-lived consumer, no group)."""

    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self._consumer = None
        self._partitions: int | None = opts.partitions

    def _c(self):
        if self._consumer is None:
            self._consumer = kafka_tools.consumer(self.opts.bootstrap)
        return self._consumer

    def partition_ids(self) -> list[int]:
        if self._partitions is None:
            found = self._c().partitions_for_topic(self.opts.topic)
            if not found:
                raise ValueError(f"topic {self.opts.topic!r} not found on {self.opts.bootstrap}")
            self._partitions = len(found)
        return list(range(self._partitions))

    def earliest(self) -> dict[int, int]:
        return earliest_offsets(self.opts.bootstrap, self.opts.topic, len(self.partition_ids()), consumer=self._c())

    def latest(self) -> dict[int, int]:
        return kafka_tools.end_offsets(self.opts.bootstrap, self.opts.topic, len(self.partition_ids()))

    def resolve(self, spec: str, default: str) -> dict[int, int]:
        """``earliest`` / ``latest`` / JSON to concrete offsets (JSON may name a subset)."""
        spec = (spec or default).strip()
        if spec == "earliest":
            return self.earliest()
        if spec == "latest":
            return self.latest()
        given = parse_offsets(spec)
        base = self.earliest()
        base.update(given)
        return base

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception:
                pass
            self._consumer = None


# -- executors: reading one range -----------------------------------------
def read_range(bootstrap: str, topic: str, partition: int, start: int, end: int,
               timeout_s: float = READ_STALL_S, chunk_rows: int = ARROW_CHUNK_ROWS, check_crcs: bool = False,
               isolation_level: str = "read_uncommitted") -> Iterator:
    """The source's read: :func:`lab.kafka.read.read_range` of ``[start, end)`` as Arrow batches of :data:`SCHEMA`.

    Delivery guarantee: every record in the range exactly once, in offset
    order; none outside it (with ``read_committed``: none of an aborted
    transaction, where the broker honours it).

    Raises
    ------
    lab.kafka.read.KafkaReadStalled
        No progress for ``timeout_s`` seconds.
    lab.kafka.read.NotALabEvent
        A record whose value is not the lab's JSON event (named by partition and offset).
    kafka.errors.OffsetOutOfRangeError
        ``start`` is no longer in the broker.
    """
    polls = read_records(bootstrap, topic, partition, start, end, stall_s=timeout_s, isolation_level=isolation_level,
                         check_crcs=check_crcs, poll_records=chunk_rows)
    return arrow_chunks(polls, partition, chunk_rows)


# -- the data source -------------------------------------------------------
class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader with admission control and Trigger.AvailableNow.

    Lives in Spark's planner process on the driver for the whole query;
    ``read`` runs in executors on a pickled copy (without the offset client).
    """

    def __init__(self, options) -> None:
        self.opts = _Options(options)
        self._offsets = _OffsetClient(self.opts)
        self._target: dict[int, int] | None = None
        self._last_known: dict[int, int] | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_offsets"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._offsets = _OffsetClient(self.opts)

    def initialOffset(self) -> dict:
        # A new query only: a restarted one resumes from its offset log.
        deadline = time.monotonic() + 30
        while True:
            try:
                return offsets_json(self._offsets.resolve(self.opts.starting, "earliest"))
            except Exception:
                if time.monotonic() > deadline:
                    raise
                self._offsets.close()
                time.sleep(0.5)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_records:
            return ReadMaxRows(self.opts.max_records)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = parse_offsets(start)
        if self._target is not None:
            latest = dict(self._target)
        else:
            try:
                latest = self._offsets.latest()
            except Exception:
                # Broker unreachable: report no new data; the next trigger asks again.
                self._offsets.close()
                return offsets_json(begin)
        self._last_known = latest
        # Never plan backwards (an end-offset answer can lag the previous one); a partition
        # the start offset does not name yet is read from 0 (see plan_ranges).
        latest = {p: max(o, begin.get(p, 0)) for p, o in latest.items()}
        for p, o in begin.items():
            latest.setdefault(p, o)
        if isinstance(limit, ReadMaxRows):
            latest = cap_offsets(begin, latest, limit.max_rows)
        return offsets_json(latest)

    def reportLatestOffset(self):
        return offsets_json(self._last_known) if self._last_known else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._offsets.latest()

    def partitions(self, start: dict, end: dict) -> list[KafkaRange]:
        return plan_ranges(self.opts.topic, parse_offsets(start), parse_offsets(end))

    def read(self, partition: KafkaRange) -> Iterator:
        return read_range(self.opts.bootstrap, partition.topic, partition.partition, partition.start,
                          partition.end, self.opts.read_timeout_s,
                          check_crcs=self.opts.check_crcs, isolation_level=self.opts.isolation_level)

    def commit(self, end: dict) -> None:
        # Nothing to release: Kafka keeps the data, and the engine's commit log is the record.
        pass

    def stop(self) -> None:
        self._offsets.close()


class KafkaBatchReader(DataSourceReader):
    """``spark.read`` over ``[startingOffsets, endingOffsets)``, resolved when the query is planned."""

    def __init__(self, options) -> None:
        self.opts = _Options(options)

    def partitions(self) -> list[KafkaRange]:
        client = _OffsetClient(self.opts)
        try:
            start = client.resolve(self.opts.starting, "earliest")
            end = client.resolve(self.opts.ending, "latest")
        finally:
            client.close()
        return plan_ranges(self.opts.topic, start, end)

    def read(self, partition: KafkaRange) -> Iterator:
        if not isinstance(partition, KafkaRange):  # Spark's placeholder for "no partitions"
            return iter(())
        return read_range(self.opts.bootstrap, partition.topic, partition.partition, partition.start,
                          partition.end, self.opts.read_timeout_s,
                          check_crcs=self.opts.check_crcs, isolation_level=self.opts.isolation_level)


class KafkaDataSource(DataSource):
    """The ``labkafka`` data source: streaming and batch reads of a Kafka topic."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> KafkaBatchReader:
        return KafkaBatchReader(self.options)

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(self.options)


def register(spark) -> None:
    """Make ``format("labkafka")`` available in ``spark`` (registering again replaces it).

    The class is pickled by reference, so executors and Spark's planner
    processes must be able to import :mod:`lab.spark.kafka_source`.
    """
    spark.dataSource.register(KafkaDataSource)
