"""The ``flink`` pipeline's settings, checked, and the job spec they give (pure: no PyFlink, no I/O).

``--checkpointing`` (``RunConfig.checkpointing``)
    ``aligned``, ``unaligned``, ``at-least-once``: how checkpoint barriers are
    handled at an operator with several inputs (:mod:`lab.flink.job`).
``--flink-delivery`` (``RunConfig.flink_delivery``)
    The ``KafkaSink``'s guarantee: ``exactly-once`` (Kafka transactions committed
    when a checkpoint completes), ``at-least-once`` (flushed at each checkpoint),
    or ``auto``: ``at-least-once`` with ``--checkpointing at-least-once``, else
    ``exactly-once``, so that each checkpointing mode shows its own end-to-end
    guarantee unless the run says otherwise.
``--slow-sink`` (``RunConfig.slow_sink``)
    The ``KafkaSink`` sends one record per request, one request at a time: the
    sink is the bottleneck, back-pressure fills the buffers in front of it, and
    an unaligned checkpoint has in-flight records to store.
``--batch-interval`` (``RunConfig.batch_interval_s``)
    The checkpoint interval: for this pipeline a "batch" is the epoch between two
    completed checkpoints.
"""

from __future__ import annotations

import re
import struct

from lab.errors import LabError, choices_error

CHECKPOINTING = ("aligned", "unaligned", "at-least-once")
FLINK_DELIVERIES = ("auto", "exactly-once", "at-least-once")
#: Sink subtasks, each with an input channel per source subtask (``rebalance()``): with one partition
#: per source subtask, barriers meet at the sink from several channels, so alignment matters.
PARALLELISM = 2
#: Below the broker's transaction.max.timeout.ms (15 min); the connector's own default (1 h) is refused.
TRANSACTION_TIMEOUT_MS = 60_000
#: The shortest checkpoint interval the lab accepts: each checkpoint is a round of REST polling and a
#: Kafka transaction; below this the job spends its time checkpointing.
MIN_INTERVAL_S = 0.2


def delivery(cfg) -> str:
    """The sink's guarantee this run uses (``auto`` resolved, see the module docstring)."""
    if cfg.flink.flink_delivery != "auto":
        return cfg.flink.flink_delivery
    return "at-least-once" if cfg.flink.checkpointing == "at-least-once" else "exactly-once"


def check(cfg, mine: bool) -> None:
    """Raise :class:`LabError` for a bad Flink setting (``mine``: a flink run; the others may not set one)."""
    if cfg.flink.checkpointing not in CHECKPOINTING:
        raise choices_error("checkpointing", cfg.flink.checkpointing, CHECKPOINTING)
    if cfg.flink.flink_delivery not in FLINK_DELIVERIES:
        raise choices_error("Flink sink delivery", cfg.flink.flink_delivery, FLINK_DELIVERIES)
    if not mine:
        if cfg.flink.checkpointing != "aligned" or cfg.flink.flink_delivery != "auto" or cfg.flink.slow_sink:
            raise LabError(f"--checkpointing, --flink-delivery and --slow-sink are the flink pipeline's settings; "
                           f"this run's pipeline is {cfg.pipeline!r}")
        return
    if cfg.batch_interval_s < MIN_INTERVAL_S:
        raise LabError(f"checkpoint interval (--batch-interval) {cfg.batch_interval_s:g} s is below "
                       f"{MIN_INTERVAL_S:g} s; valid: {MIN_INTERVAL_S:g} s or more")
    if cfg.query != "passthrough":
        raise LabError(f"--query {cfg.query} is not built for the flink pipeline; valid query for it: passthrough")


def job_spec(cfg, *, run_id: str, bootstrap: str, checkpoint_dir: str, savepoint_dir: str,
             restore: str | None, connector_jar: str) -> dict:
    """What :mod:`lab.flink.job` reads (``flink/attempt-N.json``): every setting that decides delivery, stated."""
    from lab.sinks.topic import output_topic

    return {
        "run_id": run_id, "bootstrap": bootstrap, "topic": cfg.topic, "out_topic": output_topic(cfg.topic),
        "group": f"lab-{run_id}", "partitions": cfg.partitions, "parallelism": PARALLELISM,
        "interval_ms": int(round(cfg.batch_interval_s * 1000)), "checkpointing": cfg.flink.checkpointing,
        "delivery": delivery(cfg), "isolation": cfg.isolation_level,
        "checkpoint_dir": checkpoint_dir, "savepoint_dir": savepoint_dir, "restore": restore,
        "connector_jar": connector_jar, "txn_prefix": f"lab-{run_id}-flink",
        "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS, "slow_sink": bool(cfg.flink.slow_sink),
    }


_SPLIT = re.compile(r"\[Partition: (?P<topic>.+?)-(?P<partition>\d+), StartingOffset: (?P<offset>-?\d+)")


def split_offsets(log_text: str, topic: str) -> dict[int, int]:
    """The offset each of the job's Kafka source subtasks was told to start ``topic``'s partitions at, from its log.

    Flink's ``SourceReaderBase`` logs ``Adding split(s) to reader: [[Partition: <topic>-<p>,
    StartingOffset: <offset>, ...]]`` when a source subtask is given its partitions: after a restore, the
    offsets of the checkpoint it restored; on a first start, the group's committed offsets or a marker
    (negative: "earliest", "committed") that the reader resolves later. Markers are kept here.
    """
    return {int(m["partition"]): int(m["offset"]) for m in _SPLIT.finditer(log_text) if m["topic"] == topic}


def checkpoint_offsets(metadata: bytes, topic: str) -> dict[int, int]:
    """The Kafka offsets a completed checkpoint holds for ``topic``, per partition: where a restore starts reading.

    ``metadata`` is the checkpoint's ``_metadata`` file. The source's state is small, so Flink keeps it inline
    there (below ``state.storage.fs.memory-threshold``, which :mod:`lab.flink.job` sets), serialized by the
    connector's ``KafkaPartitionSplitSerializer``: ``writeUTF(topic)``, ``int partition``, ``long
    startingOffset``, ``long stoppingOffset``. Each partition appears twice: in the split enumerator's state,
    with the offsets initializer's marker (-3: "the group's committed offsets", skipped here), and in its
    reader's state, with the next offset to read. A partition whose reader state is not found is left out, and
    the caller falls back to the group's committed offsets.
    """
    name = topic.encode()
    needle = struct.pack(">H", len(name)) + name
    out: dict[int, int] = {}
    at = metadata.find(needle)
    while at >= 0:
        end = at + len(needle)
        if end + 20 <= len(metadata):
            partition, offset, _stop = struct.unpack(">iqq", metadata[end:end + 20])
            if offset >= 0 and 0 <= partition < 1 << 16:
                out[partition] = offset
        at = metadata.find(needle, end)
    return out


def newest_checkpoint(paths_with_ids: list[tuple[str, int, float]]) -> tuple[str, int] | None:
    """The retained checkpoint a restart resumes from: the highest id among completed ones (``_metadata`` present).

    ``paths_with_ids`` is ``(path, checkpoint id, mtime of its _metadata)`` per completed checkpoint
    directory. Checkpoint ids continue across restores, so the highest is the newest; the mtime breaks a
    tie between two jobs' directories.
    """
    if not paths_with_ids:
        return None
    path, cid, _ = max(paths_with_ids, key=lambda t: (t[1], t[2]))
    return path, cid


def checkpoint_event(entry: dict) -> dict:
    """A ``flink-checkpoint`` event's fields from one entry of Flink's REST ``/jobs/<id>/checkpoints`` history."""
    return {
        "checkpoint": entry.get("id"), "status": str(entry.get("status", "")).lower(),
        "trigger_ms": entry.get("trigger_timestamp"), "ack_ms": entry.get("latest_ack_timestamp"),
        "duration_ms": entry.get("end_to_end_duration"), "state_size": entry.get("state_size"),
        "checkpointed_size": entry.get("checkpointed_size"),
        # Unaligned checkpoints store in-flight records: persisted_data is their size, processed_data what
        # the tasks processed during the alignment, alignment_buffered what aligned ones held back.
        "persisted_data": entry.get("persisted_data"), "processed_data": entry.get("processed_data"),
        "alignment_buffered": entry.get("alignment_buffered"), "savepoint": bool(entry.get("is_savepoint")),
        "path": entry.get("external_path"), "failure": (entry.get("failure_message") or None),
    }
