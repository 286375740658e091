"""The ``storm`` pipeline's settings, checked, and the topology spec they give (pure: no JVM, no I/O).

``--storm-mode`` (``RunConfig.storm_mode``)
    ``unacked``: no acker, the Kafka spout commits each poll before it emits
    (``ProcessingGuarantee.AT_MOST_ONCE``); ``acked``: anchored tuples, one acker,
    offsets committed for acked tuples only, failed or timed-out tuples replayed
    (``AT_LEAST_ONCE``); ``trident``: a Trident topology on
    ``KafkaTridentSpoutTransactional`` whose state writes each batch with its
    transaction id (:mod:`lab.pipelines.storm`).
``--batch-interval`` and ``max_batch_records``
    The sink bolt writes a batch once it holds ``max_batch_records`` tuples or its
    first tuple is ``batch_interval_s`` old; Trident emits a batch every
    ``batch_interval_s`` (``topology.trident.batch.emit.interval.millis``), of at most
    ``max_batch_records`` records a partition (the consumer's ``max.poll.records``).
"""

from __future__ import annotations

from lab.errors import LabError, choices_error

STORM_MODES = {
    "unacked": "no acker; the Kafka spout commits each poll before it emits: at-most-once",
    "acked": "anchored tuples and an acker; offsets committed for acked tuples, failed ones replayed: at-least-once",
    "trident": "Trident batches with transaction ids; the state stores each batch's id with its rows: exactly-once "
               "with --sink transactional",
}
#: The sink a mode writes when the run names none: Trident's exactly-once needs the sink to keep each batch's
#: transaction id and skip one it has committed (the database sink's transactional mode).
DEFAULT_SINKS = {"unacked": "append", "acked": "append", "trident": "transactional"}
#: How often the acked spout commits the offsets of acked tuples (KafkaSpoutConfig.offsetCommitPeriodMs, 30 s by
#: default): a crash replays whatever was acked since the last commit, so this bounds a crash's duplicates.
COMMIT_PERIOD_MS = 1_000
#: A tuple tree not completed within this is failed by the acker and replayed (topology.message.timeout.secs).
MESSAGE_TIMEOUT_S = 30
#: Tuples the acked spout keeps in flight (emitted, not acked): KafkaSpoutConfig.maxUncommittedOffsets and
#: topology.max.spout.pending. Above a batch (500) so the sink bolt's batches fill.
MAX_UNCOMMITTED = 2_000
#: How long the Kafka spouts' poll waits for records (KafkaSpoutConfig.pollTimeoutMs; 200 ms by default). Trident
#: re-emits a replayed txid's records with one poll per partition, and whatever that poll returns is the batch: a
#: restarted topology's first poll, 200 ms, returned nothing for a partition, its records were never emitted again,
#: and a crash at mid-output lost 44 and 45 events of 3,000 (measured, storm-kafka-client 2.8.3). A new batch
#: polls every partition at once and returns as soon as any has records, so the longer wait costs only idle time.
POLL_TIMEOUT_MS = {"unacked": 200, "acked": 200, "trident": 2_000}
#: JVM flags of the topology's LocalCluster (Nimbus, a supervisor and one worker, in one process).
JVM_FLAGS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
             "-Djava.awt.headless=true", "-XX:+ExitOnOutOfMemoryError")


def default_sink(storm_mode: str) -> str:
    """The sink mode a run with ``storm_mode`` writes when it names none."""
    return DEFAULT_SINKS.get(storm_mode, "append")


def check(cfg, mine: bool) -> None:
    """Raise :class:`LabError` for a bad Storm setting (``mine``: a storm run; only it may set one)."""
    if cfg.storm.storm_mode not in STORM_MODES:
        raise choices_error("storm mode", cfg.storm.storm_mode, STORM_MODES)
    if not mine:
        if cfg.storm.storm_mode != "acked":
            raise LabError(f"--storm-mode is the storm pipeline's setting; this run's pipeline is {cfg.pipeline!r}")
    # Its sinks are the database's: lab.config refuses `files` and `topic` for it already.


def topology_spec(cfg, *, run_id: str, attempt: int, bootstrap: str, zookeeper: dict, local_dir: str) -> dict:
    """What the topology's ``main`` reads (``storm/attempt-N.json``): every setting that decides delivery."""
    return {
        # Storm refuses a topology name with '/', '.', ':' or a backslash (Nimbus.validateTopologyName).
        "name": "lab-" + run_id.replace(".", "-"),
        "storm_mode": cfg.storm.storm_mode,
        "bootstrap": bootstrap,
        "topic": cfg.topic,
        "group": f"lab-{run_id}",
        "isolation": cfg.isolation_level,
        "max_batch_records": cfg.max_batch_records,
        "batch_interval_ms": max(1, round(cfg.batch_interval_s * 1000)),
        "commit_period_ms": COMMIT_PERIOD_MS,
        "poll_timeout_ms": POLL_TIMEOUT_MS[cfg.storm.storm_mode],
        "max_uncommitted": MAX_UNCOMMITTED,
        "message_timeout_s": MESSAGE_TIMEOUT_S,
        "zookeeper_host": zookeeper["host"],
        "zookeeper_port": zookeeper["port"],
        # Storm's cluster state under a root of this attempt's: a killed attempt's Nimbus holds its leader
        # latch until its ZooKeeper session expires (20 s), and a new LocalCluster under the same root waits
        # for it ("LocalCluster Nimbus failed to gain leadership", measured).
        "cluster_root": f"/storm/{run_id}/attempt-{attempt}",
        # Trident's transaction state (each txid's offsets per partition) under one root for every attempt:
        # a restarted topology resumes the stream where the dead one left it.
        "transactional_root": f"/trident/{run_id}",
        "stream": f"lab-{run_id}",
        "local_dir": local_dir,
    }
