"""The receiver feeder's parts without Spark or a broker: lines, hand-over accounting, group commits."""

import json
import socket
from types import SimpleNamespace

import pytest

from lab import events as ev
from lab.kafka.read import NotALabEvent
from lab.pipelines.receiver.commits import GroupOffsets
from lab.pipelines.receiver.epoch import Epoch, decode_line, line_key, record_line


def test_lines_carry_what_the_auditor_needs():
    value = json.dumps({"id": "0b0e5f0e-1d1d-4a4a-8b8b-0123456789ab", "seq": 42, "key": "k7", "produced_at": 1.5},
                       separators=(",", ":")).encode()
    line = record_line(value, 2, 977)
    assert decode_line(line.decode().rstrip("\n")) == ("0b0e5f0e-1d1d-4a4a-8b8b-0123456789ab", 42, 2, 977)
    assert line_key(line.decode().rstrip("\n")) == json.loads(value)["key"]
    assert record_line(json.dumps({"id": "short", "seq": 3, "key": "k"}).encode(), 0, 1) == b"short 3 0 1 k\n"
    with pytest.raises(NotALabEvent, match="record 0@1 is not a lab event"):
        record_line(b'{"id": "short", "seq": 3}', 0, 1)
    with pytest.raises(ValueError):
        decode_line("torn 3")


def _records(partition, offsets):
    return [SimpleNamespace(offset=o, value=json.dumps({"id": f"e{partition}-{o}", "seq": o, "key": "k"}).encode())
            for o in offsets]


def test_only_completely_written_lines_count_as_handed_over():
    a, b = socket.socketpair()
    try:
        e = Epoch(1, a, 0, released=True)
        e.add_records(0, _records(0, [10, 11]))
        e.add_records(2, _records(2, [5]))
        first = len(record_line(_records(0, [10])[0].value, 0, 10))
        e.mark_sent(first + 3)  # one whole line and part of the next
        assert e.handed_over == 1 and e.offsets_through(5) == {0: 11}
        e.mark_sent(e.unsent_bytes())
        assert e.handed_over == 3 and not e.has_unsent()
        assert e.offsets_through(2) == {0: 12}  # the first two records handed over
        assert e.offsets_through(3) == {0: 12, 2: 6}
    finally:
        a.close()
        b.close()


def test_a_graceful_close_finishes_the_line_in_progress():
    a, b = socket.socketpair()
    try:
        e = Epoch(1, a, 0, released=True)
        e.add_records(0, _records(0, [1, 2]))
        n = a.send(bytes(e.out[:4]))  # part of the first line is on the wire
        e.mark_sent(n)
        dropped = e.close(graceful=True)
        assert e.graceful and e.conn is None and dropped == 1 and e.handed_over == 1
        received = b.recv(1 << 16)
        assert received.count(b"\n") == 1 and decode_line(received.decode().rstrip("\n"))[3] == 1
    finally:
        b.close()


class _Consumer:
    """Stands in for the feeder's kafka-python consumer: commits succeed unless ``down``."""

    def __init__(self):
        self.down = False
        self.group = {}
        self.commits = []

    def commit(self, offsets):
        if self.down:
            raise ConnectionError("broker unreachable")
        self.commits.append({tp.partition: meta.offset for tp, meta in offsets.items()})
        self.group.update({tp.partition: meta.offset for tp, meta in offsets.items()})

    def committed(self, tp):
        if self.down:
            raise ConnectionError("broker unreachable")
        return self.group.get(tp.partition)

    def beginning_offsets(self, tps):
        return {tp: 0 for tp in tps}


class _Events:
    def __init__(self):
        self.written = []

    def write(self, type_, **fields):
        self.written.append((type_, fields.get("during")))


def test_group_commits_move_forward_only_and_retry_after_an_outage(monkeypatch):
    monkeypatch.setattr("lab.pipelines.receiver.commits.TROUBLE_BACKOFF_S", 0)
    consumer, events, seen = _Consumer(), _Events(), []
    group = GroupOffsets(consumer, "t", 2, events, seen.append)
    assert group.refresh() and group.committed == {0: 0, 1: 0}
    group.commit({0: 5})
    group.commit({0: 3, 1: 0})  # backwards and unchanged: nothing to commit
    assert consumer.commits == [{0: 5}] and seen == [{0: 5, 1: 0}]
    consumer.down = True
    group.commit({1: 7})
    group.commit({0: 9})
    assert group.pending == {0: 9, 1: 7} and not group.refresh()
    consumer.down = False
    group.commit({})
    assert consumer.commits[-1] == {0: 9, 1: 7} and group.pending == {} and seen[-1] == {0: 9, 1: 7}
    assert events.written == [(ev.RECEIVER_BROKER_ERROR, "committing"),
                              (ev.RECEIVER_BROKER_ERROR, "reading committed offsets"),
                              (ev.RECEIVER_BROKER_OK, "committing")]
