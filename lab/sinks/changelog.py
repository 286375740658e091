"""Samza's changelog on Kafka: the kafka-eos pipeline's ``key-count`` state, its restore and its audit.

With ``--query key-count`` the kafka-eos driver (:mod:`lab.pipelines.kafka_eos`)
keeps a running count of events per key, as a Samza task keeps a logged store:

* a **local store**, :class:`LocalStore`: a SQLite file in the run directory,
  one per driver attempt (:func:`store_path`, ``state/attempt-N.sqlite``). A new
  attempt is a new host: its store starts empty;
* a **changelog**, ``<topic>.changelog`` (:func:`changelog_topic`), compacted
  (:data:`CHANGELOG_CONFIGS`), with the input's partition count. Per batch, each
  changed key's new count (key: the event key; value: :func:`change_value`, JSON
  with ``count``, ``batch`` and ``attempt``) is written to the partition of the
  input record that carried the key, **in the batch's transaction**, with its
  output records and its offsets;
* a **restore**: a driver, once ``init_transactions()`` has aborted a dead
  driver's open transaction, reads the changelog ``read_committed`` from the
  beginning to its end offsets and loads the last value per key
  (:func:`last_values`) into its empty store (:func:`restore`).

The audit (:func:`changelog_report`, the report's ``changelog`` section) reads
the changelog ``read_committed`` after the run and compares each key's last
count with the ledger's acknowledged events of that key
(:func:`changelog_audit_core`): ``keys_exact``, ``keys_over`` (``overcount``),
``keys_under`` (``undercount``). The pure core is :func:`last_values`,
:func:`batch_changes` and :func:`changelog_audit_core`; the rest is thin I/O.

Delivery guarantee
------------------
Exactly-once state: a batch's changelog writes commit or abort with its output
and its offsets, so the committed changelog always holds the counts of exactly
the batches whose offsets are committed, and a restore from it resumes where
the offsets resume. The local store is only written after the commit (an
aborted batch never reaches it), and never outlives its attempt, so it can
hold nothing the changelog does not. A ``read_uncommitted`` reader of the
changelog also gets the aborted writes (at least once, as for the output topic).

On failure
----------
A driver killed anywhere: its transaction (output, changelog writes, offsets)
is aborted by the next driver's ``init_transactions()``, which then restores a
new, empty store from the committed changelog. A changelog that cannot be read
to its end within the timeout raises :class:`TimeoutError` (in a driver: it exits
and is restarted; in the final audit: the run fails with it). A changelog record
that is not a count (no JSON, no integer ``count``) raises :class:`ValueError`
naming its partition and offset: state built from it would be wrong silently.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

from lab.kafka import tools as kafka_tools

#: What the changelog topic's name adds to the input topic's.
CHANGELOG_SUFFIX = ".changelog"
#: Topic configs the changelog is created with: compacted, as Samza creates its changelogs, so its
#: size is bounded by the number of keys, not by the number of updates (once the cleaner has run).
CHANGELOG_CONFIGS = {"cleanup.policy": "compact"}
#: Where the attempts' local stores live, in the run directory.
STATE_DIR = "state"
#: How the changelog is read.
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


class ChangelogRecord(NamedTuple):
    """One record of the changelog, as read."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class ChangelogAudit:
    """Per key, the changelog's last count against the ledger's acknowledged events (see the module docstring)."""

    keys: int
    keys_exact: int
    keys_over: int
    keys_under: int
    overcount: int
    undercount: int


def changelog_topic(topic: str) -> str:
    """The ``key-count`` changelog of input ``topic``."""
    return f"{topic}{CHANGELOG_SUFFIX}"


def store_path(run_dir: Path | str, attempt: int) -> Path:
    """Driver attempt ``attempt``'s local store."""
    return Path(run_dir) / STATE_DIR / f"attempt-{attempt}.sqlite"


def change_value(count: int, batch: int, attempt: int) -> bytes:
    """A changelog record's value: the key's new count, and which batch and attempt wrote it."""
    return json.dumps({"count": count, "batch": batch, "attempt": attempt}, separators=(",", ":")).encode()


# -- the pure core -------------------------------------------------------------------

def last_values(records: Iterable[ChangelogRecord]) -> dict[str, dict]:
    """Each key's last value in ``records`` (read order): a compacted log's meaning, before or after compaction.

    A tombstone (value ``None``) deletes its key. Each key's records are in one
    partition (the input's, which the producer's key partitioner chose), so per
    key the read order is the log's order.

    Raises
    ------
    ValueError
        A record without a key, or whose value is not JSON with an integer ``count``
        (the message names ``partition@offset``).
    """
    out: dict[str, dict] = {}
    for r in records:
        if r.key is None:
            raise ValueError(f"changelog record {r.partition}@{r.offset} has no key")
        key = r.key.decode() if isinstance(r.key, bytes) else str(r.key)
        if r.value is None:
            out.pop(key, None)
            continue
        try:
            value = json.loads(r.value)
            if not isinstance(value.get("count"), int):
                raise TypeError
        except (ValueError, TypeError, AttributeError):
            raise ValueError(f"changelog record {r.partition}@{r.offset} is not a count: {r.value[:80]!r}") from None
        out[key] = value
    return out


def batch_changes(keys: Iterable[str], counts: Mapping[str, int]) -> dict[str, int]:
    """The new count of each key in a batch (``keys``: one entry per event), from the store's ``counts`` before it."""
    return {key: counts.get(key, 0) + n for key, n in Counter(keys).items()}


def changelog_audit_core(expected: Mapping[str, int], measured: Mapping[str, int]) -> ChangelogAudit:
    """Compare ``measured`` (the changelog's last count per key) with ``expected`` (acknowledged events per key).

    A key in only one of them counts 0 in the other; a key with 0 in both is not counted.
    """
    keys = {k for k in set(expected) | set(measured) if expected.get(k, 0) or measured.get(k, 0)}
    diff = {k: measured.get(k, 0) - expected.get(k, 0) for k in keys}
    return ChangelogAudit(
        keys=len(keys),
        keys_exact=sum(1 for d in diff.values() if d == 0),
        keys_over=sum(1 for d in diff.values() if d > 0),
        keys_under=sum(1 for d in diff.values() if d < 0),
        overcount=sum(d for d in diff.values() if d > 0),
        undercount=-sum(d for d in diff.values() if d < 0),
    )


# -- the local store ------------------------------------------------------------------

class LocalStore:
    """One attempt's key-value store: ``key -> (count, batch)`` in a SQLite file.

    Written only after a batch's transaction committed (:meth:`put`), so it never
    holds an aborted batch's counts. It is not durable on purpose: a store is
    never reopened after a crash (the next attempt restores its own from the
    changelog), so syncing it to disk would buy nothing.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)  # a new host starts empty: the changelog is the only state it gets
        self.db = sqlite3.connect(self.path)
        self.db.execute("PRAGMA synchronous = OFF")
        self.db.execute("CREATE TABLE store (key TEXT PRIMARY KEY, count INTEGER NOT NULL, batch INTEGER NOT NULL)")
        self.db.commit()

    def counts(self, keys: Iterable[str]) -> dict[str, int]:
        """The stored count of each of ``keys`` that has one."""
        keys = sorted(set(keys))
        if not keys:
            return {}
        rows = self.db.execute(f"SELECT key, count FROM store WHERE key IN ({','.join('?' * len(keys))})", keys)
        return dict(rows.fetchall())

    def put(self, counts: Mapping[str, int], batch: int) -> None:
        """Store ``counts`` (key -> new count) as written by ``batch``, in one SQLite transaction."""
        with self.db:
            self.db.executemany("INSERT INTO store (key, count, batch) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE "
                                "SET count = excluded.count, batch = excluded.batch",
                                [(k, int(c), batch) for k, c in counts.items()])

    def all(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT key, count FROM store").fetchall())

    def close(self) -> None:
        self.db.close()


# -- reading the changelog --------------------------------------------------------------

def read_changelog(bootstrap: str, topic: str, isolation_level: str = "read_committed",
                   timeout_s: float = 60.0) -> list[ChangelogRecord]:
    """Every record of the changelog a reader at ``isolation_level`` gets, from the beginning to its end offsets.

    The end offsets are those a consumer at that isolation level lists (Apache
    Kafka: the last stable offset for ``read_committed``), so the read is one
    snapshot. A changelog that does not exist reads as empty (it is looked up
    without creating it).

    Raises
    ------
    TimeoutError
        When the changelog cannot be read to its end offsets within ``timeout_s``.
    """
    from kafka import TopicPartition

    from lab.errors import choices_error

    if isolation_level not in ISOLATION_LEVELS:
        raise choices_error("isolation level", isolation_level, ISOLATION_LEVELS)
    c = kafka_tools.bulk_consumer(bootstrap, isolation_level, allow_auto_create_topics=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
        if not tps:
            return []
        records = kafka_tools.read_to_end(c, c.end_offsets(tps), timeout_s, f"{topic} ({isolation_level})")
        return [ChangelogRecord(r.partition, r.offset, r.key, r.value) for r in records]
    finally:
        c.close()


def restore(store: LocalStore, bootstrap: str, topic: str, timeout_s: float = 60.0) -> dict:
    """Load the committed changelog's last value per key into ``store``; what the ``changelog-restore`` event says.

    Returns ``records`` read, ``keys`` restored, ``bytes`` (keys and values read)
    and ``took_s`` (the read and the load).
    """
    began = time.monotonic()
    records = read_changelog(bootstrap, topic, "read_committed", timeout_s)
    values = last_values(records)
    by_batch: dict[int, dict[str, int]] = {}
    for key, v in values.items():
        by_batch.setdefault(int(v.get("batch", -1)), {})[key] = v["count"]
    for batch, counts in by_batch.items():
        store.put(counts, batch)
    size = sum(len(r.key or b"") + len(r.value or b"") for r in records)
    return {"records": len(records), "keys": len(values), "bytes": size,
            "took_s": round(time.monotonic() - began, 4)}


# -- the audit ------------------------------------------------------------------------

def changelog_report(acked: Mapping[str, int], bootstrap: str, topic: str, timeline: list[dict]) -> dict:
    """The report's ``changelog`` section of a ``key-count`` run (input ``topic``).

    The audit of the committed changelog against ``acked``, the ledger's
    acknowledged sends per key (:func:`lab.audit.ledger.acked_per_key`: the
    caller reads the ledger, which belongs to the audit, above the sinks), the
    changelog's records at both isolation levels, and each driver's restore
    (from the ``changelog-restore`` events of ``timeline``).
    """
    from lab import events as ev

    name = changelog_topic(topic)
    committed = read_changelog(bootstrap, name, "read_committed")
    everything = read_changelog(bootstrap, name, "read_uncommitted")
    measured = {k: v["count"] for k, v in last_values(committed).items()}
    audit = changelog_audit_core(acked, measured)
    restores = [{k: e.get(k) for k in ("attempt", "records", "keys", "bytes", "took_s")}
                for e in timeline if e.get("type") == ev.CHANGELOG_RESTORE]
    return {"topic": name, **asdict(audit), "read_committed_records": len(committed),
            "read_uncommitted_records": len(everything), "restores": restores}
