"""The run's timeline (``events.jsonl``) and the pipeline's progress (``progress.json``).

Several processes append to the timeline at once (supervisor, producer,
pipeline driver); each line is written with one ``O_APPEND`` write, which
Linux keeps whole for lines of this size, so lines never interleave.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

EVENTS_FILE = "events.jsonl"
PROGRESS_FILE = "progress.json"

# -- event types ----------------------------------------------------------------
# Every ``type`` a line of ``events.jsonl`` can have, defined here once: writers and
# readers both use these names, so a renamed event cannot leave a reader behind.

# supervisor: the run's life
RUN_START = "run-start"                  #: topic created, producer about to start
#: (a matrix row started ahead) its turn came after ``waited_s``, its first driver starting
RUN_HELD = "run-held"
RUN_END = "run-end"                      #: driver stopped; the audit follows
RUN_ERROR = "run-error"                  #: the run failed; ``error`` says why
DRAINED = "drained"                      #: every acknowledged offset passed (see ``docs/architecture.md``)
DEADLINE = "deadline"                    #: the run stopped undrained: no progress for ``LAB_DEADLINE`` s
#: the run stopped undrained: all events passed, a planned fault ``waiting`` for a batch that never started
NO_MORE_BATCHES = "no-more-batches"
FINAL_STOP = "final-stop"                #: how the last driver ended: ``how`` = graceful, killed-after-timeout, gone
# supervisor: the driver process
#: a driver process (``attempt``) was started, ``pid`` (``started_ahead_s``: a standby had its turn)
DRIVER_START = "driver-start"
STANDBY_START = "standby-start"          #: the next attempt's driver (``attempt``, ``pid``) was started ahead
DRIVER_EXIT = "driver-exit"              #: a driver exited on its own, ``code``, ``last_log_line``
#: the run's broker's finalized features at the run's start (``finalized``: ``{name: level}``, e.g.
#: ``eligible.leader.replicas.version``, ``transaction.version``; ``{}`` when the broker reports none) and ``elr_set``
#: (``--elr``)
BROKER_FEATURES = "broker-features"
#: (--on-pause replace) the paused driver (``pid``, ``attempt``) was set aside after ``stopped_s``
#: (lab.faults.catalogue.PAUSE_REPLACE_AFTER_S); its replacement starts next
DRIVER_REPLACED = "driver-replaced"
#: a paused driver got SIGCONT: ``pid``, ``attempt``, ``zombie`` (it had been replaced), ``alive`` (false: it had died,
#: e.g. a driver-crash during the pause), ``at_run_end`` (the run ended first)
DRIVER_RESUME = "driver-resume"
#: a replaced driver is gone: ``how`` (``exited`` on its own, with ``code``; or ``killed`` after
#: lab.faults.catalogue.ZOMBIE_LIFETIME_S), ``pid``, ``attempt``, ``last_log_line``
ZOMBIE_END = "zombie-end"
#: (kafka-eos) the driver's transactional producer was fenced by a newer one with its id: ``batch``, ``attempt``,
#: ``error``
PRODUCER_FENCED = "producer-fenced"
DRIVER_CHILD_GROUP = "driver-child-group"  #: a process group a driver's descendant started (PySpark's daemon), ``pid``
# supervisor and driver: faults
FAULT = "fault"                          #: a fault was carried out (``kind``, ``index``, ``by``)
#: the driver reached a named point where a fault is planned and waits: for its kill (a crash), or for the supervisor's
#: ``fault`` event (a proxy fault)
FAULT_POINT = "fault-point"
FAULT_DEFERRED = "fault-deferred"        #: a fault was due while no driver ran; it waits for the next one
FAULT_NOT_APPLIED = "fault-not-applied"  #: a fault could not be carried out; ``reason`` says why
EXECUTOR_TARGET = "executor-target"      #: the executor a batch's tasks run on (what executor-crash kills)
EXECUTOR_CRASH_NOT_SEEN = "executor-crash-not-seen"  #: tasks finished before the planned executor kill
# producer
PRODUCER_START = "producer-start"
PRODUCER_DONE = "producer-done"
PRODUCER_ERROR = "producer-error"
#: the producer aborted a transaction (txn-abort): ``sends``, ``first_seq``, ``last_seq``
TXN_ABORTED = "txn-aborted"
#: (supervisor) the broker JVM restarted on its data after a broker-crash: ``pid``
BROKER_RESTART = "broker-restart"
#: (supervisor) a cluster's broker restarted on its data after a leader-crash: ``node``, ``pid``
NODE_RESTART = "node-restart"
#: (supervisor, cluster) a partition's ``leader``, ``isr``, ``replicas`` or ``epoch`` changed
PARTITION_STATE = "partition-state"
# driver: its life and its batches
#: faults may target this driver (its module is imported; a standby's: its turn came)
DRIVER_READY = "driver-ready"
DRIVER_STOP = "driver-stop"              #: the driver returned after a clean stop
DRIVER_CONFIG_ERROR = "driver-config-error"  #: a setting only the driver can check is unusable; no restart
#: the driver JVM's class archive was built now (``seconds``) or could not be (``error``)
CLASS_ARCHIVE = "class-archive"
#: a driver's start-up reached ``phase`` (jvm, session, workers, query, standby, turn)
DRIVER_PHASE = "driver-phase"
#: the driver's Spark UI (``LAB_SPARK_UI``): ``url`` on 127.0.0.1, ``attempt``, ``pid``, ``tab``; written once it is the
#: run's driver
SPARK_UI = "spark-ui"
#: a driver's Python-worker warm-up failed (``error``); the first batch starts them
WARM_UP_ERROR = "warm-up-error"
KAFKA_READER = "kafka-reader"            #: which Kafka reader the structured or direct driver chose
KAFKA_CONNECTOR_MISSING = "kafka-connector-missing"  #: (supervisor) Spark's connector could not be fetched: ``error``
BATCH_SUBMITTED = "batch-submitted"      #: (receiver) Spark submitted a batch's job
BATCH_START = "batch-start"              #: a batch begins: ``batch``, ``ranges``, ``rows``
BATCH_DONE = "batch-done"                #: a batch's output returned: ``batch``, ``rows``
BATCH_ERROR = "batch-error"              #: a batch failed inside the driver
BATCH_LOST = "batch-lost"                #: (receiver) a batch whose blocks were gone after recovery
OFFSETS_DISAGREE = "offsets-disagree"    #: (direct) the offset stores named different positions at start
QUERY_STOP_ERROR = "query-stop-error"    #: (structured) stopping the query raised
#: (structured, Kafka sink) a killed driver's half-written log files removed
CHECKPOINT_TEMP_REMOVED = "checkpoint-temp-removed"
#: (structured, stateful query) a batch's state: rows, bytes, rows dropped by the watermark
STATE_PROGRESS = "state-progress"
#: (kafka-eos --trust-commit) kafka-python committed batch ``batch`` although ``failed_sends`` of its ``sends`` had
#: failed (``error``, the first)
COMMITTED_WITH_FAILED_SENDS = "committed-with-failed-sends"
#: (kafka-eos) the transactional producer initialised: ``transactional_id``, ``client`` (library and version),
#: ``producer_id``, ``epoch``, ``took_s``, ``same_id_as_attempt``
EOS_INIT = "eos-init"
#: (kafka-eos key-count; samza, per task) the new store restored from the changelog: ``attempt``, ``records``, ``keys``,
#: ``bytes``, ``took_s``, ``topic`` (samza: ``task``, ``partition``, ``counted``; ``records``, ``bytes`` null)
CHANGELOG_RESTORE = "changelog-restore"
#: (flink) a job is being started: ``attempt``, ``restore`` (checkpoint path or null), ``restore_checkpoint``,
#: ``out_end_offsets`` (what earlier attempts left in the output topic), ``checkpointing``, ``delivery``
FLINK_START = "flink-start"
#: (flink) the job runs: ``job_id``, ``rest`` (its REST API on 127.0.0.1), ``took_s`` since its start
FLINK_JOB = "flink-job"
#: (flink) the offsets the job's Kafka source started from (``offsets``, per partition), from its log
FLINK_SOURCE = "flink-source"
#: (flink) a checkpoint ended: ``checkpoint``, ``status``, sizes, ``persisted_data`` (in-flight records of an unaligned
#: one), ``duration_ms``
FLINK_CHECKPOINT = "flink-checkpoint"
#: (storm) the supervisor started the run's ZooKeeper: ``host``, ``port``, ``pid``, ``data_dir``
ZOOKEEPER = "zookeeper-start"
#: (storm) the topology is submitted to its LocalCluster: ``storm_mode``, ``spout``, ``took_s`` since the driver started
#: its JVM, ``attempt``
STORM_TOPOLOGY = "storm-topology"
#: (storm, acked and unacked) the sink bolt answered a batch's tuples: ``batch``, ``acked``, ``failed`` (a
#: ``bolt-fail``), ``attempt``
STORM_ACK = "storm-ack"
STORM_COMMIT = "storm-commit"            #: (storm, trident) Trident committed a transaction: ``txid``, ``attempt``
#: (storm, trident) the newest txid had no offsets stored for a partition (its attempt was killed while Trident stored
#: them): an empty batch was stored for it, so its replay takes nothing there and the next txid starts at
#: ``resumes_at``: ``txid``, ``partition`` (Trident's id), ``resumes_at``, ``attempt``
STORM_REPLAY_GAP = "storm-replay-gap"
#: (storm, trident) a replayed txid's first poll of a partition came back without all of its batch, so the lab's
#: spout polled again until it had emitted the batch's last offset: ``txid``, ``partition`` (Trident's id),
#: ``polls``, ``offsets`` (the batch's first and last), ``attempt``
STORM_REPLAY_REPOLL = "storm-replay-repoll"
# driver: the receiver pipeline's feeder and receiver
#: (share) a share consumer subscribed: ``consumer`` (its index), ``pid``, ``attempt`` (its driver's)
CONSUMER_START = "consumer-start"
#: (share) a share consumer ended: ``consumer``, ``pid``, ``code`` (-9: SIGKILL), ``restart_in_s``
CONSUMER_EXIT = "consumer-exit"
#: (share) a consumer claimed a consumer-crash fault (``index``) and SIGKILLs itself holding ``held`` (``[partition,
#: offset, delivery count]``, acquired, none written)
CONSUMER_KILLED = "consumer-killed"
#: (share) a poison@key=K record killed its consumer: ``partition``, ``offset``, ``delivery_count``, ``seq``, ``key``
POISON_KILLED = "poison-killed"
#: (share) the broker refused a consumer's acknowledgements: ``partitions`` (``{partition: error}``; an ended lock: the
#: records went to others)
ACK_REFUSED = "ack-refused"
#: (share, ``--dlq on``) the broker moved a record to the group's dead-letter topic: ``partition``, ``offset`` (where
#: it was), ``delivery_count``, ``dlq_offset``, ``message`` (the broker's reason)
DEAD_LETTERED = "moved-to-dlq"
SHARE_GROUP = "share-group"              #: (share) the run's share group was set: ``group``, ``configs``, ``consumers``
RECEIVER_STARTED = "receiver-started"
RECEIVER_CONTEXT = "receiver-context"
RECEIVER_CONNECT = "receiver-connect"
RECEIVER_DISCONNECT = "receiver-disconnect"
RECEIVER_FEED = "receiver-feed"
RECEIVER_ERROR = "receiver-error"
RECEIVER_FEEDER_ERROR = "receiver-feeder-error"
RECEIVER_LISTENER_ERROR = "receiver-listener-error"
RECEIVER_HOLD_TIMEOUT = "receiver-hold-timeout"
RECEIVER_COUNT_MISMATCH = "receiver-count-mismatch"
#: (receiver) a clean stop: ``quick`` (its batches done first) or not (Spark's graceful stop), ``stop_s``
RECEIVER_STOP = "receiver-stop"
RECEIVER_BROKER_OK = "receiver-broker-ok"
RECEIVER_BROKER_ERROR = "receiver-broker-error"


class EventLog:
    """Append-only writer for one run's ``events.jsonl``.

    Parameters
    ----------
    run_dir : Path
    source : str
        Who writes: ``supervisor``, ``producer``, ``driver``, ``ui``.
    """

    def __init__(self, run_dir: Path | str, source: str) -> None:
        self.path = Path(run_dir) / EVENTS_FILE
        self.source = source

    def write(self, type_: str, **fields) -> dict:
        """Append one event and return it. ``t`` is wall-clock seconds."""
        event = {"t": round(time.time(), 6), "type": type_, "source": self.source, **fields}
        line = (json.dumps(event, default=str) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return event


class EventTail:
    """Reads events appended since the last call (the supervisor polls this)."""

    def __init__(self, run_dir: Path | str) -> None:
        self.path = Path(run_dir) / EVENTS_FILE
        self.pos = 0
        self._partial = b""

    def read_new(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return []
        self.pos += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return [json.loads(l) for l in lines if l.strip()]


def read_events(run_dir: Path | str) -> list[dict]:
    """All events of a run, in file order."""
    return EventTail(run_dir).read_new()


def attempt_progress_file(attempt: int) -> str:
    """The copy of ``progress.json`` that driver attempt ``attempt`` alone writes."""
    return f"progress-{attempt}.json"


def write_progress(run_dir: Path | str, positions: dict[int, int], batch: int, attempt: int | None = None,
                   **extra) -> None:
    """Record how far the pipeline has durably processed the topic.

    ``positions`` maps partition to the next offset the pipeline will read
    after a restart. Written atomically (rename) so readers never see half a file.
    A driver names its ``attempt``: the record then also goes to that attempt's own file
    (:func:`attempt_progress_file`), which a zombie's later write of ``progress.json`` cannot hide.
    """
    record = json.dumps({"t": time.time(), "batch": batch, "positions": {str(k): v for k, v in positions.items()},
                         **({} if attempt is None else {"attempt": attempt}), **extra})
    names = [PROGRESS_FILE] if attempt is None else [attempt_progress_file(attempt), PROGRESS_FILE]
    for name in names:
        path = Path(run_dir) / name
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(record)
        os.replace(tmp, path)


def read_progress(run_dir: Path | str, attempt: int | None = None) -> dict:
    """The last progress record: ``{"batch": n, "positions": {partition: offset}}`` (empty when none).

    With ``attempt``: the last one that driver attempt wrote.
    """
    name = PROGRESS_FILE if attempt is None else attempt_progress_file(attempt)
    try:
        data = json.loads((Path(run_dir) / name).read_text())
    except (OSError, ValueError):
        return {"batch": -1, "positions": {}}
    data["positions"] = {int(k): int(v) for k, v in data.get("positions", {}).items()}
    return data


def progress_not_from(run_dir: Path | str, set_aside: set[int], last_attempt: int) -> dict:
    """``progress.json``, unless an attempt in ``set_aside`` (a zombie) wrote it last: then the newest record a
    driver attempt not set aside wrote, from the attempts' own files.

    A zombie waking just after its replacement's last write would otherwise hide that write for good,
    and a drained run would wait for progress that never comes.
    """
    progress = read_progress(run_dir)
    if progress.get("attempt") not in set_aside:
        return progress
    own = [read_progress(run_dir, attempt) for attempt in range(1, last_attempt + 1) if attempt not in set_aside]
    return max(own, key=lambda p: p.get("t", 0.0), default={"batch": -1, "positions": {}})
