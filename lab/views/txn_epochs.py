"""Notebook 05's view of transactions v1 against v2: each client's transactions with the epochs the broker wrote,
and each client's late write.

Reads :class:`lab.lessons.txn_epochs.ClientTransactions` (what :func:`lab.lessons.txn_epochs.compare` measured) and
:class:`lab.lessons.late_write.LateWrite` (what :func:`lab.lessons.late_write.run` measured), and writes nothing.
Tables are pandas DataFrames; the figures :class:`plotly.graph_objects.Figure`.
"""

from __future__ import annotations

import plotly.graph_objects as go

from lab.audit.predictions import QUESTIONS


def transactions_table(results):
    """One row per transaction per client, on the partition with the most: outcome, records, the epoch of its records
    and of its end marker, as the broker's log holds them."""
    import pandas as pd

    rows = []
    for r in results:
        per_partition: dict[int, list] = {}
        for t in r.logged:
            if t.records:
                per_partition.setdefault(t.partition, []).append(t)
        widest = max(per_partition.values(), key=len, default=[])
        for i, t in enumerate(widest):
            rows.append({"client": r.version, "transaction": i, "outcome": t.outcome, "partition": t.partition,
                         "records": t.records, "producer id": t.producer_id,
                         "records' epoch": ", ".join(map(str, t.data_epochs)), "end marker's epoch": t.marker_epoch})
    return pd.DataFrame(rows).set_index(["client", "transaction"])


def summary_table(results):
    """One row per client: :meth:`lab.lessons.txn_epochs.ClientTransactions.summary`."""
    import pandas as pd

    return pd.DataFrame([r.summary() for r in results]).set_index("client")


def epochs_figure(results, title: str = "The epoch of each transaction, as the broker wrote it") -> go.Figure:
    """Per client, each transaction's records' epoch (filled) and its end marker's (open), by transaction."""
    table = transactions_table(results).reset_index()
    fig = go.Figure()
    for color, (client, rows) in zip(("#1f77b4", "#d62728", "#2ca02c"), table.groupby("client", sort=False)):
        data = [int(e.split(",")[0]) for e in rows["records' epoch"]]
        fig.add_trace(go.Scatter(x=rows["transaction"], y=data, mode="lines+markers", name=f"{client}: records",
                                 marker=dict(size=10, color=color), line=dict(color=color)))
        fig.add_trace(go.Scatter(x=rows["transaction"], y=rows["end marker's epoch"], mode="markers",
                                 name=f"{client}: end marker", text=rows["outcome"],
                                 marker=dict(size=14, symbol="circle-open", color=color, line=dict(width=2))))
    fig.update_layout(title=title, template="plotly_white", height=380, xaxis=dict(title="transaction", dtick=1),
                      yaxis=dict(title="producer epoch", dtick=1), legend=dict(orientation="h", y=-0.25))
    return fig


def epochs_outcome(result) -> tuple[str, str]:
    """The answer to the question "txn epochs" (:data:`lab.audit.predictions.QUESTIONS`) for one client: ``a new
    epoch per transaction``, ``one epoch``, or ``neither`` (several epochs, not one per transaction), and the
    counts."""
    s = result.summary()
    outcome = ("a new epoch per transaction" if s["a new epoch per transaction"] else "one epoch" if s["one epoch"]
               else "neither")
    return outcome, (f"{s['committed'] + s['aborted']} transactions, records written under epoch"
                     f"{'s' if len(s['data epochs']) != 1 else ''} {', '.join(map(str, s['data epochs']))}; "
                     f"{s['markers above the data epoch']} of {s['end markers']} end markers one epoch above "
                     f"their records")


#: The answers to the question "late write", from a run's verdict.
LATE_WRITE_OUTCOMES = QUESTIONS["late write"]


def late_summary_table(results):
    """One row per client: :meth:`lab.lessons.late_write.LateWrite.summary`."""
    import pandas as pd

    return pd.DataFrame([r.summary() for r in results]).set_index("client")


def late_log_table(results):
    """One row per transaction per client, as the written partition's log holds it, and the client's outcome."""
    import pandas as pd

    rows = []
    for r in results:
        mine = [t for t in r.logged if t.records and t.partition == r.partition]
        for i, t in enumerate(mine):
            rows.append({"client": r.version, "transaction": i, "outcome in the log": t.outcome,
                         "records": t.records, "producer id": t.producer_id,
                         "records' epoch": ", ".join(map(str, t.data_epochs)), "end marker's epoch": t.marker_epoch,
                         "the late request": ("kept, then sent while this one was open" if i == r.late_index + 1
                                              and r.released_while_open else
                                              "its own (kept)" if i == r.late_index else "")})
    return pd.DataFrame(rows).set_index(["client", "transaction"]) if rows else pd.DataFrame()


def late_epochs_figure(results, title: str = "The late request's epoch, against the transactions around it"
                       ) -> go.Figure:
    """Per client, each transaction's records' epoch by transaction, and the late request (a cross) at the
    transaction that was open when it arrived, at the epoch it carried."""
    fig = go.Figure()
    for color, r in zip(("#1f77b4", "#d62728", "#2ca02c"), results):
        mine = [t for t in r.logged if t.records and t.partition == r.partition]
        fig.add_trace(go.Scatter(x=list(range(len(mine))), y=[t.data_epochs[0] for t in mine], mode="lines+markers",
                                 name=f"{r.version}: records", marker=dict(size=10, color=color),
                                 text=[t.outcome for t in mine], line=dict(color=color)))
        if r.late:
            answer = r.answer[0]["error"] if r.answer else r.held.get("state")
            fig.add_trace(go.Scatter(x=[r.late_index + 1], y=[r.late["epoch"]], mode="markers+text",
                                     name=f"{r.version}: the late request ({answer})", text=[answer],
                                     textposition="top center",
                                     marker=dict(size=16, symbol="x", color=color, line=dict(width=1))))
    fig.update_layout(title=title, template="plotly_white", height=400, xaxis=dict(title="transaction", dtick=1),
                      yaxis=dict(title="producer epoch", dtick=1), legend=dict(orientation="h", y=-0.25))
    return fig


def late_write_outcome(result) -> tuple[str, str]:
    """The answer to the question "late write" for one client (one of :data:`LATE_WRITE_OUTCOMES`), and the counts."""
    v = result.summary()["verdict"]
    outcome = ("let through" if v.startswith("let through") or v.startswith("written again") else
               "fenced" if v.startswith("fenced") else
               "recognised as a duplicate" if v.startswith("recognised") else "refused another way")
    a = result.audit()
    return outcome, (f"{v}; read_committed: {a['duplicated']} duplicated, {a['lost']} lost, "
                     f"{a['aborted_read']} aborted records read")
