"""Notebook 09's views of share groups and zombies: delivery counts, archived, dead-lettered and held records, paused
drivers.

Figures are :class:`plotly.graph_objects.Figure`; tables are pandas DataFrames. Each
reads a finished run's report and files (:mod:`lab.audit.deliveries`) and writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab import events as ev
from lab.audit.deliveries import delivery_table, poison_outcomes, read_deliveries
from lab.views.plots import pause_spans


def delivery_histogram(results: dict, title: str = "How many times the broker delivered each event") -> go.Figure:
    """Events by the most deliveries one had (``deliveries.histogram``), one bar group per run; log scale."""
    fig = go.Figure()
    for label, r in results.items():
        hist = (r.report.get("deliveries") or {}).get("histogram") or {}
        fig.add_trace(go.Bar(x=[int(n) for n in hist], y=list(hist.values()), name=label, text=list(hist.values()),
                             textposition="outside",
                             hovertemplate="delivered %{x} times: %{y} events<extra>" + label + "</extra>"))
    fig.update_layout(title=title, barmode="group", xaxis=dict(title="delivery count (1: delivered once)", dtick=1),
                      yaxis=dict(title="events", type="log"), template="plotly_white", height=360,
                      legend=dict(orientation="h", y=-0.25))
    return fig


def archived(result):
    """The events the share group archived after its delivery limit (``deliveries.archived``), with their keys."""
    import pandas as pd

    rows = (result.report.get("deliveries") or {}).get("archived") or []
    return pd.DataFrame(rows, columns=["seq", "partition", "offset", "deliveries", "delivery_count"])


def dead_lettered(result):
    """The records the share group's broker moved to its dead-letter topic (``deliveries.dead_lettered``).

    One row per record there: where it was, the delivery count the broker wrote in its headers, the deliveries
    the consumers saw, the broker's reason, and what the audit counted the event as.
    """
    import pandas as pd

    rows = (result.report.get("deliveries") or {}).get("dead_lettered") or []
    status = dict(zip(result.audit.table["seq"], result.audit.table["status"]))
    return pd.DataFrame([{**r, "audit": status.get(r.get("seq"))} for r in rows],
                        columns=["seq", "partition", "offset", "delivery_count", "deliveries", "dlq_offset", "message",
                                 "audit"])


def poison_outcome(result) -> tuple[tuple[str, str], tuple[str, str]]:
    """What became of a run's poison record, and its deliveries first (:func:`lab.audit.deliveries.poison_outcomes`),
    as ``nb.answers`` takes them."""
    from lab.share.settings import DELIVERY_LIMIT

    status = dict(zip(result.audit.table["seq"].tolist(), result.audit.table["status"].tolist()))
    return poison_outcomes(ev.read_events(Path(result.run_dir)), status, DELIVERY_LIMIT)


def poison_journey(results: dict, title: str = "The poison record: each delivery, then archived or moved") -> go.Figure:
    """One row per run: each delivery of the poison record (its delivery count, at the time it killed its consumer),
    then what the broker did with it: ``dead-lettered`` (a green line) or, without a dead-letter topic, nothing more.
    """
    labels = list(results)
    fig = make_subplots(rows=len(labels), cols=1, shared_xaxes=True, vertical_spacing=0.12, subplot_titles=labels)
    for i, label in enumerate(labels, 1):
        events = ev.read_events(Path(results[label].run_dir))
        t0 = next((e["t"] for e in events if e["type"] == ev.RUN_START), events[0]["t"] if events else 0.0)
        kills = [e for e in events if e["type"] == ev.POISON_KILLED]
        fig.add_trace(go.Scatter(
            x=[e["t"] - t0 for e in kills], y=[e["delivery_count"] for e in kills], mode="markers+lines",
            name="a delivery that killed its consumer", legendgroup="kill", showlegend=i == 1,
            marker=dict(size=9, symbol="x", color="#d62728"), line=dict(color="#d62728", dash="dot"),
            hovertemplate="delivery %{y}<br>t=%{x:.2f}s<extra>" + label + "</extra>"), row=i, col=1)
        for e in events:
            if e["type"] == ev.DEAD_LETTERED:
                fig.add_vline(x=e["t"] - t0, line=dict(color="#2ca02c", width=2), row=i, col=1)
                fig.add_annotation(x=e["t"] - t0, y=0.9, yref=f"y{i} domain" if i > 1 else "y domain",
                                   text=f"moved to the dead-letter topic (delivery count {e['delivery_count']})",
                                   showarrow=False, xanchor="right", font=dict(color="#2ca02c"))
        fig.update_yaxes(title_text="delivery count", dtick=1, rangemode="tozero", row=i, col=1)
    fig.update_xaxes(title_text="seconds since the run started", row=len(labels), col=1)
    fig.update_layout(title=title, template="plotly_white", height=220 * len(labels) + 120,
                      legend=dict(orientation="h", y=-0.15))
    return fig


def held(result):
    """The records killed consumers held (``consumer-killed``), and what became of each.

    One row per record: where it is, the delivery count it had when its consumer died, the most deliveries it
    had in the end, which consumers wrote it, and the sink rows the audit counted for it.
    """
    import pandas as pd

    run_dir = Path(result.run_dir)
    events = ev.read_events(run_dir)
    lines = read_deliveries(run_dir)
    table = delivery_table(lines)
    by_place = {(row["partition"], row["offset"]): (seq, row) for seq, row in table.items()}
    writers: dict[tuple, list] = {}
    for d in lines:
        if d.get("fate") == "written":
            writers.setdefault((d["p"], d["o"]), []).append(d["c"])
    copies = dict(zip(result.audit.table["seq"], result.audit.table["delivered"]))
    rows = []
    for e in events:
        if e["type"] != ev.CONSUMER_KILLED:
            continue
        for p, o, n in e.get("held") or ():
            seq, row = by_place.get((p, o), (None, None))
            rows.append({"partition": p, "offset": o, "killed consumer": e["consumer"], "delivery count then": n,
                         "deliveries in the end": row["highest"] if row else None,
                         "written by consumers": writers.get((p, o), []),
                         "sink rows": copies.get(seq) if seq is not None else None})
    return pd.DataFrame(rows, columns=["partition", "offset", "killed consumer", "delivery count then",
                                       "deliveries in the end", "written by consumers", "sink rows"])


def zombie_timelines(results: dict, title: str = "Paused, replaced, back as a zombie") -> go.Figure:
    """One row per run: its batches by driver attempt, the pause and the zombie's life shaded, the run's faults.

    The shared axis is seconds since each run started, so the same pause lines up across pipelines.
    """
    labels = list(results)
    fig = make_subplots(rows=len(labels), cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=labels)
    for i, label in enumerate(labels, 1):
        events = ev.read_events(Path(results[label].run_dir))
        t0 = next((e["t"] for e in events if e["type"] == ev.RUN_START), events[0]["t"] if events else 0.0)
        done = [e for e in events if e["type"] == ev.BATCH_DONE and not e.get("recovered")]
        for attempt in sorted({e.get("attempt", 1) for e in done}):
            mine = [e for e in done if e.get("attempt", 1) == attempt]
            fig.add_trace(go.Scatter(
                x=[e["t"] - t0 for e in mine], y=[e["rows"] for e in mine], mode="markers",
                name=f"driver #{attempt}" + (" (the zombie after its pause)" if attempt == 1 else ""),
                legendgroup=f"driver {attempt}", showlegend=i == 1,
                marker=dict(size=6, color=_ATTEMPT_COLORS[(attempt - 1) % 3]),
                hovertemplate=f"{label}<br>batch %{{customdata}}, %{{y}} rows, t=%{{x:.2f}}s<extra></extra>",
                customdata=[e["batch"] for e in mine]), row=i, col=1)
        last = events[-1]["t"] if events else t0
        for x0, x1, what, color in pause_spans(events, last):
            fig.add_vrect(x0=x0 - t0, x1=x1 - t0, fillcolor=color, opacity=0.3, line_width=0, layer="below", row=i,
                          col=1)
            fig.add_annotation(x=(x0 + x1) / 2 - t0, y=1, yref=f"y{i} domain" if i > 1 else "y domain", text=what,
                               showarrow=False, font=dict(color="#8c510a"))
        for e in events:
            if e["type"] in (ev.PRODUCER_FENCED, ev.ACK_REFUSED):
                fig.add_vline(x=e["t"] - t0, line=dict(color="#d62728", width=2, dash="dash"), row=i, col=1)
                fig.add_annotation(x=e["t"] - t0, y=0.5, yref=f"y{i} domain" if i > 1 else "y domain",
                                   text=e["type"], showarrow=False, font=dict(color="#d62728"), xanchor="left")
        fig.update_yaxes(title_text="rows", row=i, col=1)
    fig.update_xaxes(title_text="seconds since the run started", row=len(labels), col=1)
    fig.update_layout(title=title, template="plotly_white", height=220 * len(labels) + 120,
                      legend=dict(orientation="h", y=-0.12))
    return fig


_ATTEMPT_COLORS = ("#1f77b4", "#2ca02c", "#9467bd")
