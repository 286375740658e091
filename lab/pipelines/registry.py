"""What each pipeline is, and which faults and points it supports.

Kept free of PySpark and kafka-python imports so configuration can be
validated instantly, before any JVM starts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PipelineSpec:
    """Static facts about one pipeline.

    Attributes
    ----------
    name : str
        The ``--pipeline`` value.
    module : str
        Module whose ``main(run_dir)`` runs the driver.
    summary : str
        One line for help texts.
    faults : tuple of str
        Fault kinds that apply to this pipeline.
    points : tuple of str
        Named points the driver stops at.
    uses_spark : bool
        Whether the driver starts a JVM.
    options : tuple of str
        The :class:`lab.config.RunConfig` fields that change this pipeline's
        semantics (listed in its reports' settings).
    """

    name: str
    module: str
    summary: str
    faults: tuple[str, ...]
    points: tuple[str, ...]
    uses_spark: bool
    options: tuple[str, ...] = ()


_COMMON = ("driver-crash", "broker-outage", "ack-loss")

PIPELINES: dict[str, PipelineSpec] = {
    "plain": PipelineSpec(
        name="plain",
        module="lab.pipelines.plain",
        summary="no Spark: a kafka-python consumer writing to the sink, offsets committed to the consumer group",
        faults=_COMMON,
        points=("mid-output", "after-output-before-commit", "after-commit-before-output"),
        uses_spark=False,
        options=("commit",),
    ),
    "structured": PipelineSpec(
        name="structured",
        module="lab.pipelines.structured",
        summary="Spark Structured Streaming: offset and commit logs in the checkpoint, foreachBatch writes inside tasks",
        faults=("driver-crash", "task-failure", "broker-outage", "ack-loss"),
        points=("after-offset-log", "mid-output", "after-output-before-commit"),
        uses_spark=True,
        options=("kafka_reader",),
    ),
    "direct": PipelineSpec(
        name="direct",
        module="lab.pipelines.direct",
        summary="Spark direct Kafka approach on RDDs: the driver plans offset ranges per batch, logged in the checkpoint",
        faults=("driver-crash", "executor-crash", "task-failure", "broker-outage", "ack-loss"),
        points=("after-offset-log", "mid-output", "after-output-before-commit"),
        uses_spark=True,
        options=("offsets",),
    ),
    "receiver": PipelineSpec(
        name="receiver",
        module="lab.pipelines.receiver",
        summary="Spark Streaming DStreams: Spark's socket receiver fed by a Kafka consumer, optional write-ahead log, "
                "checkpoint recovery",
        faults=("driver-crash", "executor-crash", "receiver-restart", "broker-outage", "ack-loss"),
        points=("mid-output", "after-output-before-commit", "after-wal-before-ack"),
        uses_spark=True,
        options=("wal", "ack", "replication"),
    ),
}
