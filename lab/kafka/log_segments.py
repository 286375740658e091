"""What a broker's log holds of transactions: each record batch's producer id and epoch, read from its segment files.

A Kafka partition's log is a directory of segments (``<base offset>.log``); each segment is a sequence of record
batches (Apache Kafka's "Record Batch" format, magic 2). A batch's header names the producer that wrote it
(``producerId``, ``producerEpoch``) and whether it is transactional and a control batch. A control batch holds one
record, the transaction's end marker, whose key says COMMIT or ABORT; the coordinator has it written with the
epoch the transaction ended under. These are the broker's own records of each transaction (what
``kafka-dump-log.sh`` prints), read here without a JVM.

Transactions v2 (KIP-890 part 2, ``transaction.version`` 2 on the broker, and a client that ends transactions with
``EndTxn`` version 5 or later) bump the producer's epoch at every transaction's end: the marker is written with
epoch e + 1, and the producer's next transaction writes under e + 1. A client on the older protocol keeps one epoch
for all its transactions (:func:`epochs_per_producer` tells the two apart).

The pure core is :func:`read_batches` (bytes to batch headers) and :func:`transactions_of`; the rest reads a
partition's files. Delivery guarantee: none; it reads files the broker writes and changes nothing. A batch the
broker is still appending (the active segment's tail) is left out, never half read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

#: The record batch header's fixed part: base offset, length, leader epoch, magic, CRC, attributes, last offset
#: delta, base and max timestamps, producer id and epoch, base sequence, record count (61 bytes).
_HEADER = struct.Struct(">qiibIhiqqqhii")
#: Attribute bits of a batch (Kafka's ``RecordBatch``).
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
#: A control record's type (its key's second int16).
MARKERS = {0: "ABORT", 1: "COMMIT"}


@dataclass(frozen=True)
class Batch:
    """One record batch's header, and for a control batch its marker (``COMMIT`` or ``ABORT``)."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    control: bool
    records: int
    marker: str | None = None
    base_sequence: int = -1


@dataclass(frozen=True)
class Transaction:
    """One transaction of one producer as one partition's log holds it: its data batches and the marker that ended
    it (``outcome`` None while it is open)."""

    partition: int
    producer_id: int
    data_epochs: tuple[int, ...]
    marker_epoch: int | None
    outcome: str | None
    first_offset: int
    last_offset: int
    records: int


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint at ``at``: ``(value, next position)``."""
    shift = value = 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7


def _marker(buf: bytes, records_at: int) -> str | None:
    """The end marker in a control batch's first record (uncompressed: control batches are never compressed)."""
    try:
        at = _varint(buf, records_at)[1]  # the record's length
        at += 1  # its attributes
        at = _varint(buf, at)[1]  # timestamp delta
        at = _varint(buf, at)[1]  # offset delta
        key_length, at = _varint(buf, at)
        if key_length < 4:
            return None
        _, kind = struct.unpack_from(">hh", buf, at)
        return MARKERS.get(kind, f"type {kind}")
    except (IndexError, struct.error):
        return None


def read_batches(buf: bytes) -> list[Batch]:
    """Every complete magic-2 record batch in a segment's bytes, in log order; a torn tail is left out."""
    out = []
    at = 0
    while at + _HEADER.size <= len(buf):
        (base, length, _, magic, _, attrs, last_delta, _, _, pid, epoch, sequence, count) = _HEADER.unpack_from(buf,
                                                                                                              at)
        end = at + 12 + length  # the length counts the bytes after itself
        if length <= 0 or end > len(buf) or magic != 2:
            break
        control = bool(attrs & CONTROL_BIT)
        out.append(Batch(base, base + last_delta, pid, epoch, bool(attrs & TRANSACTIONAL_BIT), control, count,
                         _marker(buf, at + _HEADER.size) if control else None, sequence))
        at = end
    return out


def transactions_of(partition: int, batches: list[Batch]) -> list[Transaction]:
    """The transactions in one partition's batches: per producer id, the transactional data batches since its last
    marker, closed by the next marker (a marker with no data before it, as an abort of an empty transaction writes,
    is a transaction of no records). A producer's batches after its last marker are one open transaction."""
    open_: dict[int, list[Batch]] = {}
    out = []
    for b in batches:
        if not b.transactional:
            continue
        if not b.control:
            open_.setdefault(b.producer_id, []).append(b)
            continue
        data = open_.pop(b.producer_id, [])
        out.append(Transaction(partition, b.producer_id, tuple(sorted({d.producer_epoch for d in data})),
                               b.producer_epoch, b.marker, (data[0] if data else b).base_offset, b.last_offset,
                               sum(d.records for d in data)))
    for pid, data in open_.items():
        out.append(Transaction(partition, pid, tuple(sorted({d.producer_epoch for d in data})), None, None,
                               data[0].base_offset, data[-1].last_offset, sum(d.records for d in data)))
    return sorted(out, key=lambda t: (t.partition, t.first_offset))


def epochs_per_producer(transactions: list[Transaction]) -> dict[int, dict]:
    """Per producer id: its ended transactions with records (on the partition that holds most), the epochs its data
    was written under, and how many markers were written with an epoch above their data's (transactions v2's bump).

    ``new_epoch_per_transaction``: every ended transaction's marker is above its data's epoch, and no two of them
    share a data epoch; ``one_epoch``: all its data under a single epoch.
    """
    out: dict[int, dict] = {}
    for pid in sorted({t.producer_id for t in transactions}):
        mine = [t for t in transactions if t.producer_id == pid and t.records and t.outcome is not None]
        per_partition: dict[int, list[Transaction]] = {}
        for t in mine:
            per_partition.setdefault(t.partition, []).append(t)
        widest = max(per_partition.values(), key=len, default=[])
        epochs = sorted({e for t in mine for e in t.data_epochs})
        bumped = [t for t in mine
                  if t.marker_epoch is not None and t.data_epochs and t.marker_epoch > max(t.data_epochs)]
        out[pid] = {"transactions": len(widest), "data_epochs": epochs, "markers_above_data": len(bumped),
                    "markers": len(mine),
                    "new_epoch_per_transaction": bool(widest) and len(bumped) == len(mine)
                    and len({t.data_epochs for t in widest}) == len(widest),
                    "one_epoch": len(epochs) == 1}
    return out


def partition_dirs(data_dir: Path | str, topic: str) -> dict[int, Path]:
    """``{partition: directory}`` of ``topic`` under a broker's data directory (``log.dirs``)."""
    out = {}
    for d in Path(data_dir).glob(f"{topic}-*"):
        suffix = d.name[len(topic) + 1:]
        if suffix.isdigit() and d.is_dir():
            out[int(suffix)] = d
    return out


def read_partition(directory: Path | str) -> list[Batch]:
    """Every batch of one partition's log, its segments in offset order."""
    segments = sorted(Path(directory).glob("*.log"), key=lambda f: int(f.stem) if f.stem.isdigit() else -1)
    return [b for f in segments for b in read_batches(f.read_bytes())]


def topic_transactions(data_dir: Path | str, topic: str) -> list[Transaction]:
    """The transactions of every partition of ``topic`` in a broker's data directory (:func:`transactions_of`)."""
    dirs = sorted(partition_dirs(data_dir, topic).items())
    return [t for p, d in dirs for t in transactions_of(p, read_partition(d))]
