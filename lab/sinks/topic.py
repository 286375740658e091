"""The ``topic`` sink: the kafka-eos pipeline's output topic, read the way the auditor reads a sink.

The ``kafka-eos`` pipeline (:mod:`lab.pipelines.kafka_eos`) writes every input
record, transformed, to ``<topic>.out`` (:func:`output_topic`) inside a Kafka
transaction that also carries the consumed offsets. What a reader of that
topic gets depends on its isolation level, so the audit reads it twice:

``read_committed``    the records of committed transactions only: the output
                      as a downstream consumer that honours transactions sees
                      it. These are the sink's stored rows, audited per event
                      against the ledger (``lost``, ``duplicated``,
                      ``exactly_once`` as for every other sink).
``read_uncommitted``  every record in the log, those of aborted transactions
                      included (a killed driver's open transaction, aborted by
                      its successor's ``init_transactions()``). These are the
                      sink's write attempts, so an event whose aborted copy is
                      in the log counts as "written twice, stored once"
                      (``absorbed_rewrites``).

:meth:`TopicSink.view_counts` gives the report's side-by-side counts
(``read_committed_records``, ``read_uncommitted_records``,
``read_uncommitted_duplicated``, ``read_uncommitted_extra_copies``,
``aborted_output_records``).

Window counts
-------------
The structured pipeline's ``--query window-count`` into Spark's Kafka sink
writes counts, not events: one record per change of a (window, key)'s running
count (:func:`lab.pipelines.structured.kafka_sink.window_updates`). The sink
then reads the topic as a table is read from an ``update`` stream, the last
count of each (window, key) in the log (:meth:`TopicSink.window_counts`, audited
per window by :mod:`lab.audit.window`), and counts the updates sent again
(``resent_updates``: records whose window, key and count an earlier record
already had; a running count never repeats a value, so only a batch run again
repeats one).

Where it is
-----------
``sink.json`` holds the run directory only: the supervisor writes it before
the broker runs, so the topic (``config.json``) and the bootstrap address
(``broker.json``, rewritten after a broker restart) are read when the sink is
first read, not when it is opened. The final audit keeps both views in the run
directory (:data:`SNAPSHOT_FILE`), and every later read of the finished run's
sink (a notebook, a live audit after the end) gets them from there: the
broker a run started is stopped with it.

Delivery guarantee
------------------
None of its own: it reads. Each partition is read from its beginning to the
end offset a consumer at that isolation level lists (Apache Kafka: the high
watermark for ``read_uncommitted``, the last stable offset for
``read_committed``), records beyond it ignored: one consistent snapshot, and
a transaction still open never holds a ``read_committed`` read up (it would
until the transaction timeout, 60 s).

On failure
----------
A topic that does not exist yet (the driver creates it) reads as empty; it is
looked up without creating it (Kafka's ``auto.create.topics.enable`` is on by
default, and a metadata request naming a missing topic would create it with
one partition before the driver creates it with the run's count). A record
that is not a lab event counts as an unexpected row (sequence number -1),
never raises. :class:`TimeoutError` when the topic cannot be read to its end
offset within ``timeout_s`` (the broker is away).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from lab.kafka import tools as kafka_tools

#: What the output topic's name adds to the input topic's.
OUTPUT_SUFFIX = ".out"
#: The two ways the output topic is read.
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
#: Both views as the final audit read them, in the run directory: the finished run's sink.
SNAPSHOT_FILE = "output-topic.json"


def output_topic(topic: str) -> str:
    """The kafka-eos pipeline's output topic for input ``topic``."""
    return f"{topic}{OUTPUT_SUFFIX}"


def event_key(value: bytes | None) -> tuple[int, str]:
    """``(seq, event id)`` of an output record's value; ``(-1, <the value>)`` for one that is not a lab event."""
    from lab.kafka.read import NotALabEvent, event_fields

    try:
        eid, seq, _ = event_fields(value, -1, -1)
        return seq, eid
    except NotALabEvent:
        return -1, repr(value)[:80]


def view_counts(ids, prefix: str) -> dict[str, int]:
    """Records, events with more than one copy, and the surplus copies among ``ids`` (one entry per record)."""
    copies = Counter(ids)
    dup = [n for n in copies.values() if n > 1]
    return {f"{prefix}_records": int(sum(copies.values())), f"{prefix}_duplicated": len(dup),
            f"{prefix}_extra_copies": int(sum(n - 1 for n in dup))}


def read_view(bootstrap: str, topic: str, isolation_level: str,
              timeout_s: float = 60.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every record of ``topic`` a reader at ``isolation_level`` gets: aligned ``seq`` (int64), ``event_id`` and
    ``timestamp`` (int64, the record's Kafka timestamp in ms: CreateTime, when the sink's producer sent it) arrays.

    Raises
    ------
    TimeoutError
        When the topic cannot be read to its end offsets within ``timeout_s``.
    """
    from kafka import TopicPartition

    if isolation_level not in ISOLATION_LEVELS:
        raise ValueError(f"isolation_level must be one of {ISOLATION_LEVELS}, got {isolation_level!r}")
    c = kafka_tools.bulk_consumer(bootstrap, isolation_level, allow_auto_create_topics=False)
    seqs: list[int] = []
    ids: list[str] = []
    times: list[int] = []
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
        if tps:
            for r in kafka_tools.read_to_end(c, c.end_offsets(tps), timeout_s, f"{topic} ({isolation_level})"):
                seq, eid = event_key(r.value)
                seqs.append(seq)
                ids.append(eid)
                times.append(r.timestamp)
    finally:
        c.close()
    return np.array(seqs, dtype=np.int64), np.array(ids, dtype=object), np.array(times, dtype=np.int64)


def window_record(value: bytes | None) -> tuple[int, int, str, int] | None:
    """``(window_start, window_end, key, count)`` of a ``window-count`` output record; None for any other record."""
    try:
        d = json.loads(value)
        return int(d["window_start"]), int(d["window_end"]), str(d["key"]), int(d["count"])
    except (TypeError, ValueError, KeyError):
        return None


def last_counts(rows) -> list[tuple[int, int, str, int]]:
    """The last count of each (window, key) among ``rows`` ``(partition, offset, window_start, window_end, key,
    count)``, in log order: what a reader keeping the newest update of each has at the end."""
    last: dict[tuple[int, str], tuple[int, int, str, int]] = {}
    for _, _, start, end, key, count in sorted(rows, key=lambda r: (r[0], r[1])):
        last[(start, key)] = (start, end, key, count)
    return [last[k] for k in sorted(last)]


def resent_updates(rows) -> int:
    """Updates among ``rows`` whose (window, key, count) an earlier one already had: sent again."""
    return len(rows) - len({(r[2], r[4], r[5]) for r in rows})


def read_windows(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[tuple]:
    """Every ``window-count`` record of ``topic``: ``(partition, offset, window_start, window_end, key, count,
    timestamp)`` (the Kafka timestamp in ms), read to the end offsets (:func:`lab.kafka.tools.read_to_end`).

    Spark's Kafka sink writes no transactions: both isolation levels read the same records.
    """
    from kafka import TopicPartition

    c = kafka_tools.bulk_consumer(bootstrap, "read_committed", allow_auto_create_topics=False)
    out = []
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
        if tps:
            for r in kafka_tools.read_to_end(c, c.end_offsets(tps), timeout_s, f"{topic} (window counts)"):
                w = window_record(r.value)
                if w is not None:
                    out.append((r.partition, r.offset, *w, r.timestamp))
    finally:
        c.close()
    return out


class TopicSink:
    """A :class:`lab.sinks.spec.SinkReader` over a run's output topic: stored rows read_committed, attempts
    read_uncommitted.

    Each view is read once per instance, on first use (open one per audit).
    """

    mode = "topic"

    def __init__(self, spec, timeout_s: float = 60.0) -> None:
        self.spec = spec
        self.run_dir = Path(spec.path)
        self.timeout_s = timeout_s
        self._views: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._windows: list[tuple] | None = None
        self._holds_windows: bool | None = None  # read from config.json once it exists

    @property
    def topic(self) -> str:
        return output_topic(json.loads((self.run_dir / "config.json").read_text())["topic"])

    @property
    def holds_windows(self) -> bool:
        """Whether the run writes window counts (``--query window-count``) rather than events (False before the run
        has its config)."""
        if self._holds_windows is None:
            path = self.run_dir / "config.json"
            if not path.exists():
                return False
            self._holds_windows = json.loads(path.read_text()).get("query") == "window-count"
        return self._holds_windows

    def windows(self) -> list[tuple]:
        """The topic's window-count records (:func:`read_windows`), from the snapshot once the final audit saved
        it; empty before the broker runs."""
        if self._windows is None and (self.run_dir / SNAPSHOT_FILE).exists():
            saved = json.loads((self.run_dir / SNAPSHOT_FILE).read_text())
            if "windows" in saved:
                self._windows = [tuple(r) for r in saved["windows"]]
        if self._windows is None:
            broker = self.run_dir / "broker.json"
            if not broker.exists():
                return []
            self._windows = read_windows(json.loads(broker.read_text())["bootstrap"], self.topic, self.timeout_s)
        return self._windows

    def window_counts(self) -> list[tuple[int, int, str, int]]:
        """The last count of each (window, key) in the topic (:func:`last_counts`)."""
        return last_counts([r[:6] for r in self.windows()])

    def view(self, isolation_level: str) -> tuple[np.ndarray, np.ndarray]:
        """``(seq, event_id)`` arrays of every record a reader at ``isolation_level`` gets.

        From the final audit's :data:`SNAPSHOT_FILE` once it exists (the run's broker may be gone
        by then), else from the topic; empty before the broker runs.
        """
        return self._view(isolation_level)[:2]

    def timestamps(self, isolation_level: str = "read_committed") -> np.ndarray:
        """The records' Kafka timestamps (ms), aligned with :meth:`view` (empty for a snapshot saved without them)."""
        return self._view(isolation_level)[2]

    def _view(self, isolation_level: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if isolation_level not in self._views and (self.run_dir / SNAPSHOT_FILE).exists():
            saved = json.loads((self.run_dir / SNAPSHOT_FILE).read_text()).get("views", {})
            self._views = {level: (np.array(v["seq"], dtype=np.int64), np.array(v["event_id"], dtype=object),
                                   np.array(v.get("timestamp", []), dtype=np.int64))
                           for level, v in saved.items()}
        if isolation_level not in self._views:
            broker = self.run_dir / "broker.json"
            if not broker.exists():  # opened before the broker runs (the supervisor checks every sink at start)
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64)
            bootstrap = json.loads(broker.read_text())["bootstrap"]
            self._views[isolation_level] = read_view(bootstrap, self.topic, isolation_level, self.timeout_s)
        return self._views[isolation_level]

    # -- SinkReader --------------------------------------------------------
    def event_rows(self) -> tuple[np.ndarray, np.ndarray]:
        return self.view("read_committed")

    def attempt_seqs(self) -> np.ndarray:
        return self.view("read_uncommitted")[0]

    def event_counts(self) -> list[tuple[str, int]]:
        return sorted(Counter(self.view("read_committed")[1]).items())

    def totals(self) -> dict[str, int]:
        if self.holds_windows:
            rows = len(self.windows())
            return {"stored_rows": rows, "write_attempts": rows, "window_rows": rows}
        return {"stored_rows": len(self.view("read_committed")[0]),
                "write_attempts": len(self.view("read_uncommitted")[0]), "window_rows": 0}

    def view_counts(self) -> dict:
        """The report's counts of both views, side by side, and the output topic's name; for window counts, the
        updates and those sent again (:func:`resent_updates`)."""
        if self.holds_windows:
            rows = self.windows()
            return {"output_topic": self.topic, "window_updates": len(rows), "resent_updates": resent_updates(rows)}
        committed, everything = self.view("read_committed")[1], self.view("read_uncommitted")[1]
        out = {"output_topic": self.topic, "read_committed_records": len(committed),
               **view_counts(everything, "read_uncommitted")}
        # In the log, hidden from read_committed readers: aborted (or, in a live audit, not yet committed).
        out["aborted_output_records"] = out["read_uncommitted_records"] - len(committed)
        return out

    def save(self) -> Path:
        """Write both views (or the window counts) to :data:`SNAPSHOT_FILE`: what later reads of the finished run's
        sink get."""
        if self.holds_windows:
            return self._write_snapshot({"topic": self.topic, "windows": [list(r) for r in self.windows()]})
        views = {level: {"seq": self.view(level)[0].tolist(), "event_id": self.view(level)[1].tolist(),
                         "timestamp": self.timestamps(level).tolist()}
                 for level in ISOLATION_LEVELS}
        return self._write_snapshot({"topic": self.topic, "views": views})

    def _write_snapshot(self, content: dict) -> Path:
        path = self.run_dir / SNAPSHOT_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(content))
        tmp.replace(path)
        return path

    def close(self) -> None:
        self._views.clear()
        self._windows = None

    def __enter__(self) -> TopicSink:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
