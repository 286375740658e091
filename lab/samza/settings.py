"""The ``samza`` pipeline's job configuration (pure: no JVM, no I/O): every setting that decides delivery, stated.

The job (``lab/samza/java``) counts events per key in a RocksDB store whose
changes go to the changelog ``<topic>.changelog``, and writes each event to
``<topic>.out``; Samza checkpoints the input offsets to Kafka every
:data:`COMMIT_MS`. ``--batch-interval`` is the task's window (``task.window.ms``):
how often the job tells the driver which offsets it processed (a lab batch).
"""

from __future__ import annotations

from lab.errors import LabError, choices_error
from lab.sinks.changelog import changelog_topic

#: How often Samza checkpoints (task.commit.ms; 60 s by default): it flushes the producer and the store, then
#: writes the input offsets. A crash replays what was processed since the last checkpoint, so this bounds a
#: crash's duplicates in the output.
COMMIT_MS = 1_000
#: The store's object cache (stores.counts.object.cache.size), by ``--samza-store-cache``: ``on`` is Samza's
#: default (1,000 entries, dirty ones written to the changelog 500 at a time or when the store is flushed), ``off``
#: sends every change to the changelog as it is made. Measured with ``on``: Samza 1.8.0's commit flushes its
#: producers (TaskInstance.commit), then the stores (TaskStorageCommitManager.snapshot), whose cached changes
#: are only sent then, and it reads the changelog's newest offset for the checkpoint while they may still be on
#: their way; a restore trims what came after that offset (transactional state), and the input resumes after the
#: events they counted: 23-28 of 64 keys short by 84-136 after a crash in 6 of 9 runs, exact in 3: a race.
#: With ``off`` the commit's producer flush covers every change: 64 of 64 exact in every run.
STORE_CACHE = {"off": 0, "on": 1_000}
SAMZA_STORE_CACHES = {
    "off": "every store change sent to the changelog as it is made (the commit's producer flush covers them)",
    "on": "Samza's default object cache: changes reach the changelog when the cache flushes, at commit",
}
#: JVM flags of the job (one processor: every task, the store, the consumer and the producer). Measured: about
#: 230 MB resident with a 384 MB heap.
JVM_FLAGS = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
             "-Djava.awt.headless=true", "-XX:+ExitOnOutOfMemoryError")
#: The job's only query: a running count per key in the changelog-backed store.
QUERY = "key-count"


def check(cfg, mine: bool) -> None:
    """Raise :class:`LabError` for a bad Samza setting (``mine``: a samza run; only it may set one)."""
    if cfg.samza.samza_store_cache not in SAMZA_STORE_CACHES:
        raise choices_error("Samza store cache", cfg.samza.samza_store_cache, SAMZA_STORE_CACHES)
    if not mine and cfg.samza.samza_store_cache != "off":
        raise LabError(f"--samza-store-cache is the samza pipeline's setting; this run's pipeline is {cfg.pipeline!r}")


def job_config(cfg, *, run_id: str, attempt: int, bootstrap: str, state_dir: str, output: str) -> dict[str, str]:
    """The job's properties for one driver attempt (``samza/attempt-N.properties``).

    ``state_dir`` is the attempt's own: a restarted driver is a new host whose store starts empty and is
    restored from the changelog, as Samza restores a task moved to another machine.
    """
    replication = str(cfg.cluster.nodes)
    return {
        "job.name": f"lab-{run_id}",
        "job.id": "1",
        # A standalone job without ZooKeeper: one processor (id 0, an integer) owns every partition.
        "job.coordinator.factory": "org.apache.samza.standalone.PassthroughJobCoordinatorFactory",
        "job.coordination.utils.factory": "org.apache.samza.standalone.PassthroughCoordinationUtilsFactory",
        "task.name.grouper.factory": "org.apache.samza.container.grouper.task.SingleContainerGrouperFactory",
        "processor.id": "0",
        "job.default.system": "kafka",
        "job.changelog.system": "kafka",
        "job.logged.store.base.dir": f"{state_dir}/logged",
        "job.non-logged.store.base.dir": f"{state_dir}/non-logged",
        "systems.kafka.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory",
        "systems.kafka.consumer.bootstrap.servers": bootstrap,
        "systems.kafka.producer.bootstrap.servers": bootstrap,
        "systems.kafka.consumer.isolation.level": cfg.isolation_level,
        # With no checkpoint yet, the oldest offset (Samza's default is upcoming: a first start would skip
        # what the producer wrote before the job ran).
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "systems.kafka.consumer.auto.offset.reset": "earliest",
        "systems.kafka.default.stream.replication.factor": replication,
        "systems.kafka.producer.acks": "all",
        "systems.kafka.producer.max.in.flight.requests.per.connection": "1",
        "task.checkpoint.factory": "org.apache.samza.checkpoint.kafka.KafkaCheckpointManagerFactory",
        "task.checkpoint.system": "kafka",
        "task.checkpoint.replication.factor": replication,
        "task.commit.ms": str(COMMIT_MS),
        "task.window.ms": str(max(1, round(cfg.batch_interval_s * 1000))),
        # Samza 1.8's transactional state (its default, stated): a restore reads the changelog only up to the
        # offsets of the last checkpoint, so the store matches the input offsets it resumes from.
        "task.transactional.state.checkpoint.enabled": "true",
        "task.transactional.state.restore.enabled": "true",
        "serializers.registry.string.class": "org.apache.samza.serializers.StringSerdeFactory",
        "stores.counts.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "string",
        "stores.counts.changelog": f"kafka.{changelog_topic(cfg.topic)}",
        "stores.counts.changelog.replication.factor": replication,
        "stores.counts.object.cache.size": str(STORE_CACHE[cfg.samza.samza_store_cache]),
        "lab.input.topic": cfg.topic,
        "lab.output.topic": output,
        "lab.attempt": str(attempt),
    }


def properties_text(config: dict[str, str]) -> str:
    """``config`` as a Java properties file (its values escaped as ``Properties.load`` reads them)."""
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")

    return "".join(f"{escape(k)}={escape(v)}\n" for k, v in sorted(config.items()))
