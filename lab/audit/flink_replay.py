"""What a Flink restart writes twice, predicted from the run's own timeline, next to what the audit measured.

A restarted ``flink`` job reads its input again from the offsets it starts at
(the restored checkpoint's, written in ``flink-start`` as ``start_offsets``). Every
record the dead attempts left in the output topic *and* that came from at or past
those offsets is written a second time: at-least-once's duplicates are exactly
the records processed after the last completed checkpoint that reached the
output before the crash. With the exactly-once sink those records sat in open
transactions, which the restore aborts, so a ``read_committed`` reader sees none
of them and the prediction is 0.

:func:`predict` is the pure core: the ``flink-start`` events, the output topic's
records (``read_committed``: partition, offset, event id) and the input offset of
each acknowledged event (the ledger). :func:`replay_report` does the I/O around it
for the final report (``flink_replays``). The prediction is never copied into the
audit: the report shows both, and the tests compare them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from lab import events as ev
from lab.audit.ledger import acked_input_offsets


@dataclass(frozen=True)
class Restart:
    """One restart of the job and what it replays.

    Attributes
    ----------
    attempt : int
        The driver attempt that restarted the job.
    checkpoint : int or None
        The checkpoint it restored (``None``: none was complete; it started at the group's offsets).
    start_offsets : dict
        Per input partition, where the restarted job reads from.
    written_before : int
        Records the previous attempt left in the output topic (``read_committed``).
    replayed : int
        Of those, the ones from at or past ``start_offsets``: the restart writes each again.
    reread : int
        Acknowledged input records at or past ``start_offsets``: what the restart reads again (0: the restored
        checkpoint held the whole input, and the restart had nothing to process again).
    """

    attempt: int
    checkpoint: int | None
    start_offsets: dict
    written_before: int
    replayed: int
    reread: int = 0


def predict(starts: list[dict], out_records, input_of: dict[str, tuple[int, int]]) -> list[Restart]:
    """Per restart (every ``flink-start`` after the first), the records the restart will write again.

    ``starts`` are the ``flink-start`` events in timeline order (each with ``attempt``,
    ``restore_checkpoint``, ``start_offsets`` and ``out_end_offsets``: the output's end
    when that attempt began); ``out_records`` are ``(out partition, out offset, event
    id)``; ``input_of`` maps an event id to its input ``(partition, offset)``. A
    record written by the attempt before restart *k* lies between the output's ends
    at the starts of *k-1* and *k*. Records whose event the ledger does not know
    are not counted (the audit shows them as unexpected).
    """
    out = []
    for before, start in zip(starts, starts[1:]):
        lo = {int(p): int(o) for p, o in (before.get("out_end_offsets") or {}).items()}
        hi = {int(p): int(o) for p, o in (start.get("out_end_offsets") or {}).items()}
        begin = {int(p): int(o) for p, o in (start.get("start_offsets") or {}).items()}
        written = replayed = 0
        for part, offset, eid in out_records:
            if not lo.get(part, 0) <= offset < hi.get(part, 0):
                continue
            written += 1
            source = input_of.get(eid)
            if source is not None and source[1] >= begin.get(source[0], 0):
                replayed += 1
        reread = sum(1 for part, offset in input_of.values() if offset >= begin.get(part, 0))
        out.append(Restart(attempt=int(start.get("attempt", 0)), checkpoint=start.get("restore_checkpoint"),
                           start_offsets={str(p): o for p, o in sorted(begin.items())},
                           written_before=written, replayed=replayed, reread=reread))
    return out


def output_records(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> list[tuple[int, int, str]]:
    """``(partition, offset, event id)`` of every record of the output topic a ``read_committed`` reader gets."""
    from kafka import TopicPartition

    from lab.kafka import tools as kafka_tools

    ends = kafka_tools.end_offsets(bootstrap, topic, partitions)
    c = kafka_tools.bulk_consumer(bootstrap, "read_committed")
    out = []
    try:
        for r in kafka_tools.read_to_end(c, {TopicPartition(topic, p): ends[p] for p in range(partitions)},
                                         timeout_s, topic):
            try:
                out.append((r.partition, r.offset, json.loads(r.value)["id"]))
            except (ValueError, KeyError, TypeError):
                out.append((r.partition, r.offset, ""))
    finally:
        c.close()
    return out


def replay_report(run_dir: Path, events: list[dict], bootstrap: str, topic: str, partitions: int) -> dict:
    """The report's ``flink_replays``: each restart (:class:`Restart`) and ``predicted_extra_copies``, their sum."""
    from lab.audit.ledger import LEDGER_FILE

    starts = [e for e in events if e.get("type") == ev.FLINK_START]
    restarts = predict(starts, output_records(bootstrap, topic, partitions) if len(starts) > 1 else [],
                       acked_input_offsets(Path(run_dir) / LEDGER_FILE))
    return {"restarts": [asdict(r) for r in restarts],
            "predicted_extra_copies": sum(r.replayed for r in restarts)}
