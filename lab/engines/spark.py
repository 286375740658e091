"""Apache Spark's pipelines (structured, direct, receiver): their options group, checks, preparation and executors.

Every Spark setting that changes delivery is here: the master, the Kafka reader, where the direct approach keeps
its offsets, the receiver's write-ahead log, acknowledgements and block replication, the structured pipeline's
trigger, and the state store provider.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from lab import events as ev
from lab.engines.hooks import Engine
from lab.errors import LabError, choices_error
from lab.host.env import one_of
from lab.spark import trigger as spark_trigger

#: ``LAB_SPARK_UI``'s values.
SPARK_UI = {"0": False, "off": False, "1": True, "on": True}
ON_OFF = ("on", "off")
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
#: Spark's state store providers (``--state-store``).
STATE_STORES = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
#: Spark's master forms. A count of 0 threads, workers or cores is refused here: Spark refuses it only once the
#: driver runs ("Asked to run locally with 0 threads"), and the run restarted that driver three times, 17 s in all.
_MASTER = re.compile(r"^(local(\[([1-9]\d*|\*)\])?|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]|spark://[\w.\-]+:\d+(,[\w.\-]+:\d+)*)$")


@dataclass(frozen=True)
class SparkOptions:
    """Spark's settings that change semantics (every run has them; only Spark's pipelines change them)."""

    spark_master: str = "local[2]"
    spark_ui: bool = False
    kafka_reader: str = "auto"
    offsets: str = "checkpoint"
    wal: str = "on"
    ack: str = "stored"
    replication: int = 1
    trigger: str = spark_trigger.MICRO_BATCH
    state_store: str = "hdfs"


def environment() -> dict:
    """``LAB_SPARK_MASTER``, ``LAB_SPARK_UI`` and ``LAB_KAFKA_READER`` (:mod:`lab.config`'s list)."""
    return dict(spark_master=os.environ.get("LAB_SPARK_MASTER") or "local[2]",
                spark_ui=SPARK_UI[one_of(os.environ, "LAB_SPARK_UI", "0", SPARK_UI)],
                kafka_reader=one_of(os.environ, "LAB_KAFKA_READER", "auto", KAFKA_READERS))


def may_use_connector(cfg, spec) -> bool:
    """The driver may read Kafka with Spark's connector: a pipeline with ``--kafka-reader``, reader not labkafka."""
    return "kafka_reader" in spec.options and cfg.spark.kafka_reader != "labkafka"


def check(cfg, spec, pipelines) -> None:
    s = cfg.spark
    if s.offsets not in OFFSET_STORES:
        raise choices_error("offset store", s.offsets, OFFSET_STORES)
    if s.offsets == "sink" and cfg.sink != "transactional":
        raise LabError("--offsets sink stores offsets in the sink's transaction: it needs --sink transactional, not "
                       f"{cfg.sink!r}")
    if s.kafka_reader not in KAFKA_READERS:
        raise choices_error("Kafka reader", s.kafka_reader, KAFKA_READERS)
    if s.wal not in ON_OFF:
        raise choices_error("wal setting", s.wal, ON_OFF)
    if s.ack not in RECEIVER_ACKS:
        raise choices_error("receiver ack mode", s.ack, RECEIVER_ACKS)
    # Before the query's check: a real-time run's refusal names the trigger, not the sink it implies.
    spark_trigger.check(cfg, spec, pipelines)
    if s.state_store not in STATE_STORES:
        raise choices_error("state store", s.state_store, STATE_STORES)
    if cfg.query == "session-count" and cfg.query in spec.stateful_queries:
        check_state_store(cfg)
    if s.replication not in (1, 2):
        raise LabError(f"replication must be 1 or 2, got {s.replication}")
    if not isinstance(s.spark_ui, bool):
        raise choices_error("spark_ui setting", s.spark_ui, ("True", "False"))
    if s.spark_ui and spec.engine != ENGINE.name:
        raise LabError(f"--spark-ui (spark_ui=True) is the Spark driver's web UI; pipeline {cfg.pipeline!r} "
                       "runs no Spark; valid pipelines: "
                       f"{', '.join(p for p, x in pipelines.items() if x.engine == ENGINE.name)}")
    if not _MASTER.match(s.spark_master):
        raise LabError(
            f"bad Spark master {s.spark_master!r}; valid forms: local, local[N] or local[*] (N >= 1), "
            f"local-cluster[W,C,M] (each >= 1), spark://host:port"
        )


def check_state_store(cfg) -> None:
    """The session-count query keeps its state in RocksDB (Spark: transformWithState "is only supported with
    RocksDBStateStoreProvider")."""
    if cfg.spark.state_store != "rocksdb":
        raise LabError(f"--query session-count keeps its state in the rocksdb state store, not "
                       f"{cfg.spark.state_store!r}: leave --state-store out or give rocksdb")


def defaults(base: dict, params: dict, spec) -> None:
    if params.get("state_store") is None and base.get("query") == "session-count":
        base["state_store"] = "rocksdb"  # the only provider transformWithState runs on
    trigger = spark_trigger.parse_trigger(base.get("trigger", SparkOptions.trigger))
    base["trigger"] = trigger.to_text()  # config.json states the interval
    if params.get("state_store") is None and trigger.real_time and base.get("query", "passthrough") != "passthrough":
        base["state_store"] = "rocksdb"  # what real-time mode keeps its state in (its offset log's conf, measured)
    has_trigger = spec is not None and "trigger" in spec.options
    if trigger.real_time and params.get("sink") is None and has_trigger:
        base["sink"] = "topic"  # the only sink the lab's real-time runs write
    if (trigger.real_time and has_trigger and not params.get("spark_master")
            and not os.environ.get("LAB_SPARK_MASTER")):
        # A partition's task runs the whole batch: one slot each, and the shuffle's beside (lab.spark.trigger).
        base["spark_master"] = spark_trigger.real_time_master(int(base["partitions"]), base.get("query", "passthrough"))


def resolve(cfg, spec, params) -> dict:
    if cfg.spark.spark_ui and params.get("spark_ui") is None and spec.engine != ENGINE.name:
        return {"spark_ui": False}  # LAB_SPARK_UI is for a session's Spark runs; this one has none
    return {}


def stated(cfg, spec) -> dict:
    return {"spark_master": cfg.spark.spark_master if spec.engine == ENGINE.name else None}


def _needs_executors(cfg) -> str | None:
    if cfg.spark.spark_master.startswith(("local-cluster", "spark://")):
        return None
    return (f"executor-crash needs executors in their own JVMs; master {cfg.spark.spark_master!r} has none. "
            "Valid masters for it: local-cluster[W,C,M], spark://host:port")


def _needs_wal_and_stored_acks(cfg) -> str | None:
    if cfg.spark.wal == "on" and cfg.spark.ack == "stored":
        return None
    return (f"point after-wal-before-ack exists only with --wal on --ack stored "
            f"(this run: --wal {cfg.spark.wal} --ack {cfg.spark.ack})")


def check_reachable(cfg) -> None:
    if cfg.spark.spark_master.startswith("spark://"):
        from lab.spark import cluster

        cluster.check_master(cfg.spark.spark_master)


def prepare(cfg, spec, write_event) -> None:
    """What a Spark run makes ready once, before its first driver starts: drivers never download or build.

    Spark's Kafka connector when the driver may read with it
    (:func:`lab.spark.session.ensure_connector`; a fetch that fails is ``kafka-connector-missing``
    with ``--kafka-reader auto``), and the driver JVM's class archive
    (:func:`lab.spark.archive.ensure`, about 40 s once per installed versions; ``class-archive`` records a
    build and its outcome). A restarted driver then starts as fast as the first.

    Raises
    ------
    LabError
        With ``--kafka-reader spark`` and a connector that cannot be fetched.
    """
    # Imported here: every driver and Python worker daemon imports the registry, and these bring the JVM's tools.
    from lab.host.start_tuning import StartTuning
    from lab.spark import archive as class_archive
    from lab.spark.session import ensure_connector

    if may_use_connector(cfg, spec):
        missing = ensure_connector(required=cfg.spark.kafka_reader == "spark")
        if missing:
            write_event(ev.KAFKA_CONNECTOR_MISSING, error=missing)
    if StartTuning.from_env().class_archive:
        archive = class_archive.ensure(progress=lambda line: write_event(ev.CLASS_ARCHIVE, status="building",
                                                                         detail=line))
        if archive.built or archive.error:
            write_event(ev.CLASS_ARCHIVE, status="built" if archive.built else "failed", path=str(archive.path),
                        seconds=archive.seconds, error=archive.error)


def kill_executor(driver_pid, cfg, targets, run_dir):
    from lab.spark.executors import kill_executor as kill

    return kill(driver_pid, cfg.spark.spark_master, cfg.runs_dir, targets, run_dir)


ENGINE = Engine(name="spark", words="Apache Spark", options=SparkOptions, check=check, environment=environment,
                defaults=defaults,
                resolve=resolve, stated=stated,
                requirements={"executor-crash": _needs_executors, "after-wal-before-ack": _needs_wal_and_stored_acks},
                check_reachable=check_reachable, prepare=prepare, kill_executor=kill_executor)
