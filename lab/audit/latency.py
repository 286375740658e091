"""Per-record latency of an output topic: from the producer's send to the sink's write of the record's first copy.

For every event in the output topic the latency is its first copy's Kafka
timestamp (CreateTime: when the sink's producer sent it) less the ledger's
``sent_at`` (when the lab's producer sent the input record); both clocks are
this host's. A transactional sink's record is readable only once its
transaction commits, later than its timestamp says: this is the write's
latency, not the visibility's. Events written twice count by their first
copy; the second copy's delay is what a replay costs, not how long a record
waits.

``steady_*`` count only events sent after the first output record and before
the run's first fault: the records sent while the pipeline started wait for
its start, and those sent around a crash for its recovery, not for the pipeline.

Delivery guarantee: none; it measures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

#: The percentiles the report gives.
PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class Latency:
    """Latency in milliseconds over ``events`` first copies (``None`` fields when there are none)."""

    events: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    steady_events: int = 0
    steady_p50_ms: float | None = None
    steady_p95_ms: float | None = None


def first_copy_latency_ms(event_ids, timestamps_ms, sent_at_s: dict[str, float]) -> dict[str, float]:
    """``{event id: ms}`` from each event's earliest output timestamp to its send (ids not in ``sent_at_s`` skipped)."""
    first: dict[str, int] = {}
    for eid, ts in zip(event_ids, timestamps_ms):
        if eid in sent_at_s and (eid not in first or ts < first[eid]):
            first[eid] = int(ts)
    return {eid: ts - sent_at_s[eid] * 1000.0 for eid, ts in first.items()}


def latency_core(event_ids, timestamps_ms, sent_at_s: dict[str, float], until_s: float | None = None) -> Latency:
    """The summary of :func:`first_copy_latency_ms` (module docstring); ``until_s``: the first fault's time."""
    by_event = first_copy_latency_ms(event_ids, timestamps_ms, sent_at_s)
    values = np.array(list(by_event.values()), dtype=float)
    if values.size == 0:
        return Latency(0, None, None, None, None)
    p = np.percentile(values, PERCENTILES)
    first_out_s = min(sent_at_s[eid] + ms / 1000.0 for eid, ms in by_event.items())
    steady = np.array([ms for eid, ms in by_event.items()
                       if sent_at_s[eid] >= first_out_s and (until_s is None or sent_at_s[eid] < until_s)], dtype=float)
    sp = np.percentile(steady, (50, 95)) if steady.size else (None, None)
    return Latency(int(values.size), *(round(float(x), 1) for x in p), round(float(values.max()), 1),
                   int(steady.size), *(None if x is None else round(float(x), 1) for x in sp))


def topic_latency(sink, sends, until_s: float | None = None) -> dict | None:
    """The report's ``latency`` of a :class:`lab.sinks.topic.TopicSink` read_committed, against ``sends`` (the
    ledger's frame; ``until_s``: the first fault's time); ``None`` when the view has no timestamps (a snapshot
    saved before they were kept)."""
    ids = sink.view("read_committed")[1]
    times = sink.timestamps("read_committed")
    if len(times) != len(ids):
        return None
    acked = sends[sends["status"] == "acked"]
    sent = dict(zip(acked["event_id"], acked["sent_at"].astype(float)))
    return asdict(latency_core(ids, times, sent, until_s))
