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


def write_progress(run_dir: Path | str, positions: dict[int, int], batch: int, **extra) -> None:
    """Record how far the pipeline has durably processed the topic.

    ``positions`` maps partition to the next offset the pipeline will read
    after a restart. Written atomically (rename) so readers never see half a file.
    """
    path = Path(run_dir) / PROGRESS_FILE
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"t": time.time(), "batch": batch, "positions": {str(k): v for k, v in positions.items()}, **extra}))
    os.replace(tmp, path)


def read_progress(run_dir: Path | str) -> dict:
    """The last progress record: ``{"batch": n, "positions": {partition: offset}}`` (empty when none)."""
    try:
        data = json.loads((Path(run_dir) / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return {"batch": -1, "positions": {}}
    data["positions"] = {int(k): int(v) for k, v in data.get("positions", {}).items()}
    return data
