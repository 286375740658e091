"""What each pipeline is: its driver module, its engine, its semantic options, what its queries count, its label.

The one place that knows what a pipeline can do: code elsewhere asks a :class:`PipelineSpec`
(its engine, its options, whether it counts per key or watermarks), never a pipeline's name.

Each entry lists the faults and named points it accepts (what each one is, is the fault catalogue's,
:mod:`lab.faults.catalogue`), the sinks it writes and the queries it runs. What an engine adds (its options
group, checks, preparation, services) is :mod:`lab.engines`'. Kept free of PySpark and kafka-python imports so
configuration can be validated instantly, before any JVM starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lab.faults.catalogue import faults_in_order, points_in_order
from lab.kafka.transactions import transactional_id

#: The batch interval when none is given, for every pipeline but flink. Spark's pipelines cap a batch's
#: records (``max_batch_records``), so the interval sets how fast a backlog drains: with batches of 500 once a
#: second, a run at 500 events/s never catches up on what a restart left (measured, the 3,000-event structured
#: crash scenario: 20.6-21.2 s, against 17.4-18.6 s with 0.5 s; the default grid has run at 0.5 s since it
#: was measured with every classification unchanged).
DEFAULT_BATCH_INTERVAL_S = 0.5
#: flink's ``batch_interval_s`` is its checkpoint interval (its :attr:`PipelineSpec.default_interval_s`), which its
#: notebook and tests time their crashes by.
FLINK_CHECKPOINT_INTERVAL_S = 1.0

#: What runs a pipeline, as a reader names it.
ENGINES = {"spark": "Apache Spark", "flink": "Apache Flink", "storm": "Apache Storm", "samza": "Apache Samza",
           "kafka": "Kafka (no engine)"}

# -- the deployment's words in the semantics grid and the matrix (lab.matrix.semantics.deployment) -------------

_SINK_WORDS = {"append": "append sink", "idempotent": "idempotent sink", "transactional": "transactional sink",
               "files": "file sink", "topic": "output topic"}
_COMMIT_WORDS = {"after-output": "commit after output", "before-output": "commit before output"}
_OFFSET_WORDS = {"checkpoint": "offsets in checkpoint", "kafka": "offsets in Kafka"}


def present(value) -> bool:
    """Whether a setting was recorded (not None, NaN or empty: a results table's missing cell)."""
    return value is not None and not (isinstance(value, float) and value != value) and value != ""


def sink_words(sink) -> str:
    """A sink mode in a row label, e.g. ``"append sink"``."""
    return _SINK_WORDS.get(sink, f"{sink} sink") if present(sink) else "sink unknown"


def _receiver_label(sink, s: dict, query: str) -> str:
    parts = [f"receiver{query}"]
    if present(s.get("ack")):
        parts.append("reliable ack" if s["ack"] == "stored" else "unreliable ack")
    if present(s.get("wal")):
        parts.append("WAL" if s["wal"] == "on" else "no WAL")
    if present(s.get("replication")) and int(s["replication"]) > 1:
        parts.append(f"replication {int(s['replication'])}")
    if present(sink) and sink != "append":
        parts.append(sink_words(sink))
    return ", ".join(parts)


def _direct_label(sink, s: dict, query: str) -> str:
    if s.get("offsets") == "sink":  # the offsets commit in the rows' transaction: the sink is implied
        return "direct, offsets in the sink's transaction" + ("" if sink == "transactional"
                                                              else f", {sink_words(sink)}")
    where = _OFFSET_WORDS.get(s.get("offsets"))
    return ", ".join(["direct", *([where] if where else []), sink_words(sink)])


def _structured_label(sink, s: dict, query: str) -> str:
    trigger = s.get("trigger")
    mode = ([f"real-time {trigger.split(':', 1)[1]}"] if present(trigger) and str(trigger).startswith("real-time:")
            else [])
    return ", ".join([f"structured{query}", *mode, sink_words(sink)])


def _kafka_eos_label(sink, s: dict, query: str) -> str:
    return (f"kafka-eos{query}, offsets in the producer's transaction"
            + ("" if sink in ("topic", None) else f", {sink_words(sink)}")
            + (", Kafka's Java producer" if s.get("txn_client") == "java" else "")
            + (", commit trusted without checking its sends" if s.get("trust_commit") is True else ""))


def _flink_label(sink, s: dict, query: str) -> str:
    parts = [f"flink, {s['checkpointing']} barriers" if present(s.get("checkpointing")) else "flink"]
    if present(s.get("flink_delivery")):
        parts.append(f"{s['flink_delivery']} KafkaSink")
    if s.get("slow_sink") is True:
        parts.append("back-pressured")
    return ", ".join(parts)


def _storm_label(sink, s: dict, query: str) -> str:
    mode = s.get("storm_mode") if present(s.get("storm_mode")) else None
    words = {"unacked": "storm, no acker", "acked": "storm, acked tuple trees", "trident": "storm, Trident"}
    return ", ".join([words.get(mode, "storm"), sink_words(sink)])


def _samza_label(sink, s: dict, query: str) -> str:
    cache = ", store cache on" if s.get("samza_store_cache") == "on" else ""
    return f"samza{query}, RocksDB store and changelog{cache}, output topic"


def _plain_label(sink, s: dict, query: str) -> str:
    commit = _COMMIT_WORDS.get(s.get("commit"))
    return ", ".join(["plain consumer", *([commit] if commit else []), sink_words(sink)])


def _share_label(sink, s: dict, query: str) -> str:
    n = s.get("consumers")
    ack = {"after-output": "ack after output", "before-output": "ack before output",
           "auto": "implicit ack"}.get(s.get("commit"))
    group = f"share group, {int(n)} consumers" if present(n) else "share group"
    dlq = ["dead-letter topic"] if s.get("dlq") == "on" else []
    return ", ".join([group, *([ack] if ack else []), *dlq, sink_words(sink)])


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
    engine : str
        What runs the pipeline: ``spark``, ``flink`` or ``kafka`` (no engine: a Kafka client); :data:`ENGINES`.
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
    running_counts : bool
        Its stateful query is a running count per key, with no window and no watermark (receiver, kafka-eos).
    watermarks : bool
        Its stateful queries drop events behind a watermark, as Spark decides from its own checkpoint (structured).
    label : callable
        ``label(sink, settings, query_words)``: the deployment's words in the semantics grid and the matrix.
    label_on_cluster : bool
        Whether a row on the three-broker cluster names the pipeline after the cluster's settings.
    queries : tuple of str or None
        The only ``--query`` values it runs, the first its default (``None``: those whose pipelines include it).
    share_group : bool
        Its consumers are one Kafka share group (KIP-932): its positions are the group's start offsets, and its
        audit has delivery counts and events archived after the delivery limit (:mod:`lab.audit.deliveries`).
    faults : tuple of str
        The fault kinds it accepts, in catalogue order (:func:`lab.faults.catalogue.faults_in_order`).
    points : tuple of str
        The named points its driver stops at, in catalogue order.
    stateful_queries : tuple of str
        The stateful ``--query`` values it runs (passthrough is every pipeline's unless :attr:`queries` says otherwise).
    topic_sink : str
        ``no``: it writes no output topic; ``only``: its output topic is the only sink it writes (and its default);
        ``optional``: it may write one beside its other sinks (structured: Spark's Kafka sink).
    files_sink : bool
        It can write Spark's file sink (a Spark SQL query).
    transactional_output : bool
        It writes its output topic in Kafka transactions: its exactly-once needs read_committed readers, and a
        broker that honours transactions.
    pause_replace : str or None
        What ``--on-pause`` may do with its paused driver: ``default`` (its drivers keep nothing on local disk, so
        two run at once as two consumers of one group would: replaced unless asked to wait), ``allowed`` (two
        drivers share one checkpoint, as two do when a cluster manager gives up on one), or ``None`` (wait only).
    output_client : callable or None
        ``output_client(run_id)``: the client id prefix of the producer writing its output topic, which the
        leader-unreachable fault cuts off alone.
    ui_tab : tuple of str or None
        ``(tab, what it shows)``: where its batches show in the Spark driver's web UI
        (:func:`lab.spark.session.ui_hint`).
    batches_mark_output : bool
        Whether a ``batch-done`` comes once that batch's output is written, so that none before a crash means
        nothing was written (:mod:`lab.audit.shown`). Not flink: its batches are its checkpoints, and its
        output runs ahead of them. (Structured's real-time mode, whose batch spans its interval, is the trigger's.)
    """

    name: str
    module: str
    summary: str
    engine: str
    label: Callable[[object, dict, str], str]
    options: tuple[str, ...] = ()
    waits_for_turn: bool = False
    ready_when_running: bool = False
    default_interval_s: float = DEFAULT_BATCH_INTERVAL_S
    running_counts: bool = False
    watermarks: bool = False
    label_on_cluster: bool = True
    queries: tuple[str, ...] | None = None
    share_group: bool = False
    batches_mark_output: bool = True
    faults: tuple[str, ...] = faults_in_order()
    points: tuple[str, ...] = ()
    stateful_queries: tuple[str, ...] = ()
    topic_sink: str = "no"
    files_sink: bool = False
    transactional_output: bool = False
    pause_replace: str | None = None
    output_client: Callable[[str], str] | None = None
    ui_tab: tuple[str, str] | None = None

    @property
    def uses_spark(self) -> bool:
        """Whether the driver starts a Spark JVM."""
        return self.engine == "spark"

    @property
    def engine_name(self) -> str:
        """The engine as a reader names it (:data:`ENGINES`)."""
        return ENGINES[self.engine]

    def runs_query(self, query: str) -> bool:
        """Whether it runs ``query`` (its only ones, or passthrough and its stateful ones)."""
        return query in (self.queries if self.queries is not None else ("passthrough", *self.stateful_queries))


PIPELINES: dict[str, PipelineSpec] = {
    "plain": PipelineSpec(
        name="plain",
        module="lab.pipelines.plain",
        summary="no Spark: a kafka-python consumer writing to the sink, offsets committed to the consumer group",
        engine="kafka",
        label=_plain_label,
        label_on_cluster=False,
        options=("commit",),
        points=points_in_order("mid-output", "after-output-before-commit", "after-commit-before-output"),
        pause_replace="default",
    ),
    "share": PipelineSpec(
        name="share",
        module="lab.pipelines.share",
        summary="no Spark: consumers in one Kafka share group (KIP-932), each record acknowledged, delivery counts, "
                "archived after the delivery limit",
        engine="kafka",
        label=_share_label,
        label_on_cluster=False,
        options=("commit", "consumers", "dlq"),
        share_group=True,
        faults=faults_in_order("consumer-crash", "poison"),
        points=points_in_order("mid-output", "after-output-before-commit", "after-commit-before-output"),
        pause_replace="default",
    ),
    "kafka-eos": PipelineSpec(
        name="kafka-eos",
        module="lab.pipelines.kafka_eos",
        summary="no Spark: Kafka's exactly-once consume-transform-produce, output topic and offsets in one "
                "transaction per batch",
        engine="kafka",
        label=_kafka_eos_label,
        running_counts=True,
        faults=faults_in_order("leader-unreachable"),
        points=points_in_order("mid-output", "after-output-before-commit"),
        stateful_queries=("key-count",),
        topic_sink="only",
        transactional_output=True,
        pause_replace="default",
        output_client=transactional_id,
    ),
    "flink": PipelineSpec(
        name="flink",
        module="lab.pipelines.flink",
        summary="Apache Flink (PyFlink, a local mini-cluster): checkpoint barriers, Kafka source and KafkaSink, "
                "restarts from the newest retained checkpoint",
        engine="flink",
        label=_flink_label,
        options=("checkpointing", "flink_delivery", "slow_sink"),
        ready_when_running=True,
        default_interval_s=FLINK_CHECKPOINT_INTERVAL_S,
        batches_mark_output=False,
        points=points_in_order("mid-output"),
        topic_sink="only",
        transactional_output=True,
    ),
    "storm": PipelineSpec(
        name="storm",
        module="lab.pipelines.storm",
        summary="Apache Storm (a LocalCluster): the Kafka spout unacked or with acked tuple trees and replays, "
                "or Trident's transactional batches",
        engine="storm",
        label=_storm_label,
        options=("storm_mode",),
        ready_when_running=True,
        faults=faults_in_order("bolt-fail"),
        points=points_in_order("mid-output", "after-output-before-commit"),
    ),
    "samza": PipelineSpec(
        name="samza",
        module="lab.pipelines.samza",
        summary="Apache Samza (a standalone job): counts per key in a RocksDB store with a Kafka changelog, "
                "the output topic, Kafka checkpoints",
        engine="samza",
        label=_samza_label,
        options=("samza_store_cache",),
        queries=("key-count",),
        ready_when_running=True,
        running_counts=True,
        points=points_in_order("after-output-before-commit"),
        stateful_queries=("key-count",),
        topic_sink="only",
    ),
    "structured": PipelineSpec(
        name="structured",
        module="lab.pipelines.structured.pipeline",
        waits_for_turn=True,
        summary="Spark Structured Streaming: offset and commit logs in the checkpoint, foreachBatch writes inside "
                "tasks",
        engine="spark",
        label=_structured_label,
        watermarks=True,
        options=("kafka_reader", "trigger"),
        faults=faults_in_order("task-failure"),
        points=points_in_order("after-offset-log", "mid-output", "after-output-before-commit"),
        stateful_queries=("window-count", "dedupe", "session-count"),
        topic_sink="optional",
        files_sink=True,
        pause_replace="allowed",
        ui_tab=("Structured Streaming", "the query's input and processing rates and each micro-batch's duration"),
    ),
    "direct": PipelineSpec(
        name="direct",
        module="lab.pipelines.direct",
        waits_for_turn=True,
        summary="Spark direct Kafka approach on RDDs: the driver plans offset ranges per batch, logged in the "
                "checkpoint",
        engine="spark",
        label=_direct_label,
        options=("offsets", "kafka_reader"),
        faults=faults_in_order("executor-crash", "task-failure"),
        points=points_in_order("after-offset-log", "mid-output", "after-output-before-commit"),
        ui_tab=("Jobs", "the ordinary Spark jobs each batch runs (no streaming tab: the driver plans its own batches)"),
    ),
    "receiver": PipelineSpec(
        name="receiver",
        module="lab.pipelines.receiver.pipeline",
        waits_for_turn=True,
        summary="Spark Streaming DStreams: Spark's socket receiver fed by a Kafka consumer, optional write-ahead log, "
                "checkpoint recovery",
        engine="spark",
        label=_receiver_label,
        running_counts=True,
        options=("wal", "ack", "replication"),
        faults=faults_in_order("executor-crash", "receiver-restart"),
        points=points_in_order("mid-output", "after-output-before-commit", "after-wal-before-ack"),
        stateful_queries=("window-count",),
        ui_tab=("Streaming", "the receiver's input rate and each batch's scheduling delay and processing time"),
    ),
}

#: ``--pipeline``'s default: the one with no engine and the fewest parts.
DEFAULT_PIPELINE = "plain"
