"""What the notebooks show of a run's files: the checkpoint's logs, the WAL and state store on disk, the file sink.

Read-only views of a finished (or running) run's directory, as tables and
listings; nothing here changes a run.
"""

from __future__ import annotations

import json
from pathlib import Path

from lab import events as ev


def state_store(run_dir: Path | str):
    """The state store on disk: one row per state file (operator, partition, version, kind, bytes).

    HDFS-backed provider: ``N.delta`` (a batch's changes) and ``N.snapshot``
    (the whole state, written every few versions); RocksDB: ``N.zip`` and the
    shared SST files it names.
    """
    import pandas as pd

    root = Path(run_dir) / "checkpoint" / "state"
    rows = []
    for f in sorted(root.rglob("*")) if root.is_dir() else []:
        if not f.is_file() or f.name.startswith(".") or f.suffix == ".crc":
            continue
        rel = f.relative_to(root).parts
        stem, kind = (f.name.split(".", 1) + [""])[:2]
        rows.append({"operator": rel[0], "partition": rel[1] if len(rel) > 2 else "", "version":
                     int(stem) if stem.isdigit() else None, "kind": kind or f.name, "bytes": f.stat().st_size,
                     "file": "/".join(rel)})
    return pd.DataFrame(rows, columns=["operator", "partition", "version", "kind", "bytes", "file"]).astype(
        {"version": "Int64"})


def files_under(path: Path | str, max_files: int = 60) -> str:
    """A tree listing of ``path`` (checkpoints, WAL) with sizes, for showing what is on disk."""
    root = Path(path)
    if not root.exists():
        return f"{root} (does not exist)"
    lines = [str(root)]
    # Hadoop's .crc side files would double the listing without telling anything.
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    for p in files[:max_files]:
        lines.append(f"  {p.relative_to(root)}  ({p.stat().st_size} B)")
    if len(files) > max_files:
        lines.append(f"  ... {len(files) - max_files} more files")
    return "\n".join(lines)


def run_clock(events: list[dict]) -> tuple[float, float | None]:
    """A timeline's start (``run-start``, else its first event) and its first driver crash, in epoch seconds as file
    times are; the crash is ``None`` when there was none."""
    t0 = next((e["t"] for e in events if e["type"] == ev.RUN_START), events[0]["t"] if events else 0.0)
    crash = next((e["t"] for e in events if e["type"] == ev.FAULT and e.get("kind") == "driver-crash"), None)
    return t0, crash


def checkpoint_log(run_dir: Path | str, log: str = "offsets"):
    """Structured Streaming's offset or commit log as a table, with each entry placed against the crash.

    One row per batch id: when the entry was written (seconds since the run
    started), whether that was before or after the first driver crash, and
    for the offset log the planned end offsets per partition.
    """
    import pandas as pd

    from lab.events import read_events

    run_dir = Path(run_dir)
    t0, crash = run_clock(read_events(run_dir))
    rows = []
    for f in sorted((run_dir / "checkpoint" / log).glob("[0-9]*"), key=lambda p: int(p.name)):
        lines = f.read_text().splitlines()
        row = {"batch id": int(f.name), "written at (s)": round(f.stat().st_mtime - t0, 2)}
        if crash is not None:
            row["written"] = "before the crash" if f.stat().st_mtime < crash else "after the restart"
        if log == "offsets" and len(lines) >= 3:
            row["end offsets (the source's own format)"] = lines[2]
        rows.append(row)
    return pd.DataFrame(rows).set_index("batch id") if rows else pd.DataFrame()


def read_json(path: Path | str):
    """Read a JSON file (a checkpoint entry, a report)."""
    return json.loads(Path(path).read_text())


def offset_log_entry(run_dir: Path | str, batch: int) -> dict:
    """Structured Streaming's offset-log entry of ``batch``, raw and split into its lines.

    Parameters
    ----------
    run_dir : path
        A structured run's directory (its query's checkpoint is ``checkpoint/``).
    batch : int
        The batch id (the entry is the file ``checkpoint/offsets/<batch>``).

    Returns
    -------
    dict
        ``path``; ``raw`` (the file as Spark wrote it); ``version`` (line 1, e.g.
        ``v1``); ``metadata`` (line 2 parsed: ``batchWatermarkMs``,
        ``batchTimestampMs``, ``conf``); ``sources`` (each further line parsed:
        one per source, in the source's own offset format); ``end_offsets``
        (``{partition: offset}``, read by the pipeline's own rule,
        :meth:`lab.pipelines.structured.checkpoint.Checkpoint.end_offsets`).

    Raises
    ------
    FileNotFoundError
        When the batch was never logged.
    """
    from lab.pipelines.structured.checkpoint import Checkpoint

    checkpoint = Checkpoint(Path(run_dir) / "checkpoint")
    path = checkpoint.path / "offsets" / str(batch)
    raw = path.read_text()
    lines = [line for line in raw.splitlines() if line.strip()]
    return {"path": path, "raw": raw, "version": lines[0], "metadata": json.loads(lines[1]),
            "sources": [json.loads(line) for line in lines[2:]], "end_offsets": checkpoint.end_offsets(batch)}


def file_sink_readers(result):
    """A files-sink run's directory as Spark's reader and a naive reader see it (a pandas DataFrame,
    :func:`lab.sinks.files.reader_views`)."""
    import pandas as pd

    from lab.sinks.files import reader_views
    from lab.sinks.spec import FILES_DIR

    return pd.DataFrame(reader_views(result.run_dir / FILES_DIR)).set_index("reader")


#: Seconds Spark's state reader gets (a local session starts in 2-5 s, measured; the reads take about 3 s more).
STATE_READER_TIMEOUT_S = 180.0


def spark_state(run_dir: Path | str, batches):
    """A run's state as Spark's own reader sees it at ``batches``: a summary table and the change feed's.

    Runs :mod:`lab.spark.state_reader` in its own process (a local Spark session, ``format("statestore")``),
    then places beside each batch's state the events the ledger holds below that batch's end offsets (its
    offset-log entry): what a window count owes once the batch is counted once.

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame, list)
        Per batch: ``state rows``, ``counts in the state``, ``events up to its end offsets``, ``runs of the batch``
        (its ``batch-start`` events), and for ``session-count`` ``sessions as in the ledger``: the state's keys
        whose open session is the ledger's last session of the key up to that batch
        (:func:`lab.audit.window.session_state_check`), for ``window-count`` ``windows over the ledger`` and
        ``windows under the ledger`` (the (window, key)s whose count in the state is above or below the ledger's,
        either side missing counting as 0), for a
        deduplication by event id (``dedupe`` into the Kafka
        sink) ``ids not in the ledger`` (ids of no send of the ledger, whatever its status) and ``ledger ids not in
        the state`` (the acknowledged events up to the batch's end offsets; both 0: the state is exact); the change
        feed per batch and change type; ``state-metadata``'s operators.

    Raises
    ------
    RuntimeError
        When the reader fails (Spark's error in one line) or takes longer than :data:`STATE_READER_TIMEOUT_S`.
    """
    import subprocess
    import sys
    import tempfile

    import pandas as pd

    from lab.audit.ledger import LEDGER_FILE
    from lab.audit.window import below, read_event_times, session_state_check
    from lab.events import read_events
    from lab.pipelines.structured.checkpoint import Checkpoint

    run_dir = Path(run_dir)
    batches = sorted(int(b) for b in batches)
    with tempfile.TemporaryDirectory(prefix="lab-state-") as work:
        out = Path(work) / "state.json"
        done = subprocess.run([sys.executable, "-m", "lab.spark.state_reader", str(run_dir / "checkpoint"), str(out),
                               "--batches", ",".join(map(str, batches))],
                              capture_output=True, text=True, timeout=STATE_READER_TIMEOUT_S)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
            raise RuntimeError(errors[-1] if errors else f"the state reader exited {done.returncode}")
        state = json.loads(out.read_text())
    checkpoint = Checkpoint(run_dir / "checkpoint")
    events = read_event_times(run_dir / LEDGER_FILE)
    config = read_json(run_dir / "config.json")
    gap_ms = int(round(float(config.get("session_gap_s") or 0) * 1000))
    window_ms = int(round(float(config.get("window_s") or 0) * 1000))
    starts = [e for e in read_events(run_dir) if e["type"] == ev.BATCH_START]
    sends = None
    rows = []
    for b in batches:
        ends = checkpoint.end_offsets(b) or {}
        upto = below(events, ends)
        s = state["batches"][str(b)]
        row = {"batch": b, "state rows": s["rows"], "counts in the state": s["counted"],
               "events up to its end offsets": int(upto.sum()),
               "runs of the batch": sum(e["batch"] == b for e in starts)}
        if "sessions" in s:
            row["sessions as in the ledger"] = int(
                session_state_check(s["sessions"], events, upto, gap_ms)["exact"].sum())
        if "windows" in s:
            row["windows over the ledger"], row["windows under the ledger"] = windows_unlike(
                s["windows"], events, upto, window_ms)
        if "ids" in s:
            if sends is None:
                from lab.audit.ledger import sends_frame

                sends = sends_frame(run_dir / LEDGER_FILE)
            acked = sends[sends["status"] == "acked"]
            owed = {eid for eid, p, o in zip(acked["event_id"], acked["partition"], acked["kafka_offset"])
                    if o is not None and o == o and int(o) < ends.get(int(p), 0)}
            state_ids = set(s["ids"])
            # Foreign: an id the producer never sent. An unknown send that landed, or a retry's copy, is no stranger.
            row["ids not in the ledger"] = len(state_ids - set(sends["event_id"]))
            row["ledger ids not in the state"] = len(owed - state_ids)
        rows.append(row)
    changes = pd.DataFrame(state["changes"], columns=["batch", "change_type", "rows"])
    return pd.DataFrame(rows).set_index("batch"), changes, state["operators"]


def windows_unlike(state_windows: list, events, upto, window_ms: int) -> tuple[int, int]:
    """How many (window, key)s of a ``window-count`` state (``[window_start_ms, key, count]`` rows) count more, and
    how many fewer, than the ledger's acknowledged ``events`` among ``upto`` in tumbling windows of ``window_ms``
    (a window on one side only counts 0 on the other)."""
    from lab.audit.window import ledger_window_counts

    ledger = ledger_window_counts(events, upto, window_ms)
    state = {(int(s), k): int(c) for s, k, c in state_windows}
    both = ledger.keys() | state.keys()
    over = sum(state.get(w, 0) > ledger.get(w, 0) for w in both)
    return over, sum(state.get(w, 0) < ledger.get(w, 0) for w in both)


def same_counts(results) -> tuple[str, str]:
    """Whether runs of one window query with different state stores recovered the same counts (notebook 06).

    ``the same counts`` when every window of every run is exact (each run's
    audit compares each window's count with the ledger's), else ``different counts``.
    """
    exact = {label: (r.report.get("windows_exact"), r.report.get("windows")) for label, r in results.items()}
    same = all(w is not None and e == w for e, w in exact.values())
    return ("the same counts" if same else "different counts"), "; ".join(
        f"{label}: {e}/{w} windows exact" for label, (e, w) in exact.items())
