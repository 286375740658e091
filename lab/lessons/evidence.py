"""Evidence exercises: a question about a crashed run that its own files decide, and the check of the answer.

An evidence exercise (:class:`lab.lessons.exercises.Exercise` with ``evidence``
set) runs a crash scenario, then asks the learner to open what the pipeline
left on disk or in the broker (the offset log, the commit log, the state
store, the topic) and explain the run's counts from it. Each check here reads
those same files and returns a :class:`Finding`: the table a learner would
look at, one sentence of what it shows, and whether that bears out the answer
the solution states. :func:`lab.lessons.solve.solve` fails when it does not.

Each check takes a finished :class:`lab.run.supervisor.RunResult`, reads only,
and compares two things measured independently: what the files record and what
the auditor counted in the sink (or the timeline's replayed batches), so a
check can fail.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from lab import events as ev
from lab.errors import choices_error


@dataclass(frozen=True)
class Finding:
    """What a run's files show, and whether it bears out the solution's answer."""

    holds: bool
    shows: str
    table: object = field(default=None, compare=False)  # a pandas DataFrame, or None


@dataclass(frozen=True)
class _Timeline:
    """A run's ``events.jsonl``, read once per check, with its start and first driver crash (epoch seconds)."""

    events: list
    t0: float
    crash: float | None

    def batch_starts(self) -> list[dict]:
        return [e for e in self.events if e["type"] == ev.BATCH_START]

    def at(self, t: float) -> float:
        """``t`` in seconds since the run started."""
        return round(t - self.t0, 2)

    def side(self, t: float) -> str:
        """Which side of the crash ``t`` (a file's time) is on; empty without a crash."""
        return "" if self.crash is None else "before the crash" if t < self.crash else "after the restart"


def _timeline(run_dir: Path) -> _Timeline:
    from lab.views.run_files import run_clock

    events = ev.read_events(run_dir)
    return _Timeline(events, *run_clock(events))


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return None


def _twice_answer(result, rows, finished: str, log: str) -> Finding:
    """The batch the crash left unfinished (logged before it, finished only after it), and whether the sink's
    duplicates are exactly its records."""
    import pandas as pd

    line = _timeline(Path(result.run_dir))
    if line.crash is None:
        return Finding(False, "no driver crash on the timeline: nothing was replayed")
    for r in rows:
        r["unfinished"] = r["logged"] < line.crash and (r["finished"] is None or r["finished"] > line.crash)
    table = pd.DataFrame([{"batch": r["batch"], "logged at (s)": line.at(r["logged"]),
                           f"{finished} at (s)": None if r["finished"] is None else line.at(r["finished"]),
                           "records": r["records"], "left unfinished by the crash": r["unfinished"]}
                          for r in rows]).set_index("batch")
    unfinished = [r for r in rows if r["unfinished"]]
    dup = int(result.report["duplicated"])
    if len(unfinished) != 1:
        return Finding(False, f"the {log} left {len(unfinished)} batches unfinished at the crash "
                              f"({[r['batch'] for r in unfinished]}), not one", table)
    b, records = unfinished[0]["batch"], unfinished[0]["records"]
    starts = sum(e.get("batch") == b for e in line.batch_starts())
    shows = (f"batch {b} was logged before the crash and finished only after the restart; the {log} gives it "
             f"{records} records, the sink holds {dup} events twice, and the timeline starts batch {b} {starts} times")
    return Finding(dup == records and records > 0 and starts == 2, shows, table)


def direct_unfinished_plan(result) -> Finding:
    """Direct pipeline: the plan in ``checkpoint/offsets/<batch>.json`` without a ``done/<batch>`` from before the
    crash.

    Holds when exactly one batch was planned before the crash and marked done
    only after it, the sink's duplicated events equal the records of its
    plan (its ranges, ``untilOffset - fromOffset`` summed), and the timeline
    starts it twice: the replay read the logged ranges, no others.
    """
    root = Path(result.run_dir) / "checkpoint"
    rows = []
    for f in sorted((root / "offsets").glob("*.json"), key=lambda p: int(p.stem)):
        plan = json.loads(f.read_text())
        rows.append({"batch": int(f.stem), "logged": f.stat().st_mtime, "finished": _mtime(root / "done" / f.stem),
                     "records": sum(r["untilOffset"] - r["fromOffset"] for r in plan["ranges"])})
    return _twice_answer(result, rows, "done", "offset log")


def structured_unfinished_batch(result) -> Finding:
    """Structured Streaming: the batch in ``checkpoint/offsets`` whose ``checkpoint/commits`` entry came after the
    crash.

    Its records are its end offsets less those of the batch before (from the
    offset log). Holds as :func:`direct_unfinished_plan` does.
    """
    from lab.pipelines.structured.checkpoint import Checkpoint

    checkpoint = Checkpoint(Path(result.run_dir) / "checkpoint")
    rows = []
    for f in sorted((checkpoint.path / "offsets").glob("[0-9]*"), key=lambda p: int(p.name)):
        b = int(f.name)
        end = checkpoint.end_offsets(b) or {}
        before = (checkpoint.end_offsets(b - 1) if b else checkpoint.initial_offsets()) or {}
        rows.append({"batch": b, "logged": f.stat().st_mtime, "finished": _mtime(checkpoint.path / "commits" / f.name),
                     "records": sum(o - before.get(p, 0) for p, o in end.items())})
    return _twice_answer(result, rows, "committed", "offset log")


def topic_duplicates(result):
    """Each event id the run's topic holds at more than one offset, read from its beginning (a pandas DataFrame).

    Columns: ``event id``, ``copies in the topic``, ``first at`` (partition and
    offset of its first copy), in the order of those first copies.
    """
    import pandas as pd

    from lab.kafka import tools as kafka_tools

    cfg = result.config
    copies = kafka_tools.topic_copies(_bootstrap(result), cfg.topic, cfg.partitions)
    twice = sorted(((eid, c) for eid, c in copies.items() if c[0] > 1), key=lambda kv: (kv[1][1], kv[1][2]))
    return pd.DataFrame([{"event id": eid, "copies in the topic": c[0], "first at": f"partition {c[1]}, offset {c[2]}"}
                         for eid, c in twice], columns=["event id", "copies in the topic", "first at"])


def _bootstrap(result) -> str:
    return json.loads((Path(result.run_dir) / "broker.json").read_text())["bootstrap"]


def _duplicates_from_the_topic(result) -> Finding:
    """Holds when the topic holds some event twice and the sink's duplicated events are exactly those."""
    table = topic_duplicates(result)
    twice = set(table["event id"])
    in_sink = set(result.audit.table.loc[result.audit.table["delivered"] > 1, "event_id"])
    shows = (f"{len(twice)} event ids are in the topic more than once; the sink holds {len(in_sink)} events more than "
             f"once, {len(in_sink & twice)} of them the topic's")
    return Finding(bool(twice) and in_sink == twice, shows, table)


def state_version_of_replay(result) -> Finding:
    """Stateful query: the state store's versions against the crash, after ``driver-crash@batch=N:after-offset-log``.

    Batch ``N`` commits state version ``N + 1`` (HDFS-backed provider). Holds
    when version ``N`` was written before the crash, every file of version
    ``N + 1`` only after the restart, and each version from 1 to the last
    appears once per operator partition: the replay started from the state of
    the batch before and wrote batch ``N``'s version once.
    """
    import pandas as pd

    from lab.views.run_files import state_store

    run_dir = Path(result.run_dir)
    line = _timeline(run_dir)
    planned = next((f for f in result.config.fault_plan if f.kind == "driver-crash"), None)
    if line.crash is None or planned is None or planned.batch is None:
        return Finding(False, "no driver crash at a batch on the timeline")
    n = planned.batch
    files = state_store(run_dir)
    root = run_dir / "checkpoint" / "state"
    mtimes = [(root / f).stat().st_mtime for f in files["file"]]
    files["written at (s)"] = [line.at(m) for m in mtimes]
    files["written"] = [line.side(m) for m in mtimes]
    delta = files[files["kind"] == "delta"]
    by_version = delta.groupby("version")["written"].agg(lambda w: ", ".join(sorted(set(w))))
    table = pd.DataFrame({"files": delta.groupby("version").size(), "written": by_version})
    partitions = delta.groupby(["operator", "partition"]).ngroups
    once = bool(len(delta)) and (delta.groupby(["operator", "partition", "version"]).size() == 1).all() \
        and (table["files"] == partitions).all()
    holds = once and by_version.get(n) == "before the crash" and by_version.get(n + 1) == "after the restart"
    shows = (f"version {n} (batch {n - 1}) written {by_version.get(n, 'never')}, version {n + 1} (batch {n}) "
             f"{by_version.get(n + 1, 'never')}; each version once per partition: {'yes' if once else 'no'}")
    return Finding(bool(holds), shows, table)


def output_readers(result):
    """kafka-eos: the run's output topic as a ``read_uncommitted`` and a ``read_committed`` reader get it.

    One row per reader: ``records``, distinct ``events``, ``events more than once``.
    """
    import pandas as pd

    from lab.kafka import tools as kafka_tools
    from lab.sinks.topic import output_topic

    cfg = result.config
    rows = []
    for isolation in ("read_uncommitted", "read_committed"):
        copies = kafka_tools.topic_copies(_bootstrap(result), output_topic(cfg.topic), cfg.partitions,
                                          isolation_level=isolation)
        rows.append({"reader": isolation, "records": sum(c[0] for c in copies.values()), "events": len(copies),
                     "events more than once": sum(c[0] > 1 for c in copies.values())})
    return pd.DataFrame(rows).set_index("reader")


def _aborted_output_transaction(result) -> Finding:
    """Holds when a ``read_uncommitted`` reader of the output gets the records a ``read_committed`` reader gets plus
    exactly the aborted ones the audit counted (the dead attempt's output), and a ``read_committed`` reader every
    event once."""
    from lab.sinks.topic import output_topic

    table = output_readers(result)
    raw, committed = table.loc["read_uncommitted"], table.loc["read_committed"]
    aborted = result.report.get("aborted_output_records") or 0
    shows = (f"{output_topic(result.config.topic)}: read_uncommitted gets {raw['records']} records "
             f"({raw['events more than once']} events more than once), read_committed {committed['records']} "
             f"({committed['events more than once']} more than once); the audit counted {aborted} aborted records")
    holds = raw["records"] - committed["records"] == aborted > 0 and committed["events more than once"] == 0 \
        and committed["events"] == raw["events"]
    return Finding(bool(holds), shows, table)


#: How late after a batch's time a block may still be given to that batch: the driver allocates a batch's blocks
#: when its timer fires (measured on a quiet machine: within 5 ms of the batch's time), later on a loaded one.
WAL_SLACK_MS = 150


def wal_segments(result):
    """The receiver's write-ahead log on disk: one row per segment of ``checkpoint/receivedData/<stream>/``.

    A segment is named ``log-<start ms>-<end ms>`` by Spark's
    ``FileBasedWriteAheadLog``; ``batch`` is the batch whose interval holds its
    last write (its file's time): the receiver reports a block to the driver
    only once the block is in the log, and the driver gives each reported block
    to the next batch it allocates, so a segment started just before a batch's
    time can hold a block of the batch after (measured under load: started
    6 ms before, written 65 ms after). ``recovered``: whether the restarted
    driver ran that batch from the log.
    """
    return _wal_segments(result, _timeline(Path(result.run_dir)))


def _recovered(line: _Timeline) -> list[int]:
    """The batches a restarted receiver driver ran from its recovered blocks."""
    return sorted({e["batch"] for e in line.batch_starts() if e.get("recovered")})


def _batch_times(line: _Timeline) -> list[tuple[int, int]]:
    """``(time ms, batch)`` of every batch the timeline started, by time."""
    return sorted({e["time"]: e["batch"] for e in line.batch_starts() if e.get("time") is not None}.items())


def _segment_files(result) -> list[tuple[Path, int, float]]:
    """The WAL's segment files, their sizes and their last writes (epoch ms), by name."""
    files = sorted((Path(result.run_dir) / "checkpoint" / "receivedData").glob("*/log-*"))
    return [(f, st.st_size, st.st_mtime * 1000) for f, st in ((f, f.stat()) for f in files)]


def _batches_of(written_ms: float, times: list[tuple[int, int]], interval_ms: float, slack_ms: float = 0) -> list[int]:
    """The batches a segment last written at ``written_ms`` may hold blocks of: those whose interval
    ``(time - interval, time + slack]`` holds it; the first batch takes every block reported before its time."""
    return [b for i, (t, b) in enumerate(times) if (i == 0 or t - interval_ms < written_ms)
            and written_ms <= t + slack_ms]


def _wal_segments(result, line: _Timeline, files=None):
    import pandas as pd

    interval_ms = result.config.batch_interval_s * 1000
    times = _batch_times(line)
    recovered = set(_recovered(line))
    rows = []
    for f, size, written_ms in _segment_files(result) if files is None else files:
        batch = next(iter(_batches_of(written_ms, times, interval_ms)), None)
        rows.append({"segment": f"{f.parent.name}/{f.name}", "bytes": size,
                     "written at (s)": line.at(written_ms / 1000), "written": line.side(written_ms / 1000),
                     "batch": batch, "recovered": batch in recovered})
    return pd.DataFrame(rows, columns=["segment", "bytes", "written at (s)", "written", "batch", "recovered"])


def _recovered_from_the_wal(result) -> Finding:
    """Holds when the restarted driver recovered some batch and every recovered batch has WAL segments written
    before the crash: the log on disk, not Kafka, is where those batches' records came from.

    A segment written up to :data:`WAL_SLACK_MS` after a batch's time counts for that batch too (an allocation
    the loaded machine ran late)."""
    line = _timeline(Path(result.run_dir))
    files = _segment_files(result)
    segments = _wal_segments(result, line, files)
    recovered = _recovered(line)
    interval_ms = result.config.batch_interval_s * 1000
    times = _batch_times(line)
    held = {b for _, _, w in files if line.side(w / 1000) == "before the crash"
            for b in _batches_of(w, times, interval_ms, WAL_SLACK_MS)}
    covered = [b for b in recovered if b in held]
    shows = (f"the restarted driver recovered batches {recovered or 'none'}; WAL segments written before the crash "
             f"hold blocks of {len(covered)} of them ({len(segments)} segments in all)")
    return Finding(bool(recovered) and covered == recovered, shows, segments)


def flink_checkpoints(result):
    """Flink's completed checkpoints on disk (``checkpoint/<job>/chk-<id>/_metadata``), placed against the crash.

    One row per checkpoint directory: its job, id, whether ``_metadata`` (written
    last, when the checkpoint completes) is there, when, and whether a restart
    restored it (``flink-start``'s ``restore_checkpoint``).
    """
    return _flink_checkpoints(result, _timeline(Path(result.run_dir)))


def _flink_starts(line: _Timeline) -> list[dict]:
    return [e for e in line.events if e["type"] == ev.FLINK_START]


def _flink_checkpoints(result, line: _Timeline):
    import pandas as pd

    restored = {e["restore"].rstrip("/"): e.get("attempt") for e in _flink_starts(line) if e.get("restore")}
    rows = []
    for d in sorted((Path(result.run_dir) / "checkpoint").glob("*/chk-*"), key=lambda p: p.stat().st_mtime):
        when = _mtime(d / "_metadata")
        rows.append({"job": d.parent.name[:8], "checkpoint": d.name, "completed": when is not None,
                     "completed at (s)": None if when is None else line.at(when),
                     "written": "" if when is None else line.side(when),
                     "restored by attempt": restored.get(str(d).rstrip("/"))})
    return pd.DataFrame(rows, columns=["job", "checkpoint", "completed", "completed at (s)", "written",
                                       "restored by attempt"]).astype({"restored by attempt": "Int64"})


def _restored_newest_before_crash(result) -> Finding:
    """Holds when the first restart restored a checkpoint, and it is the newest one completed before the crash."""
    line = _timeline(Path(result.run_dir))
    table = _flink_checkpoints(result, line)
    first = next((e for e in _flink_starts(line) if e.get("attempt") == 2), None)
    done_before = table[table["written"] == "before the crash"]
    newest = done_before.iloc[-1]["checkpoint"] if len(done_before) else None
    got = Path(first["restore"]).name if first and first.get("restore") else None
    shows = (f"attempt 2 restored {got or 'no checkpoint'}; the newest checkpoint completed before the crash: "
             f"{newest or 'none'}")
    return Finding(got is not None and got == newest, shows, table)


def share_held(result):
    """Share pipeline: each record a killed consumer held, and what the group did with it
    (:func:`lab.views.share.held`)."""
    from lab.views.share import held

    return held(result)


def _held_records_delivered_again(result) -> Finding:
    """Holds when a consumer died holding records, and each came back with a higher delivery count, written once.

    Two measures apart: the dead consumer's own ``consumer-killed`` event (what it held) and the other
    consumers' delivery logs and the sink's rows (what became of it).
    """
    table = share_held(result)
    again = table[table["deliveries in the end"].fillna(0) > table["delivery count then"]]
    once = table[table["sink rows"] == 1]
    shows = (f"the killed consumer held {len(table)} records, none written; {len(again)} of them were delivered "
             f"again with a higher delivery count, and {len(once)} are in the sink exactly once")
    return Finding(len(table) > 0 and len(again) == len(table) == len(once), shows, table)


#: The checks an exercise's ``evidence`` names.
CHECKS = {
    "direct-unfinished-plan": direct_unfinished_plan,
    "structured-unfinished-batch": structured_unfinished_batch,
    "topic-duplicates": _duplicates_from_the_topic,
    "state-version-of-replay": state_version_of_replay,
    "aborted-output-transaction": _aborted_output_transaction,
    "recovered-from-the-wal": _recovered_from_the_wal,
    "restored-newest-before-crash": _restored_newest_before_crash,
    "held-records-delivered-again": _held_records_delivered_again,
}


def check(name: str, result) -> Finding:
    """Run the evidence check ``name`` (a key of :data:`CHECKS`) on a finished run."""
    if name not in CHECKS:
        raise choices_error("evidence check", name, CHECKS)
    return CHECKS[name](result)
