"""One connection of Spark's socket receiver to the feeder: the lines on the wire and what was handed over.

The wire format
---------------
The feeder (:mod:`lab.pipelines.receiver.feed`) writes one line per Kafka
record, the sink's row and the event's key as text (:func:`encode_line`)::

    <event id> <seq> <partition> <offset> <key>\\n

:func:`record_line` makes it from a record with
:func:`lab.kafka.read.event_fields`, the lab's one record rule;
:func:`decode_line` turns a line the receiver stored back into the row.

Hand-over accounting (:class:`Epoch`)
-------------------------------------
An *epoch* is one accepted connection. Its send buffer holds encoded lines
not yet fully written to the socket, with each line's partition and offset.
A line counts as *handed over* once its last byte is written; handed-over
records are kept in send order, so "the first ``n`` records handed over" is
well defined, and :meth:`Epoch.offsets_through` gives, per partition, the
offset after the last of them: what the feeder commits once Spark reports
``n`` records of this epoch stored (``--ack stored``), or all it handed over
(``--ack auto``). A partly written line is never counted, and a graceful
close finishes it first, so no line is ever torn.

Delivery guarantee: none of its own; it records exactly which records were
handed over, so commits never name a record that was not.
"""

from __future__ import annotations

import bisect
import itertools
import select
import socket
import time
from array import array

from lab.kafka.read import event_fields


def encode_line(event_id: str, seq: int, partition: int, offset: int, key: str) -> bytes:
    """A sink row and the event's key as the line the receiver reads (the inverse of :func:`decode_line`,
    :func:`line_key`)."""
    return f"{event_id} {seq} {partition} {offset} {key}\n".encode()


def record_line(value: bytes, partition: int, offset: int) -> bytes:
    """The line for a Kafka record: :func:`lab.kafka.read.record_row`, encoded.

    Raises
    ------
    lab.kafka.read.NotALabEvent
        A value that is not a lab event, named by partition and offset.
    """
    event_id, seq, key = event_fields(value, partition, offset)
    return encode_line(event_id, seq, partition, offset, key)


def decode_line(line: str) -> tuple[str, int, int, int]:
    """A received line as a sink row ``(event_id, seq, partition, offset)``.

    Raises
    ------
    ValueError
        On a line the feeder did not write (for example a torn line).
    """
    event_id, seq, partition, offset, _ = line.split(" ", 4)
    return event_id, int(seq), int(partition), int(offset)


def line_key(line: str) -> str:
    """The event's key in a received line (what the receiver's ``window-count`` counts by)."""
    return line.split(" ", 4)[4]


class Epoch:
    """One connection of the receiver to the feeder."""

    def __init__(self, number: int, conn: socket.socket, accept_ms: int, released: bool) -> None:
        self.number = number
        self.conn: socket.socket | None = conn
        self.accept_ms = accept_ms
        self.accept_mono = time.monotonic()
        self.released = released
        self.release_ms: int | None = None
        self.graceful: bool | None = None  # set when the epoch ends
        self.start: dict[int, int] = {}
        # Records handed over (fully written to the socket), in send order.
        self.parts = array("i")
        self.offs = array("q")
        self.stored = 0  # how many of them Spark has reported stored
        self.scanned = 0  # how far next_offsets covers
        self.next_offsets: dict[int, int] = {}
        # Send buffer: bytes not yet written and the records whose lines they hold.
        self.clear_buffer()

    @property
    def handed_over(self) -> int:
        return len(self.parts)

    def has_unsent(self) -> bool:
        return self.out_pos < len(self.out)

    def unsent_bytes(self) -> int:
        return len(self.out) - self.out_pos

    def compact(self) -> None:
        """Drop the fully sent lines from the send buffer (a partly sent line stays whole)."""
        k = self.line_ends[self.line_i - 1] if self.line_i else 0
        if k == 0:
            return
        del self.out[:k]
        self.line_ends = array("q", (x - k for x in self.line_ends[self.line_i:]))
        self.line_parts = self.line_parts[self.line_i:]
        self.line_offs = self.line_offs[self.line_i:]
        self.line_i = 0
        self.out_pos -= k

    def mark_sent(self, n: int) -> None:
        """``n`` more bytes reached the socket: move the lines now complete to ``parts``/``offs``."""
        self.out_pos += n
        k = bisect.bisect_right(self.line_ends, self.out_pos, lo=self.line_i)
        if k > self.line_i:
            self.parts.extend(self.line_parts[self.line_i:k])
            self.offs.extend(self.line_offs[self.line_i:k])
            self.line_i = k
        if self.out_pos >= len(self.out):
            self.clear_buffer()

    def clear_buffer(self) -> None:
        self.out = bytearray()
        self.out_pos = 0
        self.line_ends = array("q")
        self.line_parts = array("i")
        self.line_offs = array("q")
        self.line_i = 0

    def add_records(self, partition: int, records) -> None:
        """Append the lines of kafka-python ``records`` of ``partition`` to the send buffer (:func:`record_line`)."""
        lines = [record_line(r.value, partition, r.offset) for r in records]
        self.line_ends.extend(itertools.accumulate(map(len, lines), initial=len(self.out)))
        del self.line_ends[len(self.line_ends) - len(lines) - 1]  # accumulate's initial value is not a line end
        self.out += b"".join(lines)
        self.line_parts.extend([partition] * len(lines))
        self.line_offs.extend([r.offset for r in records])

    def finish_line(self) -> None:
        """Complete a partly written line (blocking up to 5 s), so a graceful close never tears one."""
        line_start = self.line_ends[self.line_i - 1] if self.line_i else 0
        if self.line_i >= len(self.line_ends) or self.out_pos <= line_start:
            return
        end = self.line_ends[self.line_i]
        deadline = time.monotonic() + 5.0
        while self.out_pos < end and time.monotonic() < deadline:
            try:
                n = self.conn.send(self.out[self.out_pos:end])
            except (BlockingIOError, InterruptedError):
                select.select([], [self.conn], [], 0.05)
                continue
            except OSError:
                return
            self.mark_sent(n)

    def close(self, graceful: bool) -> int:
        """Close the connection and drop the unsent lines; returns how many were dropped.

        Graceful: finish the line in progress, then send FIN, so the receiver
        reads every line it was handed. Sets :attr:`graceful` to whether it was.
        """
        if graceful:
            self.finish_line()
            try:
                self.conn.shutdown(socket.SHUT_WR)
            except OSError:
                graceful = False
        close_quietly(self.conn)
        self.conn = None
        self.graceful = graceful
        unsent = len(self.line_ends) - self.line_i
        self.clear_buffer()
        return unsent

    def offsets_through(self, count: int) -> dict[int, int]:
        """Per partition, the offset after the last of the first ``count`` handed-over records."""
        count = min(count, len(self.parts))
        for i in range(self.scanned, count):
            self.next_offsets[self.parts[i]] = self.offs[i] + 1
        self.scanned = max(self.scanned, count)
        return dict(self.next_offsets)


def close_quietly(s: socket.socket) -> None:
    """Close a socket, ignoring errors (it may already be dead)."""
    try:
        s.close()
    except OSError:
        pass
