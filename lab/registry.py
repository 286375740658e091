"""What each pipeline is: its driver module, its semantic options, whether it starts a JVM.

Which faults and named points each pipeline supports is the fault catalogue's
business (:mod:`lab.faults`); :attr:`PipelineSpec.faults` and ``points`` read
it. Kept free of PySpark and kafka-python imports so configuration can be
validated instantly, before any JVM starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.faults import faults_for, points_for

#: The batch interval when none is given, for every pipeline but flink. Spark's pipelines cap a batch's
#: records (``max_batch_records``), so the interval sets how fast a backlog drains: with batches of 500 once a
#: second, a run at 500 events/s never catches up on what a restart left (measured, the 3,000-event structured
#: crash scenario: 20.6-21.2 s, against 17.4-18.6 s with 0.5 s; the default grid has run at 0.5 s since it
#: was measured with every classification unchanged).
DEFAULT_BATCH_INTERVAL_S = 0.5
#: flink's ``batch_interval_s`` is its checkpoint interval (its :attr:`PipelineSpec.default_interval_s`), which its notebook and tests time their crashes by.
FLINK_CHECKPOINT_INTERVAL_S = 1.0


@dataclass(frozen=True)
class PipelineSpec:
    """Static facts about one pipeline.

    Attributes
    ----------
    name : str
        The ``--pipeline`` value.
    module : str
        Module whose ``run(ctx)`` the driver process (``python -m lab.pipelines.driver RUN_DIR``) calls.
    summary : str
        One line for help texts.
    uses_spark : bool
        Whether the driver starts a JVM.
    options : tuple of str
        The :class:`lab.config.RunConfig` fields that change this pipeline's
        semantics (listed in its reports' settings).
    waits_for_turn : bool
        Its driver calls ``DriverContext.await_turn``, so it can be started
        ahead as a standby (:mod:`lab.run.driver_process`).
    ready_when_running : bool
        Its driver says ``driver-ready`` itself, once its job runs, and the run's
        producer starts then. Measured for flink: the job runs 4-12 s after its
        driver starts (more on a loaded machine) and its first checkpoint takes up
        to 8 s more; a producer started with the run had sent everything by then,
        leaving no epoch with events in flight for a crash to land in.
    default_interval_s : float
        ``--batch-interval``'s default: :data:`DEFAULT_BATCH_INTERVAL_S`, or flink's checkpoint interval.
    """

    name: str
    module: str
    summary: str
    uses_spark: bool
    options: tuple[str, ...] = ()
    waits_for_turn: bool = False
    ready_when_running: bool = False
    default_interval_s: float = DEFAULT_BATCH_INTERVAL_S

    @property
    def faults(self) -> tuple[str, ...]:
        """Fault kinds that apply to this pipeline (from the catalogue)."""
        return faults_for(self.name)

    @property
    def points(self) -> tuple[str, ...]:
        """Named points the driver stops at (from the catalogue)."""
        return points_for(self.name)


PIPELINES: dict[str, PipelineSpec] = {
    "plain": PipelineSpec(
        name="plain",
        module="lab.pipelines.plain",
        summary="no Spark: a kafka-python consumer writing to the sink, offsets committed to the consumer group",
        uses_spark=False,
        options=("commit",),
    ),
    "kafka-eos": PipelineSpec(
        name="kafka-eos",
        module="lab.pipelines.kafka_eos",
        summary="no Spark: Kafka's exactly-once consume-transform-produce, output topic and offsets in one "
                "transaction per batch",
        uses_spark=False,
    ),
    "flink": PipelineSpec(
        name="flink",
        module="lab.pipelines.flink",
        summary="Apache Flink (PyFlink, a local mini-cluster): checkpoint barriers, Kafka source and KafkaSink, "
                "restarts from the newest retained checkpoint",
        uses_spark=False,
        options=("checkpointing", "flink_delivery", "slow_sink"),
        ready_when_running=True,
        default_interval_s=FLINK_CHECKPOINT_INTERVAL_S,
    ),
    "structured": PipelineSpec(
        name="structured",
        module="lab.pipelines.structured",
        waits_for_turn=True,
        summary="Spark Structured Streaming: offset and commit logs in the checkpoint, foreachBatch writes inside tasks",
        uses_spark=True,
        options=("kafka_reader",),
    ),
    "direct": PipelineSpec(
        name="direct",
        module="lab.pipelines.direct",
        waits_for_turn=True,
        summary="Spark direct Kafka approach on RDDs: the driver plans offset ranges per batch, logged in the checkpoint",
        uses_spark=True,
        options=("offsets", "kafka_reader"),
    ),
    "receiver": PipelineSpec(
        name="receiver",
        module="lab.pipelines.receiver.pipeline",
        waits_for_turn=True,
        summary="Spark Streaming DStreams: Spark's socket receiver fed by a Kafka consumer, optional write-ahead log, "
                "checkpoint recovery",
        uses_spark=True,
        options=("wal", "ack", "replication"),
    ),
}
