"""What each event the ledgered producer sends is: its id, its value's bytes, its event time.

Pure (no client, no I/O): the producer (:mod:`lab.run.producer`), its benchmark (``bench/producers.py``) and
the tests build the same events from the same seed. The value is the JSON object
``{"id", "seq", "key", "event_time_ms", "produced_at"}`` with compact separators, exactly the bytes
``json.dumps`` gives; every reader's rule for it is :func:`lab.kafka.read.event_fields`.
"""

from __future__ import annotations

import random

#: An event's value in the topic: what ``json.dumps(value, separators=(",", ":"))`` makes of
#: ``{"id", "seq", "key", "event_time_ms", "produced_at"}``, formatted in one step (1.2 us an event against
#: json.dumps's 4.9, 200,000 events): ints and a float print as JSON prints them (``%r`` is the float's repr,
#: as json's), and an id (a UUID) or a key (``k00``..``k63``) holds nothing JSON escapes.
EVENT_JSON = '{"id":"%s","seq":%d,"key":"%s","event_time_ms":%d,"produced_at":%r}'
#: Where the sequence number starts in a value: after ``{"id":"``, the 36 characters of a UUID and ``","seq":``.
SEQ_AT = len('{"id":"') + 36 + len('","seq":')


def event_value(event_id: str, seq: int, key: str, event_time_ms: int, produced_at: float) -> bytes:
    """An event's value as the topic holds it (the bytes ``json.dumps`` with compact separators gives)."""
    return (EVENT_JSON % (event_id, seq, key, event_time_ms, produced_at)).encode()


#: ``uuid.UUID(int=n, version=4)``'s bits: the version (4) and the variant (RFC 4122) set in ``n``.
_UUID4_KEEP = ~(0xf000 << 64) & ~(0xc000 << 48)
_UUID4_SET = (4 << 76) | (0x8000 << 48)


def event_ids(seed: int, count: int) -> list[str]:
    """The ids of a run's events, in sequence order (same seed, same ids): version-4 UUIDs of the seed's random bits.

    ``str(uuid.UUID(int=bits, version=4))``, formatted without a ``UUID`` object per event (0.8 against 2.0 us an
    id; a million-event run makes them before its first send).
    """
    bits = random.Random(seed).getrandbits
    hexes = ["%032x" % (bits(128) & _UUID4_KEEP | _UUID4_SET) for _ in range(count)]
    return [f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}" for h in hexes]


def seq_of(value: bytes) -> int:
    """The sequence number in an event's value (:func:`event_value`'s bytes), read at :data:`SEQ_AT`."""
    return int(value[SEQ_AT:value.index(b",", SEQ_AT)])


class LateEvents:
    """Which events the producer stamps with an old event time (``--late-fraction``, ``--late-by``).

    Drawn from their own random stream of the run's seed, so keys and ids are
    the same with and without late events.
    """

    def __init__(self, seed: int, fraction: float, late_by_s: float) -> None:
        self.rng = random.Random(seed + 2)
        self.fraction = fraction
        self.late_by_ms = int(round(late_by_s * 1000))

    def event_time_ms(self, now: float) -> int:
        """The event time of the next event (ms since the epoch): ``now``, or ``late_by`` before it."""
        stamp = int(now * 1000)
        if self.fraction and self.rng.random() < self.fraction:
            return stamp - self.late_by_ms
        return stamp
