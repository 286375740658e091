"""The broker's log read without a JVM: record batch headers, end markers, and transactions' epochs."""

from __future__ import annotations

import struct

from lab.kafka.log_segments import Transaction, epochs_per_producer, read_batches, transactions_of


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append(z & 0x7F | 0x80)
        z >>= 7


def batch(base: int, count: int, pid: int, epoch: int, transactional=True, marker: int | None = None) -> bytes:
    """A magic-2 batch as Kafka lays it out: ``count`` empty records, or one control record (0 abort, 1 commit)."""
    if marker is not None:
        key = struct.pack(">hh", 0, marker)
        body = b"\x00" + _varint(0) + _varint(0) + _varint(len(key)) + key + _varint(-1) + _varint(0)
        records = _varint(len(body)) + body
        count = 1
    else:
        records = b"".join(_varint(6) + b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(-1) + _varint(0)
                           for i in range(count))
    attrs = (0x10 if transactional else 0) | (0x20 if marker is not None else 0)
    rest = struct.pack(">ibIhiqqqhii", 0, 2, 0, attrs, count - 1, 0, 0, pid, epoch, 0, count) + records
    return struct.pack(">qi", base, len(rest)) + rest


def test_batches_are_read_with_their_producer_epoch_and_marker_and_a_torn_tail_is_left_out():
    log = batch(0, 3, 7, 0) + batch(3, 1, 7, 1, marker=1) + batch(4, 2, -1, -1, transactional=False)
    got = read_batches(log + batch(6, 2, 7, 1)[:30])
    assert [(b.base_offset, b.last_offset, b.producer_id, b.producer_epoch, b.control, b.marker) for b in got] == [
        (0, 2, 7, 0, False, None), (3, 3, 7, 1, True, "COMMIT"), (4, 5, -1, -1, False, None)]
    assert got[0].transactional and not got[2].transactional and got[0].records == 3


def test_transactions_pair_each_producers_records_with_its_next_marker():
    log = (batch(0, 3, 7, 0) + batch(3, 2, 8, 5) + batch(5, 1, 7, 1, marker=1) + batch(6, 1, 8, 5, marker=0)
           + batch(7, 2, 7, 1) + batch(9, 1, 7, 2, marker=1) + batch(10, 1, 7, 2))
    txns = transactions_of(0, read_batches(log))
    assert txns == [
        Transaction(0, 7, (0,), 1, "COMMIT", 0, 5, 3), Transaction(0, 8, (5,), 5, "ABORT", 3, 6, 2),
        Transaction(0, 7, (1,), 2, "COMMIT", 7, 9, 2), Transaction(0, 7, (2,), None, None, 10, 10, 1)]
    per = epochs_per_producer(txns)
    assert per[7]["new_epoch_per_transaction"] and per[7]["data_epochs"] == [0, 1] and per[7]["transactions"] == 2
    assert per[8]["one_epoch"] and not per[8]["new_epoch_per_transaction"] and per[8]["markers_above_data"] == 0


def test_one_epoch_for_every_transaction_is_the_older_protocol():
    log = b"".join(batch(3 * i, 2, 4, 0) + batch(3 * i + 2, 1, 4, 0, marker=1) for i in range(3))
    per = epochs_per_producer(transactions_of(1, read_batches(log)))[4]
    assert (per["transactions"], per["data_epochs"], per["one_epoch"], per["new_epoch_per_transaction"]) == \
        (3, [0], True, False)


def test_each_clients_answer_and_table_come_from_its_log():
    from lab.lessons.txn_epochs import ClientTransactions
    from lab.views.txn_epochs import epochs_figure, epochs_outcome, summary_table, transactions_table

    def client(name, epochs_and_markers):
        logged = [Transaction(0, 3, (e,), m, "COMMIT", 10 * i, 10 * i + 9, 9)
                  for i, (e, m) in enumerate(epochs_and_markers)]
        reported = [{"outcome": "COMMIT"} for _ in epochs_and_markers]
        return ClientTransactions(name, f"{name} 1.0", "t", reported, logged)

    v1, v2 = client("python", [(0, 0)] * 3), client("java", [(0, 1), (1, 2), (2, 3)])
    assert epochs_outcome(v1) == ("one epoch", "3 transactions, records written under epoch 0; 0 of 3 end "
                                               "markers one epoch above their records")
    assert epochs_outcome(v2)[0] == "a new epoch per transaction"
    assert epochs_outcome(client("odd", [(0, 0), (0, 0), (2, 2)]))[0] == "neither"
    table = transactions_table([v1, v2])
    assert list(table.loc["java 1.0", "end marker's epoch"]) == [1, 2, 3]
    assert summary_table([v1, v2]).loc["java", "data epochs"] == [0, 1, 2]
    assert len(epochs_figure([v1, v2]).data) == 4
