"""The sinks' words: the modes, where a run's sink is described (``sink.json``), and the read protocol every sink meets.

Pure: no database is opened here. :mod:`lab.sinks.database` writes and reads the database
modes, :mod:`lab.sinks.files` and :mod:`lab.sinks.topic` the other two, :func:`lab.sinks.reader.open_sink` opens any.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lab.errors import choices_error

SINK_FILE = "sink.sqlite"
SINK_SPEC_FILE = "sink.json"
FILES_MODE = "files"
#: The files sink's directory in a run directory.
FILES_DIR = "sink-files"
TOPIC_MODE = "topic"

#: Every sink mode (``--sink``), with its delivery guarantee. The one list: configuration,
#: the CLI's help and the sinks below all read it.
SINK_MODES = {
    "append": "plain insert: every write attempt stores a row (at-least-once output)",
    "idempotent": "upsert on the event id: writing twice stores once",
    "transactional": "rows committed with their batch id in one transaction; a batch already committed is skipped",
    FILES_MODE: "Spark's Parquet file sink: a batch's files count once its _spark_metadata entry exists (structured "
                "only)",
    TOPIC_MODE: "a Kafka output topic, audited read_committed: kafka-eos writes it in transactions with the "
                "consumed offsets, flink with its KafkaSink, samza with its producer, structured with Spark's "
                "Kafka sink (at-least-once; kafka-eos, flink, samza and structured only)",
}
#: The modes a database sink (:class:`Sink`) writes; ``files`` is written by Spark itself, ``topic`` by the pipelines
#: whose registry entry says so (``topic_sink``).
DATABASE_MODES = tuple(m for m in SINK_MODES if m not in (FILES_MODE, TOPIC_MODE))

Row = tuple  # (event_id, seq, partition, kafka_offset)
WindowRow = tuple  # (window_start_ms, window_end_ms, key, count, delta)


class OffsetMismatch(RuntimeError):
    """A batch's offset range does not continue what the sink has stored."""


@dataclass(frozen=True)
class SinkSpec:
    """Where a run's sink lives; written to ``sink.json`` so every process opens the same one."""

    mode: str
    backend: str  # "sqlite" | "postgresql"
    path: str | None = None
    url: str | None = None
    schema: str | None = None

    def save(self, run_dir: Path | str) -> None:
        (Path(run_dir) / SINK_SPEC_FILE).write_text(json.dumps(self.__dict__, indent=2))

    @classmethod
    def load(cls, run_dir: Path | str) -> SinkSpec:
        return cls(**json.loads((Path(run_dir) / SINK_SPEC_FILE).read_text()))


def sink_spec_for_run(mode: str, run_dir: Path | str, sink_url: str | None) -> SinkSpec:
    """Choose the backend for a run: PostgreSQL for ``sink_url``, else a SQLite file in the run dir."""
    if mode == FILES_MODE:
        return files_sink_spec(run_dir)
    if mode == TOPIC_MODE:
        # The topic and the broker are read from the run directory when the sink is first read.
        return SinkSpec(mode=TOPIC_MODE, backend=TOPIC_MODE, path=str(Path(run_dir).resolve()))
    if mode not in DATABASE_MODES:
        raise choices_error("sink", mode, DATABASE_MODES)
    if sink_url:
        schema = "run_" + re.sub(r"[^a-z0-9_]", "_", Path(run_dir).name.lower())[-50:]
        return SinkSpec(mode=mode, backend="postgresql", url=sink_url, schema=schema)
    return SinkSpec(mode=mode, backend="sqlite", path=str(Path(run_dir).resolve() / SINK_FILE))


class SinkReader(Protocol):
    """What the auditor and the panel read from any sink (database, files or an output topic).

    Stored rows are what a reader of the sink sees; write attempts are every
    row the pipeline tried to write, so "written twice, stored once" shows.
    """

    mode: str

    def event_rows(self) -> tuple[np.ndarray, np.ndarray]: ...  # noqa: F821  (seq int64, event_id object)
    def attempt_seqs(self) -> np.ndarray: ...  # noqa: F821
    def event_counts(self) -> list[tuple[str, int]]: ...
    def totals(self) -> dict[str, int]: ...
    def close(self) -> None: ...


def files_sink_spec(run_dir: Path | str) -> SinkSpec:
    """The files sink of a run: Parquet under ``<run_dir>/sink-files`` (``LAB_SINK_URL`` does not apply)."""
    return SinkSpec(mode=FILES_MODE, backend=FILES_MODE, path=str(Path(run_dir).resolve() / FILES_DIR))
