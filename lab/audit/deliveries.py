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

The pure core is :func:`delivery_table` and :func:`archived_mask`; :func:`read_deliveries`
reads the files and :func:`delivery_report` summarises for the run's report.
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


def delivery_report(table: dict[int, dict], limit: int, start_offsets: dict[int, int], events: list[dict],
                    archived_seqs) -> dict:
    """The report's ``deliveries``: the histogram, the archived events, what each killed consumer held.

    ``histogram``: events by the highest delivery count any consumer saw (``{count: events}``);
    ``held``: records a ``consumer-crash`` killed its consumer holding, and how many times each was
    delivered in the end (``{count: records}``); ``archived``: the events counted archived.
    """
    by_place = {(row["partition"], row["offset"]): row for row in table.values()}
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
    }
