"""The files sink: Spark's own Parquet file sink (structured pipeline, ``--sink files``).

Spark writes it; the lab only reads it, so the auditor can count it like the
database sinks (:class:`FileSink` is a :class:`lab.sinks.spec.SinkReader`).

Delivery guarantee: exactly once per batch id. A batch's data files count
only once the batch's entry is in ``<dir>/_spark_metadata`` (the file sink's
own log, written after every task committed); a batch id already in the log
is skipped on re-run. Files of attempts killed with the driver stay on disk
uncommitted: they count as write attempts, never as stored rows.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from lab.errors import LabError
from lab.outcomes import NAIVE_READER_OUTCOMES
from lab.sinks.spec import FILES_DIR, SinkSpec

FILES_METADATA_DIR = "_spark_metadata"


def committed_files(out_dir: Path | str) -> list[Path]:
    """Data files the file sink's metadata log lists as committed, in log order.

    Reads ``_spark_metadata`` as Spark does: the newest ``N.compact`` file
    holds every entry up to ``N``; plain ``N`` files hold one batch each.
    Temporary files (``.N.<uuid>.tmp``) are ignored: a batch is committed only
    once its file has been renamed into place.

    Raises
    ------
    LabError
        On a log version the lab does not know.
    """
    from urllib.parse import unquote, urlparse

    log_dir = Path(out_dir) / FILES_METADATA_DIR
    if not log_dir.is_dir():
        return []
    logs = {}
    for f in log_dir.iterdir():
        m = re.fullmatch(r"(\d+)(\.compact)?", f.name)
        if m:
            logs[int(m.group(1))] = f
    compacts = [b for b, f in logs.items() if f.name.endswith(".compact")]
    first = max(compacts) if compacts else 0
    entries: dict[str, dict] = {}
    for batch in sorted(b for b in logs if b >= first):
        lines = logs[batch].read_text().splitlines()
        if not lines or lines[0] != "v1":
            raise LabError(f"unknown file sink log version in {logs[batch]}: {lines[:1]}")
        for line in lines[1:]:
            if not line.strip():
                continue
            entry = json.loads(line)
            if entry.get("action") == "delete":
                entries.pop(entry["path"], None)
            else:
                entries[entry["path"]] = entry
    return [Path(unquote(urlparse(p).path)) for p in entries]


def data_files(out_dir: Path | str) -> list[Path]:
    """Every Parquet data file under ``out_dir``, committed or not (hidden and metadata files excluded)."""
    root = Path(out_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*.parquet")
                  if not any(part.startswith((".", "_")) for part in p.relative_to(root).parts))


def complete_data_files(out_dir: Path | str) -> set[str]:
    """The names of the data files whose Parquet footer is written (they end with the ``PAR1`` magic).

    A file a task is still writing (or one a kill cut short) has no footer yet.
    """
    done = set()
    for path in data_files(out_dir):
        try:
            with open(path, "rb") as f:
                f.seek(-4, os.SEEK_END)
                if f.read(4) == b"PAR1":
                    done.add(path.name)
        except OSError:
            pass  # shorter than its magic: still being written
    return done


def _read_column_arrays(files: Iterable[Path], columns: Sequence[str]) -> tuple[dict, int]:
    """``({column: numpy array over all files}, unreadable files)``; a file still being written is unreadable."""
    import numpy as np
    import pyarrow.parquet as pq

    parts: dict[str, list] = {c: [] for c in columns}
    unreadable = 0
    for f in files:
        try:
            table = pq.read_table(f, columns=list(columns))
        except Exception:
            unreadable += 1
            continue
        for c in columns:
            parts[c].append(table.column(c).to_numpy(zero_copy_only=False))
    out = {}
    for c in columns:
        out[c] = np.concatenate(parts[c]) if parts[c] else np.array([], dtype=np.int64 if c == "seq" else object)
    if "seq" in out:
        out["seq"] = out["seq"].astype(np.int64)
    if "event_id" in out:
        out["event_id"] = out["event_id"].astype(object)
    return out, unreadable


class FileSink:
    """Read side of the files sink: a :class:`SinkReader`.

    Stored rows are the rows of committed files (what a reader of the sink
    through its metadata log, such as ``spark.read.parquet``, sees); write
    attempts are the rows of every complete data file on disk, so output a
    crash left uncommitted shows as "written, not stored".
    """

    def __init__(self, spec: SinkSpec) -> None:
        self.spec = spec
        self.mode = spec.mode
        self.path = Path(spec.path)

    def write_batch(self, *args, **kwargs) -> str:
        raise LabError("the files sink is written by Spark's file sink inside the structured pipeline, not row by row")

    def committed_files(self) -> list[Path]:
        return committed_files(self.path)

    def event_rows(self) -> tuple[np.ndarray, np.ndarray]:  # noqa: F821
        """Every committed row as two aligned arrays: ``seq`` (int64) and ``event_id`` (object)."""
        cols, _ = _read_column_arrays(self.committed_files(), ("seq", "event_id"))
        return cols["seq"], cols["event_id"]

    def attempt_seqs(self) -> np.ndarray:  # noqa: F821
        """The event sequence number of every row in any readable data file, committed or not."""
        return _read_column_arrays(data_files(self.path), ("seq",))[0]["seq"]

    def event_counts(self) -> list[tuple[str, int]]:
        """``(event_id, stored rows)`` over the committed files."""
        from collections import Counter

        return list(Counter(self.event_rows()[1].tolist()).items())


    def totals(self) -> dict[str, int]:
        committed = self.committed_files()
        on_disk = data_files(self.path)
        stored, _ = _read_column_arrays(committed, ("seq",))
        written, unreadable = _read_column_arrays(on_disk, ("seq",))
        return {
            "stored_rows": int(len(stored["seq"])),
            "write_attempts": int(len(written["seq"])),
            "committed_files": len(committed),
            "uncommitted_files": len(set(on_disk) - set(committed)),
            "unreadable_files": unreadable,
        }

    def close(self) -> None:
        pass

    def __enter__(self) -> FileSink:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def reader_views(out_dir: Path | str) -> list[dict]:
    """What two readers of the files sink's directory see: Spark's, through ``_spark_metadata``, and a naive one.

    Spark's reader (``spark.read.parquet(dir)``) lists the files the sink's
    metadata log names (:func:`committed_files`); a reader that ignores the log
    (``pandas.read_parquet(dir)``, a Hive table over the directory) takes every
    Parquet file in it (:func:`data_files`), including those a killed attempt
    left behind. Each view: ``files``, ``rows``, ``events`` (distinct ids),
    ``extra copies`` (rows beyond one per event) and ``unreadable`` files
    (cut short by the kill).
    """
    views = []
    for reader, files in (("Spark's reader (the files _spark_metadata lists)", committed_files(out_dir)),
                          ("a naive reader (every .parquet file in the directory)", data_files(out_dir))):
        cols, unreadable = _read_column_arrays(files, ("event_id",))
        rows = len(cols["event_id"])
        events = len(set(cols["event_id"].tolist()))
        views.append({"reader": reader, "files": len(files), "rows": rows, "events": events,
                      "extra copies": rows - events, "unreadable": unreadable})
    return views




def naive_reader_outcome(report) -> tuple[str, str]:
    """A files-sink run's outcome for a naive reader of its directory (:func:`reader_views`), and the counts.

    A ``measure`` for :func:`lab.audit.predictions.judge`: one of :data:`lab.outcomes.NAIVE_READER_OUTCOMES`.
    """
    spark, naive = reader_views(Path(report["run_dir"]) / FILES_DIR)
    outcome = NAIVE_READER_OUTCOMES[1] if naive["extra copies"] else NAIVE_READER_OUTCOMES[0]
    return outcome, (f"naive reader: {naive['extra copies']} extra copies in {naive['files']} files; "
                     f"Spark's reader: {spark['extra copies']} in {spark['files']}")
