"""Notebook 07's views of runs on the three-broker cluster: tables and figures, no logic of their own.

The counts come from each run's report (its ``topic`` section: the final read,
:mod:`lab.audit.topic`) and timeline (:mod:`lab.kafka.replication`); the
documented outcome from :mod:`lab.audit.claims`; the verdict from
:func:`lab.audit.expectations.verdict`, as the matrix computes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing the supervisor is not needed to draw a table
    from lab.run.supervisor import RunResult


def row(result: RunResult) -> dict:
    """One run on the cluster as a row: its settings, the documented claim, the final read's counts, the verdict.

    ``lost`` is the final read's (:mod:`lab.audit.topic`): acknowledged sends the
    topic no longer holds. ``no live leader (s)``: the most time any partition of
    the run had no live leader (:func:`lab.kafka.replication.leaderless_s`). ``ELR``: eligible leader
    replicas as the broker reported them at the run's start (``broker_features``), not as asked.
    """
    from lab.audit.claims import claim
    from lab.audit.expectations import verdict
    from lab.events import read_events
    from lab.kafka.replication import leaderless_s

    s, topic = result.report["settings"], result.report["topic"]
    # A feature finalized at level 0 is not listed among a broker's finalized features: absent is off.
    features = result.report.get("broker_features")
    elr = features.get("eligible.leader.replicas.version", 0) if features else None
    level = {1: "on", 0: "off"}.get(elr, "?" if elr is None else str(elr))
    c = claim(s["acks"], s["min_insync"], s["unclean"], elr=level)
    return {"acks": s["acks"], "min.insync": s["min_insync"], "unclean": s["unclean"],
            "ELR": level, "seed": result.config.seed,
            "documented": c.expect, "acked": topic["acked"], "lost": topic["lost"],
            "failed sends": topic["failed_sends"], "failed, in topic": topic["failed_in_topic"],
            "unknown": topic["unknown_sends"],
            "no live leader (s)": max(leaderless_s(read_events(result.run_dir)).values(), default=0.0),
            "verdict": verdict(c.expect, result.report), "why": c.why}


def table(results: list[RunResult]):
    """:func:`row` of each run (a pandas DataFrame), mismatches first to the eye: red rows."""
    import pandas as pd

    from lab.audit.expectations import MISMATCH

    frame = pd.DataFrame([row(r) for r in results])
    return (frame.style.apply(lambda r: ["background-color: #fde0dc" if r["verdict"] == MISMATCH else ""] * len(r),
                              axis=1).format({"no live leader (s)": "{:.1f}"})
            .set_properties(subset=["why"], **{"text-align": "left", "min-width": "360px"}).hide(axis="index"))


def show(result: RunResult) -> None:
    """A cluster run: the final read's counts, and the leaders and ISR over time with every lost ack marked."""
    import pandas as pd
    from IPython.display import HTML, display

    from lab.events import read_events
    from lab.views import plots

    t, r, s = result.report["topic"], result.report, result.report["settings"]
    display(HTML(
        f"acks={s['acks']} · min.insync.replicas={s['min_insync']} · unclean election {s['unclean']}<br>"
        f"<b>final read of the topic</b>: {t['read']} records · {t['acked']} acknowledged · "
        f"<b style='color:#d62728'>{t['lost']} acknowledged and lost</b> · {t['duplicated']} kept twice · "
        f"{t['failed_sends']} failed at the producer ({t['failed_in_topic']} of them in the topic anyway) · "
        f"{t['unknown_sends']} unknown ({t['unknown_in_topic']} in the topic)<br>"
        f"<b>the pipeline's sink</b> (it read the topic while the run went on): {r['exactly_once']} exactly once, "
        f"{r['duplicated']} duplicated, {r['lost']} lost"))
    lost_csv = result.run_dir / "topic_lost.csv"
    lost = pd.read_csv(lost_csv) if lost_csv.exists() else None
    plots.replication_timeline(read_events(result.run_dir), lost).show()


def cluster_nodes(runs_dir: Path | str):
    """The cluster recorded for ``runs_dir``, one row per process: role, node id, PID, memory (RSS, MB), port.

    ``port`` is where Kafka's clients connect for a broker (its client proxy) and
    the controller's own listener for the controller. A pandas DataFrame; empty
    when no cluster is running there.
    """
    import pandas as pd
    import psutil

    from lab.broker import shared as shared_broker

    info = shared_broker.load_running(runs_dir)

    def rss(pid):
        try:
            return round(psutil.Process(pid).memory_info().rss / 2**20)
        except (psutil.Error, TypeError):
            return None

    rows = []
    if info is not None and info.nodes:
        rows.append({"process": "controller (KRaft quorum)", "node": 100, "pid": info.controller_pid,
                     "memory (MB)": rss(info.controller_pid), "port": info.controller_port})
        for n in info.nodes:
            rows.append({"process": "broker", "node": n.node, "pid": n.broker_pid, "memory (MB)": rss(n.broker_pid),
                         "port": n.proxy_port})
    return pd.DataFrame(rows, columns=["process", "node", "pid", "memory (MB)", "port"])


def output_views(result: RunResult):
    """A kafka-eos run's output topic as its two readers see it (a pandas DataFrame, one row per isolation level).

    ``read_committed`` gets committed transactions only; ``read_uncommitted`` gets
    the aborted copies too (:mod:`lab.sinks.topic`).
    """
    import pandas as pd

    r = result.report
    committed = r["read_committed_records"]
    return pd.DataFrame([
        {"reader": "read_committed", "records": committed, "events": r["exactly_once"] + r["duplicated"],
         "aborted copies": 0},
        {"reader": "read_uncommitted", "records": r["read_uncommitted_records"],
         "events": r["read_uncommitted_records"] - r["read_uncommitted_extra_copies"],
         "aborted copies": r["aborted_output_records"]},
    ]).set_index("reader")
