"""A share group's deliveries: how many times the broker gave each record, and which it archived.

The share pipeline's consumers write one line per record they get
(``share/deliveries-<consumer>-<pid>.jsonl``, :mod:`lab.pipelines.share_consumer`): partition,
offset, the broker's delivery count, the event's sequence number and id, and its
fate: ``written`` (its row went to the sink), ``held`` (its consumer was killed
holding it, nothing written) or ``poison`` (it killed its consumer).

Archived
--------
The broker archives a record delivered ``share.delivery.count.limit`` times
without an acknowledgement (KIP-932): dropped by the group's policy, never
delivered again. An acknowledged event with no sink row is **archived**, not
lost, when the consumers' lines show it delivered exactly the limit of times
and never written, and the group has settled its place (the partition's end
offset less the group's lag, :func:`lab.share.state.settled`, is past it). Those three facts
are measured; the audit counts such events apart (``archived``), and every
other event without a row as :mod:`lab.audit.auditor` says.

Dead-lettered
-------------
With ``--dlq on`` the broker also writes such a record to the group's dead-letter
topic (:mod:`lab.share.dlq`): an event whose partition and offset a dead-letter
record's headers name, and which has no sink row, is **dead-lettered**: moved,
kept, not archived. That the topic holds it is the whole test.

The pure core is :func:`delivery_table`, :func:`archived_mask` and :func:`dead_letter_mask`;
:func:`read_deliveries` reads the files and :func:`delivery_report` summarises for the run's report.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from lab import events as ev


def read_deliveries(run_dir: Path | str) -> list[dict]:
    """Every delivery line of a run's consumers (a torn last line, from a SIGKILL mid-write, is skipped)."""
    lines = []
    for path in sorted((Path(run_dir) / "share").glob("deliveries-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
    return lines


def delivery_table(lines: list[dict]) -> dict[int, dict]:
    """Per sequence number: ``deliveries`` (lines), ``highest`` delivery count, ``written`` (any), fates, where."""
    table: dict[int, dict] = {}
    for d in lines:
        if d.get("seq") is None:
            continue
        row = table.setdefault(int(d["seq"]), {"deliveries": 0, "highest": 0, "written": False, "fates": Counter(),
                                               "partition": d["p"], "offset": d["o"]})
        row["deliveries"] += 1
        row["highest"] = max(row["highest"], int(d.get("n") or 1))
        row["written"] = row["written"] or d.get("fate") == "written"
        row["fates"][d.get("fate")] += 1
    return table


def archived_mask(ledger_seq: np.ndarray, table: dict[int, dict], limit: int,
                  start_offsets: dict[int, int]) -> np.ndarray:
    """Aligned with the ledger: events delivered ``limit`` times, never written, below the group's settled offset."""
    out = np.zeros(len(ledger_seq), dtype=bool)
    for i, seq in enumerate(ledger_seq.tolist()):
        row = table.get(seq)
        if (row is not None and row["highest"] >= limit and not row["written"]
                and row["offset"] < start_offsets.get(row["partition"], 0)):
            out[i] = True
    return out


def _event_id(value: bytes | None) -> str | None:
    """The event id in a dead-letter record's copied value (None when only its headers were written)."""
    try:
        return json.loads(value)["id"]
    except (TypeError, ValueError, KeyError):
        return None


def dead_letter_mask(partition: np.ndarray, offset: np.ndarray, moved) -> np.ndarray:
    """Aligned with the ledger's ``partition`` and ``offset``: events at a place in ``moved`` (``{(p, o)}``)."""
    moved = set(moved)
    return np.fromiter(((int(p), int(o)) in moved for p, o in zip(partition.tolist(), offset.tolist())),
                       dtype=bool, count=len(partition))


def delivery_report(table: dict[int, dict], limit: int, start_offsets: dict[int, int], events: list[dict],
                    archived_seqs, dead_letters=None) -> dict:
    """The report's ``deliveries``: the histogram, the archived events, what each killed consumer held.

    ``histogram``: events by the highest delivery count any consumer saw (``{count: events}``);
    ``held``: records a ``consumer-crash`` killed its consumer holding, and how many times each was
    delivered in the end (``{count: records}``); ``archived``: the events counted archived;
    ``dead_lettered`` (with ``--dlq on``): every record of the dead-letter topic from this run's group, where it came
    from and how many deliveries the broker counted (:class:`lab.share.dlq.DeadLetter`).
    """
    by_place = {(row["partition"], row["offset"]): row for row in table.values()}
    seq_at = {(row["partition"], row["offset"]): seq for seq, row in table.items()}
    held = [(p, o) for e in events if e.get("type") == ev.CONSUMER_KILLED for p, o, _ in e.get("held") or ()]
    held_counts = Counter(by_place[k]["highest"] for k in held if k in by_place)
    archived = sorted(archived_seqs)
    return {
        "delivery_limit": limit,
        "histogram": {str(n): c for n, c in sorted(Counter(r["highest"] for r in table.values()).items())},
        "redelivered": sum(1 for r in table.values() if r["highest"] > 1),
        "held_by_killed_consumers": len(held),
        "held_delivery_counts": {str(n): c for n, c in sorted(held_counts.items())},
        "archived": [{"seq": s, "partition": table[s]["partition"], "offset": table[s]["offset"],
                      "deliveries": table[s]["deliveries"], "delivery_count": table[s]["highest"]} for s in archived],
        "group_settled_offsets": {str(p): o for p, o in sorted(start_offsets.items())},
        **({} if dead_letters is None else {"dead_lettered": [
            {"partition": d.partition, "offset": d.offset, "delivery_count": d.delivery_count,
             "dlq_offset": d.dlq_offset, "message": d.message,
             "seq": seq_at.get((d.partition, d.offset)),
             "deliveries": (by_place.get((d.partition, d.offset)) or {}).get("deliveries", 0),
             "event_id": _event_id(d.value)}
            for d in dead_letters]}),
    }


def poison_outcomes(events: list[dict], status_of: dict[int, str],
                    limit: int) -> tuple[tuple[str, str], tuple[str, str]]:
    """What became of a run's poison record, and how many deliveries it had first, in
    :data:`lab.audit.predictions.QUESTIONS`' words (``poison record``, ``poison deliveries``): ``(outcome, detail)``.

    ``events``: the run's timeline (its ``poison-killed`` events, one per delivery, and any ``dead-lettered``);
    ``status_of``: the audit's status per sequence number. The record is the first poison-killed one.

    Raises
    ------
    LabError
        When no poison record killed a consumer, or the audit has not placed it (the run could not show it).
    """
    from lab.errors import LabError

    kills = [e for e in events if e.get("type") == ev.POISON_KILLED]
    if not kills:
        raise LabError("no poison record killed a consumer in this run (no poison-killed event on its timeline)")
    first = kills[0]
    mine = [e for e in kills if (e["partition"], e["offset"]) == (first["partition"], first["offset"])]
    status = status_of.get(first["seq"])
    fate = {"dead-lettered": "dead-lettered", "archived": "archived", "lost": "lost", "exactly-once": "written",
            "duplicated": "written"}.get(status)
    if fate is None:  # unseen: the run ended before the group was done with it
        raise LabError(f"the poison record (seq {first['seq']}) is {status!r} in the audit: the run could not show "
                       "what became of it")
    place = (first["partition"], first["offset"])
    moved = any(e.get("type") == ev.DEAD_LETTERED and (e["partition"], e["offset"]) == place for e in events)
    fate_detail = (f"the audit counts it {status}" + ("; the dead-letter topic holds it" if moved else ""))
    n = max(int(e["delivery_count"]) for e in mine)
    count = ("the delivery limit's times" if n == limit else
             "fewer than the limit" if n < limit else "more than the limit")
    counts = ", ".join(str(e["delivery_count"]) for e in mine)
    return (fate, fate_detail), (count, f"delivered {n} times (delivery counts {counts}), each delivery killing its "
                                        f"consumer; the group's limit is {limit}")
