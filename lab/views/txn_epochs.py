"""Notebook 05's view of transactions v1 against v2: each client's transactions with the epochs the broker wrote.

Reads :class:`lab.lessons.txn_epochs.ClientTransactions` (what :func:`lab.lessons.txn_epochs.compare` measured) and
writes nothing. Tables are pandas DataFrames; the figure a :class:`plotly.graph_objects.Figure`.
"""

from __future__ import annotations

import plotly.graph_objects as go


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
