"""The structured pipeline's trigger (``--trigger``): micro-batches, or Spark 4's real-time mode.

``micro-batch``
    A processing-time trigger of ``--batch-interval``: the driver plans a batch's
    offset range, logs it in the offset log, runs it, and logs its commit.
``real-time[:INTERVAL]``
    Spark's real-time mode (``trigger(realTime=...)``, Spark 4.1): each
    partition's task runs for the whole ``INTERVAL`` (:data:`DEFAULT_REAL_TIME_S`
    when not given), passing every record on as it arrives. The batch's end
    offsets are known only when it ends: its offset-log entry is written then,
    its commit just after (measured on 4.3.0: ``offsets/N`` 5.3 s after the
    batch's ``batchTimestampMs`` at ``realTime='5 seconds'``). The interval is
    the checkpoint interval.

Delivery guarantee
------------------
Receipt is exactly once in both modes (replayable offsets, the offset log).
Real-time mode's sinks are Spark's Kafka sink and ``foreach``; the lab's runs
write the Kafka sink (``--sink topic``), which is at-least-once in every mode
(Spark's documentation, "Kafka Sink"): a driver crashed in batch N leaves in
the output topic what N's tasks had sent, and the restarted query runs N again
from N-1's offsets. What is written twice grows with the time since the last
checkpoint, so with the interval.

What real-time mode needs, checked here before any process starts: Spark's
Kafka source (the connector, Apache Kafka), the Kafka sink, a query it runs
(:data:`REAL_TIME_QUERIES`), and a task slot for every task of the batch at once
(a partition's task does not end until the batch does; a stateful query's shuffle
tasks run beside the source's: :func:`slots_needed`).

Stateful queries in real-time mode (Spark 4.3.0, measured on the lab's broker)
------------------------------------------------------------------------------
- Output mode ``append`` is refused (``STREAMING_REAL_TIME_MODE.OUTPUT_MODE_NOT_SUPPORTED``): ``update`` only.
- ``dropDuplicatesWithinWatermark`` is refused (``OPERATOR_OR_SINK_NOT_IN_ALLOWLIST``:
  ``StreamingDeduplicateWithinWatermarkExec``); ``dropDuplicates`` runs. The lab's ``--query dedupe`` into the
  Kafka sink is ``dropDuplicates(["event_id"])`` in both triggers (:mod:`lab.pipelines.structured.kafka_sink`).
- A windowed ``groupBy().count()`` runs (operator ``StatefulStreamlineAggregate``), one output row per input
  record: the lab's ``--query window-count`` into the Kafka sink writes each (window, key)'s running count as it
  changes (:func:`lab.pipelines.structured.kafka_sink.window_updates`), without a watermark.
- A stateful query's stage group needs the source's tasks and the shuffle's at once: 2 partitions and 2 shuffle
  partitions failed on 3 slots (``CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT``: "needs 4 concurrent task slots").
- A state store provider set for the session is refused (``SQL_CONFIGURATION_NOT_SUPPORTED``): Spark's default
  one keeps the state.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from lab.errors import LabError

MICRO_BATCH = "micro-batch"
REAL_TIME = "real-time"
#: ``--trigger``'s values.
TRIGGERS = {
    MICRO_BATCH: "a processing-time trigger of --batch-interval: a batch is planned, logged, run, committed",
    REAL_TIME: "Spark's real-time mode (real-time[:INTERVAL], e.g. real-time:5s): records pass as they arrive, "
               "the interval is the checkpoint interval (structured, --sink topic)",
}
#: Seconds of a real-time batch when ``--trigger real-time`` names none.
DEFAULT_REAL_TIME_S = 5.0
#: The shortest real-time interval the lab accepts: a batch shorter than the driver's commit round trip
#: would spend itself planning. Spark's own floor is 5 s (:data:`REAL_TIME_MIN_CONF`); the lab's sessions set it to
#: this.
MIN_REAL_TIME_S = 1.0
#: Spark's floor for a real-time interval (default 5 s: a shorter one fails the query at its start).
REAL_TIME_MIN_CONF = "spark.sql.streaming.realTimeMode.minBatchDuration"
#: The faults a real-time or Kafka-sink run can carry out: no foreachBatch, so no named point, and no task that ends
#: to be failed.
TOPIC_SINK_FAULTS = ("driver-crash", "driver-pause", "broker-outage", "ack-loss", "broker-crash", "leader-crash",
                     "follower-lag")

#: The queries the lab runs in real-time mode (Spark's Kafka sink, update mode; see the module docstring).
REAL_TIME_QUERIES = ("passthrough", "dedupe", "window-count")
#: Shuffle partitions of the lab's Spark sessions (``spark.sql.shuffle.partitions``, set by :mod:`lab.spark.session`).
SHUFFLE_PARTITIONS = 2

_FORM = re.compile(r"^real-time(?::(\d+(?:\.\d+)?)s)?$")


@dataclass(frozen=True)
class Trigger:
    """A parsed ``--trigger``: its mode and, for real-time mode, its interval in seconds."""

    mode: str
    interval_s: float | None = None

    @property
    def real_time(self) -> bool:
        return self.mode == REAL_TIME

    def to_text(self) -> str:
        """The normalized form config.json keeps (``real-time:5s``); parsing it gives the same trigger."""
        return f"{REAL_TIME}:{self.interval_s:g}s" if self.real_time else MICRO_BATCH

    def spark_duration(self) -> str:
        """The interval as ``trigger(realTime=...)`` takes it, in whole milliseconds."""
        return f"{int(round(self.interval_s * 1000))} milliseconds"


def parse_trigger(text: str) -> Trigger:
    """``micro-batch`` or ``real-time[:<seconds>s]`` as a :class:`Trigger`.

    Raises
    ------
    LabError
        On any other text, or an interval below :data:`MIN_REAL_TIME_S`.
    """
    text = (text or "").strip()
    if text == MICRO_BATCH:
        return Trigger(MICRO_BATCH)
    m = _FORM.match(text)
    if not m:
        raise LabError(f"bad trigger {text!r}; valid: {MICRO_BATCH}, {REAL_TIME} or {REAL_TIME}:<seconds>s "
                       f"(e.g. {REAL_TIME}:5s)")
    interval = float(m.group(1)) if m.group(1) else DEFAULT_REAL_TIME_S
    if interval < MIN_REAL_TIME_S:
        raise LabError(f"real-time interval {interval:g} s is below {MIN_REAL_TIME_S:g} s; valid: "
                       f"{REAL_TIME}:<n>s with n >= {MIN_REAL_TIME_S:g}")
    return Trigger(REAL_TIME, interval)


def task_slots(master: str) -> int | None:
    """Task slots of a Spark master: ``local[N]`` N, ``local[*]`` the CPUs, ``local`` 1, ``local-cluster[W,C,M]``
    W x C; ``None`` for a ``spark://`` master (its workers decide)."""
    m = re.match(r"^local(?:\[(\d+|\*)(?:,\d+)?\])?$", master)
    if m:
        n = m.group(1)
        return 1 if n is None else (os.cpu_count() or 1) if n == "*" else int(n)
    m = re.match(r"^local-cluster\[(\d+),(\d+),\d+\]$", master)
    return int(m.group(1)) * int(m.group(2)) if m else None


def slots_needed(partitions: int, query: str = "passthrough") -> int:
    """Task slots a real-time batch holds at once: one per partition, and for a stateful query one per shuffle
    partition beside them (measured, module docstring); two at least."""
    return max(2, partitions + (SHUFFLE_PARTITIONS if query != "passthrough" else 0))


def real_time_master(partitions: int, query: str = "passthrough") -> str:
    """The master a real-time run gets when none is asked for: :func:`slots_needed` slots."""
    return f"local[{slots_needed(partitions, query)}]"


def has_trigger(spec) -> bool:
    """Whether a pipeline takes ``--trigger`` (its registry entry ``spec`` lists the option)."""
    return spec is not None and "trigger" in spec.options


def check(cfg, spec, pipelines) -> None:
    """Raise :class:`LabError` naming what a run's ``--trigger`` (and a structured Kafka sink) cannot do.

    ``spec`` is the run's registry entry, ``pipelines`` the registry (for the pipelines that take one)."""
    trigger = parse_trigger(cfg.spark.trigger)
    if not has_trigger(spec):
        if trigger.mode != MICRO_BATCH:
            raise LabError(f"--trigger {cfg.spark.trigger} applies to pipeline "
                           f"{', '.join(p for p, s in pipelines.items() if has_trigger(s))}; this run's pipeline is "
                           f"{cfg.pipeline!r}")
        return
    if trigger.real_time:
        if cfg.sink != "topic":
            raise LabError(f"real-time mode writes Spark's Kafka sink, not foreachBatch: use --sink topic with "
                           f"--trigger {cfg.spark.trigger} (this run: --sink {cfg.sink})")
        if cfg.query not in REAL_TIME_QUERIES:
            raise LabError(f"--trigger {cfg.spark.trigger} runs --query {', '.join(REAL_TIME_QUERIES)} in the lab, "
                           f"not {cfg.query!r}")
        if cfg.query != "passthrough" and cfg.spark.state_store != "rocksdb":
            raise LabError(f"real-time mode keeps a query's state in the rocksdb state store, not "
                           f"{cfg.spark.state_store!r}: leave --state-store out or give rocksdb")
        slots, needed = task_slots(cfg.spark.spark_master), slots_needed(cfg.partitions, cfg.query)
        if slots is not None and slots < needed:
            shuffle = f" and {SHUFFLE_PARTITIONS} for the query's shuffle" if cfg.query != "passthrough" else ""
            master = real_time_master(cfg.partitions, cfg.query)
            fits = slots - (needed - cfg.partitions)  # the partitions this master's slots leave room for
            fewer = f"--partitions {fits} or fewer, or " if fits >= 1 else ""
            raise LabError(f"real-time mode runs every task of a batch at once: --partitions {cfg.partitions}"
                           f"{shuffle} needs {needed} task slots, Spark master {cfg.spark.spark_master} has {slots}; "
                           f"valid: {fewer}LAB_SPARK_MASTER={master}")
    if cfg.sink == "topic":
        if cfg.spark.kafka_reader == "labkafka":
            raise LabError("the structured pipeline's Kafka sink reads with Spark's Kafka connector: it needs "
                           "--kafka-reader auto or spark")
        if cfg.producer.transactional:
            raise LabError("the structured pipeline's Kafka sink copies records as they are: use it with "
                           "--transactional off")
        for fault in cfg.fault_plan:
            if fault.kind not in TOPIC_SINK_FAULTS or fault.point or fault.batch is not None:
                raise LabError(f"fault {fault.to_text()!r}: Spark's Kafka sink has no foreachBatch, so no named "
                               f"point and no batch trigger; valid: {', '.join(TOPIC_SINK_FAULTS)} with at=<n>s "
                               "(or, for a driver crash or pause, output=<n>)")
