"""The final read's audit: every send the producer made, against what the topic holds at the end.

After a run the lab reads every partition of the run's topic from its earliest
offset with a fresh consumer (:func:`lab.kafka.tools.topic_copies`: Jepsen's
final read). This module classifies each send of the ledger by its outcome at
the producer and its copies in that read, with no pipeline in between, so it
says what the broker kept of what it acknowledged:

``present_once``     acknowledged, one copy in the topic
``duplicated``       acknowledged, more than one copy (a retry the broker had already written)
``lost``             acknowledged, no copy: the broker said it was stored and it is gone
``failed_sends``     the producer was told the send failed; ``failed_in_topic`` of them are there anyway
``unknown_sends``    the producer never learnt (timeout, in flight at the end); ``unknown_in_topic`` are there
``unexpected``       records in the topic whose id no send of the ledger has

Delivery guarantee: none; it counts. Sends of aborted transactions are counted
by :mod:`lab.run.result` (``aborted_in_topic``), not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lab.audit.ledger import sends_frame

if TYPE_CHECKING:
    import pandas as pd  # imported where used, as in lab.audit.auditor

#: Columns of ``topic_lost.csv``: the acknowledged sends missing from the final read.
LOST_COLUMNS = ("event_id", "seq", "key", "partition", "kafka_offset", "sent_at", "done_at")


@dataclass(frozen=True)
class TopicAudit:
    """Counts of the final read against the ledger (see the module docstring); ``read`` is the records read."""

    read: int
    acked: int
    present_once: int
    duplicated: int
    lost: int
    failed_sends: int
    failed_in_topic: int
    unknown_sends: int
    unknown_in_topic: int
    unexpected: int


def topic_audit_core(sends: pd.DataFrame, copies: dict[str, int]) -> tuple[TopicAudit, pd.DataFrame]:
    """Classify ``sends`` (the ledger: columns ``event_id``, ``status`` and :data:`LOST_COLUMNS`) by ``copies``.

    ``copies`` maps an event id to its number of records in the final read.
    Returns the counts and the lost sends (acknowledged, no copy), in send order.
    """
    n = sends["event_id"].map(lambda eid: copies.get(eid, 0)).fillna(0).astype(int)
    acked = sends["status"] == "acked"
    failed = sends["status"] == "failed"
    unknown = sends["status"] == "unknown"
    lost = sends[acked & (n == 0)].sort_values("seq")
    audit = TopicAudit(
        read=int(sum(copies.values())),
        acked=int(acked.sum()),
        present_once=int((acked & (n == 1)).sum()),
        duplicated=int((acked & (n > 1)).sum()),
        lost=len(lost),
        failed_sends=int(failed.sum()),
        failed_in_topic=int((failed & (n > 0)).sum()),
        unknown_sends=int(unknown.sum()),
        unknown_in_topic=int((unknown & (n > 0)).sum()),
        unexpected=len(set(copies) - set(sends["event_id"])),
    )
    return audit, lost[list(LOST_COLUMNS)].reset_index(drop=True)


def audit_topic(run_dir: Path, ledger_path: Path, copies: dict[str, list]) -> TopicAudit:
    """:func:`topic_audit_core` of a run; writes ``topic_lost.csv`` into ``run_dir``.

    ``copies`` is :func:`lab.kafka.tools.topic_copies`'s answer (``{id: [copies, partition, offset]}``).
    """
    audit, lost = topic_audit_core(sends_frame(ledger_path), {eid: c[0] for eid, c in copies.items()})
    lost.to_csv(Path(run_dir) / "topic_lost.csv", index=False)
    return audit
