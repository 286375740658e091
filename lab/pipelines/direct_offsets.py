"""Where the ``direct`` pipeline's offsets live: planned ranges, the checkpoint's offset log, the offset stores.

The protocol these serve is in :mod:`lab.pipelines.direct` (its docstring
has the checkpoint's file layout and what each ``--offsets`` store
guarantees). Here are its pure rules and its files:

* :class:`OffsetRange` and :func:`plan_ranges`: one batch's ``[fromOffset,
  untilOffset)`` per partition, a pure function of the positions.
* :class:`OffsetLog`: ``checkpoint/offsets/<batch>.json`` plans, written
  atomically before a batch runs and never changed, and ``done/<batch>``
  markers.
* :class:`OffsetStore`: the ``--offsets`` store as the driver sees it (the
  sink's ``sink_offsets``, the run's consumer group, or nothing beyond the
  log for ``checkpoint``).
* :func:`recovery_ranges` and :func:`start_positions`: where a restarted
  driver reads from, decided from the log and the store.

Delivery guarantee: none of its own; these functions decide which offsets a
batch covers, so a mistake here loses or repeats records. They refuse
(``LabError``) rather than guess when the store and the log disagree about
an unfinished batch.

On failure: Kafka look-ups and commits are retried for
:data:`KAFKA_RETRY_S` seconds (an outage delays the driver, it does not end
it), then raise.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lab import events as ev
from lab.errors import LabError
from lab.kafka import tools as kafka_tools
from lab.sinks.reader import open_sink

if TYPE_CHECKING:
    from lab.pipelines.driver import DriverContext

#: Seconds the driver keeps retrying an offset look-up or commit before giving up.
KAFKA_RETRY_S = 30.0


# -- offset ranges and the offset log ------------------------------------------
@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[fromOffset, untilOffset)`` of one Kafka partition, as Spark's ``OffsetRange``.

    The camelCase field names are Spark's, so code written against
    ``HasOffsetRanges`` reads the same here.
    """

    topic: str
    partition: int
    fromOffset: int
    untilOffset: int

    def count(self) -> int:
        """Offsets in the range (records, unless transaction markers occupy some)."""
        return self.untilOffset - self.fromOffset

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition,
                "fromOffset": self.fromOffset, "untilOffset": self.untilOffset}

    @classmethod
    def from_json(cls, d: dict) -> OffsetRange:
        return cls(str(d["topic"]), int(d["partition"]), int(d["fromOffset"]), int(d["untilOffset"]))


def ranges_dict(ranges) -> dict[int, tuple[int, int]]:
    """``{partition: (from, until)}``, the shape events and the sink use."""
    return {r.partition: (r.fromOffset, r.untilOffset) for r in ranges}


def plan_ranges(topic: str, start: dict[int, int], latest: dict[int, int], max_per_partition: int) -> list[OffsetRange]:
    """Plan one batch: per partition, from its start up to at most ``max_per_partition`` offsets further.

    Pure: the same positions always give the same plan. Every partition of
    ``latest`` gets a range (possibly empty); a partition whose latest offset
    is behind its start (a broker that lost data) gets an empty range and
    keeps its start, so the next plan still continues the last one.
    """
    out = []
    for p in sorted(latest):
        begin = start.get(p, 0)
        until = max(begin, min(latest[p], begin + max_per_partition))
        out.append(OffsetRange(topic, p, begin, until))
    return out


def _write_atomically(path: Path, text: str) -> None:
    # Readers (a restarted driver, a notebook) must never see half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class OffsetLog:
    """The checkpoint's offset log: ``offsets/<batch>.json`` plans and ``done/<batch>`` markers.

    Parameters
    ----------
    root : Path
        The checkpoint directory (``<run_dir>/checkpoint``); created on first write.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.offsets_dir = self.root / "offsets"
        self.done_dir = self.root / "done"

    @staticmethod
    def _numbers(d: Path, pattern: str) -> list[int]:
        if not d.is_dir():
            return []
        return sorted(int(m.group(1)) for f in d.iterdir() if (m := re.fullmatch(pattern, f.name)))

    def planned(self) -> list[int]:
        """Batch numbers with a plan, ascending."""
        return self._numbers(self.offsets_dir, r"(\d+)\.json")

    def done(self) -> list[int]:
        """Batch numbers marked done, ascending."""
        return self._numbers(self.done_dir, r"(\d+)")

    def plan(self, batch: int) -> dict | None:
        """The logged plan of ``batch`` as written (``None`` if never planned)."""
        try:
            return json.loads((self.offsets_dir / f"{batch}.json").read_text())
        except FileNotFoundError:
            return None

    def ranges(self, batch: int) -> list[OffsetRange] | None:
        plan = self.plan(batch)
        return None if plan is None else [OffsetRange.from_json(r) for r in plan["ranges"]]

    def is_done(self, batch: int) -> bool:
        return (self.done_dir / str(batch)).exists()

    def write_plan(self, batch: int, ranges: list[OffsetRange], offset_store: str) -> None:
        """Log ``batch``'s ranges; refuses to overwrite a logged plan (a batch's ranges never change)."""
        self.offsets_dir.mkdir(parents=True, exist_ok=True)
        path = self.offsets_dir / f"{batch}.json"
        if path.exists():
            raise LabError(f"batch {batch} is already in the offset log {path}; a batch is planned once")
        topic = ranges[0].topic if ranges else None
        head = json.dumps({"batch": batch, "topic": topic, "planned_at": round(time.time(), 6),
                           "offset_store": offset_store})[:-1]
        # One range per line, so the file reads like a table in a notebook or a terminal.
        body = ",\n  ".join(json.dumps(r.to_json()) for r in ranges)
        _write_atomically(path, f'{head},\n "ranges": [\n  {body}\n ]}}\n')

    def mark_done(self, batch: int, rows: int) -> None:
        self.done_dir.mkdir(parents=True, exist_ok=True)
        _write_atomically(self.done_dir / str(batch),
                          json.dumps({"batch": batch, "rows": rows, "done_at": round(time.time(), 6)}) + "\n")

    def pending(self) -> tuple[int, list[OffsetRange]] | None:
        """The last planned batch if it is not done (what a restart re-runs), else ``None``."""
        planned = self.planned()
        if not planned or self.is_done(planned[-1]):
            return None
        return planned[-1], self.ranges(planned[-1])

    def next_positions(self) -> dict[int, int]:
        """``untilOffset`` per partition of the last planned batch (empty before the first)."""
        planned = self.planned()
        return {} if not planned else {r.partition: r.untilOffset for r in self.ranges(planned[-1])}


# -- offset stores and recovery -------------------------------------------------
class OffsetStore:
    """Where the direct stream's offsets are kept (``--offsets``), as seen from the driver.

    Parameters
    ----------
    kind : {"checkpoint", "sink", "kafka"}
    ctx : DriverContext
    """

    def __init__(self, kind: str, ctx: DriverContext) -> None:
        self.kind = kind
        self.ctx = ctx
        self._consumer = None

    def _group(self):
        if self._consumer is None:
            # No subscription: committing to a group needs no group membership (see kafka_tools).
            self._consumer = kafka_tools.consumer(self.ctx.bootstrap, group_id=f"lab-{self.ctx.run_id}")
        return self._consumer

    def stored(self) -> dict[int, int]:
        """The positions this store holds (empty for ``checkpoint``: the offset log is its record)."""
        if self.kind == "sink":
            with open_sink(self.ctx.run_dir) as sink:
                return sink.stored_offsets(self.ctx.config.topic)
        if self.kind == "kafka":
            from kafka import TopicPartition

            cfg = self.ctx.config
            out = {}
            for p in range(cfg.partitions):
                committed = retry(lambda p=p: self._group().committed(TopicPartition(cfg.topic, p)), self._reset)
                if committed is not None:
                    out[p] = committed
            return out
        return {}

    def commit(self, ranges: list[OffsetRange]) -> None:
        """After the output: commit ``untilOffset`` of every partition to the group (``kafka`` only).

        Raises
        ------
        Exception
            kafka-python's error when the commit still fails after :data:`KAFKA_RETRY_S`
            (the batch is then not marked done and is re-run).
        """
        if self.kind != "kafka":
            return
        from kafka import OffsetAndMetadata, TopicPartition

        offsets = {TopicPartition(r.topic, r.partition): OffsetAndMetadata(r.untilOffset, "", -1) for r in ranges}
        retry(lambda: self._group().commit(offsets), self._reset)

    def _reset(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close(autocommit=False)
            except Exception:
                pass
            self._consumer = None

    def close(self) -> None:
        self._reset()


def retry(call, reset=None, within_s: float = KAFKA_RETRY_S):
    """``call()``, retried for ``within_s`` seconds: a broker outage delays the driver, it does not kill it."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return call()
        except Exception:
            if time.monotonic() > deadline:
                raise
            if reset:
                reset()
            time.sleep(0.5)


def recovery_ranges(kind: str, logged: list[OffsetRange], stored: dict[int, int],
                    earliest: dict[int, int]) -> list[OffsetRange]:
    """The ranges a restarted driver re-runs for the unfinished batch ``logged``.

    ``checkpoint``: exactly the logged ranges. ``sink`` / ``kafka``: each
    partition from the store's offset (``earliest`` when it has none) up to
    the logged ``untilOffset``; a partition the store already has
    completely gets an empty range.

    Raises
    ------
    LabError
        When a stored offset lies outside the logged range: store and
        checkpoint disagree about what was done, and guessing could lose or
        repeat data.
    """
    if kind == "checkpoint":
        return list(logged)
    out = []
    for r in logged:
        at = stored.get(r.partition, earliest.get(r.partition, 0))
        if not r.fromOffset <= at <= r.untilOffset:
            raise LabError(f"the {kind} store's offset {at} for partition {r.partition} is outside the unfinished "
                           f"batch's logged range [{r.fromOffset}, {r.untilOffset}); checkpoint and store disagree")
        out.append(OffsetRange(r.topic, r.partition, at, r.untilOffset))
    return out


def start_positions(ctx: DriverContext, log: OffsetLog, store: OffsetStore, earliest: dict[int, int]) -> dict[int, int]:
    """Where the stream continues when no batch is unfinished.

    ``checkpoint``: the last logged batch's ``untilOffset``. ``sink`` /
    ``kafka``: the store's offsets (they are the record of what was output);
    a disagreement with the checkpoint is written to the timeline.
    """
    logged = log.next_positions()
    from_log = {p: logged.get(p, o) for p, o in earliest.items()}
    if store.kind == "checkpoint":
        return from_log
    stored = store.stored()
    positions = {p: stored.get(p, o) for p, o in earliest.items()}
    if positions != from_log:
        ctx.events.write(ev.OFFSETS_DISAGREE, store=store.kind, checkpoint=from_log, stored=positions)
    return positions
