"""Notebook 08's tables: a flink run's checkpoints and restarts, a changelog's restore, the engines side by side.

Storm's own tables are in :mod:`lab.views.storm`.

Plain data in, DataFrames out; the notebook displays them. Every figure is read
from a finished run (its timeline and ``report.json``), never restated.
"""

from __future__ import annotations

from lab import events as ev
from lab.events import read_events
from lab.registry import PIPELINES

#: What each pipeline's recovery rests on, in the words of the engine's documentation.
MECHANISMS = {
    "flink": "checkpoint barriers (Chandy-Lamport snapshots); source offsets restored from the checkpoint",
    "kafka-eos": "offsets (and, with key-count, the state's changelog) sent inside the output's Kafka transaction",
    "structured": "offset log before the batch, commit log after it; the sink decides what is stored",
    "direct": "driver-planned offset ranges logged in the checkpoint",
    "receiver": "received blocks in the write-ahead log; offsets committed when stored",
    "plain": "the consumer group's committed offsets",
}
#: The storm pipeline's, by ``storm_mode``.
STORM_MECHANISMS = {
    "unacked": "no acker: the spout commits each poll's offsets before it emits",
    "acked": "tuple trees tracked by the acker; offsets committed for acked tuples, failed ones replayed",
    "trident": "Trident txids: each batch's offsets in ZooKeeper, the txid stored with the rows in the sink",
}


def events(result) -> list[dict]:
    """A run's timeline (``events.jsonl``)."""
    return read_events(result.run_dir)


def checkpoints(result) -> pandas.DataFrame:  # noqa: F821
    """One row per checkpoint that ended in ``result``'s run: when, how long, how big, how much was in flight."""
    import pandas as pd

    events = read_events(result.run_dir)
    t0 = next((e["t"] for e in events if e["type"] == ev.RUN_START), 0.0)
    rows = [{"driver": e.get("attempt"), "checkpoint": e.get("checkpoint"), "status": e.get("status"),
             "completed at (s)": round(e["ack_ms"] / 1000 - t0, 2) if e.get("ack_ms") else None,
             "duration (ms)": e.get("duration_ms"), "size (KB)": round((e.get("checkpointed_size") or 0) / 1024, 1),
             "in-flight records stored (KB)": round((e.get("persisted_data") or 0) / 1024, 1),
             "savepoint": bool(e.get("savepoint"))}
            for e in events if e["type"] == ev.FLINK_CHECKPOINT]
    return pd.DataFrame(rows)


def bigger_checkpoints(aligned, unaligned) -> tuple[str, str]:
    """Which run's largest completed checkpoint (savepoints aside) is bigger: ``aligned's`` or ``unaligned's``.

    Answers notebook 08's question (:data:`lab.audit.predictions.QUESTIONS`) from
    each run's own checkpoint statistics (:func:`checkpoints`); equal sizes count as ``aligned's``, since
    the question asks whether storing in-flight records makes unaligned checkpoints bigger.
    """
    def largest(result) -> float:
        cp = checkpoints(result)
        if cp.empty:
            return 0.0
        cp = cp[(cp["status"] == "completed") & ~cp["savepoint"]]
        return float(cp["size (KB)"].max()) if len(cp) else 0.0

    a, u = largest(aligned), largest(unaligned)
    return ("unaligned's" if u > a
            else "aligned's"), f"largest completed checkpoint: aligned {a:.1f} KB, unaligned {u:.1f} KB"


def restarts(result) -> pandas.DataFrame:  # noqa: F821
    """Per restart: the checkpoint restored, where it started reading, and the duplicates predicted vs measured."""
    import pandas as pd

    report = result.report
    rows = [{"driver": r["attempt"], "restored checkpoint": r["checkpoint"],
             "reads from (partition: offset)": ", ".join(f"{p}: {o}" for p, o in r["start_offsets"].items()),
             "input it reads again": r.get("reread", 0),
             "dead job's records in the output": r["written_before"],
             "of them past the checkpoint (written again)": r["replayed"]}
            for r in (report.get("flink_replays") or {}).get("restarts", [])]
    table = pd.DataFrame(rows)
    if not table.empty:
        table.attrs["measured extra copies"] = report["extra_copies"]
    return table


def changelog(result) -> pandas.DataFrame:  # noqa: F821
    """A ``key-count`` run's state (the report's ``changelog``): keys exact, over and under, and each restore."""
    import pandas as pd

    c = result.report.get("changelog") or {}
    rows = [{"driver": r.get("attempt"), "changelog records read": r.get("records"), "keys restored": r.get("keys"),
             "restore (s)": r.get("took_s")} for r in c.get("restores", [])]
    table = pd.DataFrame(rows)
    table.attrs.update({k: c.get(k) for k in ("keys", "keys_exact", "keys_over", "keys_under")})
    table.index.name = (f"{c.get('keys_exact')} of {c.get('keys')} keys exact ({c.get('keys_over')} over, "
                        f"{c.get('keys_under')} under)")
    return table


def state_table(results: dict) -> pandas.DataFrame:  # noqa: F821
    """``key-count`` runs side by side (label -> run result): the output's guarantee and the restored state's audit.

    Per run, from its report: the output topic's measured guarantee and duplicates, the changelog's keys exact,
    over and under (with the counts they are off by), and each driver attempt's restores (keys restored, the
    longest restore's seconds).
    """
    import pandas as pd

    rows = []
    for label, result in results.items():
        r = result.report
        c = r.get("changelog") or {}
        restored = {}
        for e in c.get("restores", []):
            keys, took = restored.get(e.get("attempt"), (0, 0.0))
            restored[e.get("attempt")] = (keys + (e.get("keys") or 0), max(took, e.get("took_s") or 0.0))
        rows.append({"run": label, "pipeline": result.config.pipeline, "output": r["guarantee"],
                     "output duplicated": r["duplicated"], "keys": c.get("keys"), "keys exact": c.get("keys_exact"),
                     "keys over (by)": f"{c.get('keys_over')} ({c.get('overcount')})",
                     "keys under (by)": f"{c.get('keys_under')} ({c.get('undercount')})",
                     "restores (driver: keys, "
                     "s)": "; ".join(f"{a}: {k}, {t:.1f}" for a, (k, t) in sorted(restored.items()))})
    return pd.DataFrame(rows).set_index("run")


def engine_table(results: dict) -> pandas.DataFrame:  # noqa: F821
    """The engines side by side: label -> run result; mechanism, settings, the fault, and the measured guarantee."""
    import pandas as pd

    rows = []
    for label, result in results.items():
        r, cfg = result.report, result.config
        settings = {k: v for k, v in r["settings"].items() if k in ("checkpointing", "flink_delivery", "sink", "query",
                                                                      "offsets", "wal", "commit",
                                                                      "storm_mode")}
        rows.append({"run": label, "engine": PIPELINES[cfg.pipeline].engine_name,
                     "pipeline": cfg.pipeline, "mechanism": (STORM_MECHANISMS.get(cfg.storm.storm_mode, "")
                                                             if PIPELINES[cfg.pipeline].engine == "storm"
                                   else MECHANISMS.get(cfg.pipeline, "")),
                     "settings": ", ".join(f"{k}={v}" for k, v in settings.items()), "faults": cfg.faults or "none",
                     "acknowledged": r["acked"], "exactly once": r["exactly_once"], "duplicated": r["duplicated"],
                     "lost": r["lost"], "measured": r["guarantee"],
                     "state": (f"{r['changelog']['keys_exact']} of {r['changelog']['keys']} keys exact"
                               if r.get("changelog") else "")})
    return pd.DataFrame(rows).set_index("run")
