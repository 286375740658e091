"""Notebook 08's Storm tables: each batch the topology wrote, and what a replayed Trident transaction carried.

Plain data in, DataFrames out; every figure is read from a finished run's timeline
(:mod:`lab.pipelines.storm`'s ``batch-start``, ``batch-done``, ``storm-ack`` and
``storm-commit`` events), never restated.
"""

from __future__ import annotations

from lab import events as ev
from lab.events import read_events


def batches(result) -> pandas.DataFrame:  # noqa: F821
    """One row per batch the sink bolt (or Trident's state) wrote: its driver, txid, records, replays and answer.

    ``replayed``: records at offsets the run's drivers had written before (Storm's replays, seen in the sink);
    ``sink``: ``written``, or ``skipped`` (a txid the transactional sink had committed); ``failed``: tuples the
    bolt failed (``bolt-fail``); ``acked``: tuples it acked; ``committed``: whether Trident committed the txid.
    """
    import pandas as pd

    timeline = read_events(result.run_dir)
    acks = {(e.get("attempt"), e.get("batch")): e for e in timeline if e["type"] == ev.STORM_ACK}
    commits = {(e.get("attempt"), e.get("txid")) for e in timeline if e["type"] == ev.STORM_COMMIT}
    done = {(e.get("attempt"), e.get("batch")): e for e in timeline if e["type"] == ev.BATCH_DONE}
    rows = []
    for e in timeline:
        if e["type"] != ev.BATCH_START:
            continue
        key = (e.get("attempt"), e.get("batch"))
        d, a = done.get(key, {}), acks.get(key, {})
        rows.append({"driver": e.get("attempt"), "batch": e.get("batch"), "txid": e.get("txid"),
                     "records": e.get("rows"), "offsets (partition: from-until)": ", ".join(f"{p}: {r[0]}-{r[1]}"
                                                                  for p, r in sorted(e.get("ranges", {}).items())),
                     "replayed": e.get("replayed", 0), "sink": d.get("outcome", "killed before it returned"),
                     "failed": d.get("failed"), "acked": a.get("acked"),
                     "committed": ((e.get("attempt"),
                                    e.get("txid")) in commits) if e.get("txid") is not None else None})
    return pd.DataFrame(rows)


def replayed_transactions(result) -> pandas.DataFrame:  # noqa: F821
    """Each Trident txid emitted more than once: the offsets of its first and its replayed emission, and whether they
    match.

    KafkaTridentSpoutTransactional promises that a replayed txid carries the same records (it stores each
    batch's offsets in ZooKeeper before it emits them); ``same records`` checks that promise on the run.
    """
    import pandas as pd

    seen: dict = {}
    for e in read_events(result.run_dir):
        if e["type"] == ev.BATCH_START and e.get("txid") is not None:
            seen.setdefault(e["txid"], []).append(e)
    rows = []
    for txid, emitted in sorted(seen.items()):
        if len(emitted) < 2:
            continue
        first, again = emitted[0], emitted[-1]
        rows.append({"txid": txid, "first by driver": first.get("attempt"), "records": first.get("rows"),
                     "offsets": first.get("ranges"), "replayed by driver": again.get("attempt"),
                     "records replayed": again.get("rows"), "offsets replayed": again.get("ranges"),
                     "same records": first.get("ranges") == again.get("ranges")})
    return pd.DataFrame(rows)
