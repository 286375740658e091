"""Figures of a run. Every function returns a ``plotly.graph_objects.Figure``.

Inputs are plain data (an :class:`lab.audit.auditor.Audit` or its counts, the
per-event table, the timeline events), so figures can be rebuilt from a run
directory long after the run.
"""

from __future__ import annotations

import plotly.graph_objects as go

from lab import events as ev
from lab.audit.restarts import driver_restarts
from lab.outcomes import COLORS as OUTCOME_COLORS, WORDS

COLORS = {
    "exactly-once": "#2ca02c",
    "duplicated": "#ff7f0e",
    "lost": "#d62728",
    "unseen": "#7f7f7f",
    "unexpected": "#9467bd",
}
_FAULT_COLOR = "#d62728"


def _counts(audit_or_counts) -> dict:
    return audit_or_counts.counts() if hasattr(audit_or_counts, "counts") else dict(audit_or_counts)


def delivery_counts(audit_or_counts, title: str = "Deliveries per acknowledged event") -> go.Figure:
    """Bars: events delivered exactly once, more than once, lost, unseen; and unexpected rows."""
    c = _counts(audit_or_counts)
    labels = ["exactly-once", "duplicated", "lost", "unseen", "unexpected"]
    values = [c["exactly_once"], c["duplicated"], c["lost"], c["unseen"], c["unexpected"]]
    fig = go.Figure(go.Bar(
        x=labels, y=values, marker_color=[COLORS[l] for l in labels], text=values, textposition="outside",
        cliponaxis=False, hovertemplate="%{x}: %{y}<extra></extra>",
    ))
    extra = c.get("extra_copies", 0)
    fig.update_layout(
        title=f"{title}<br><sup>{c['acked']} acknowledged · {extra} extra copies · measured: "
              f"{c.get('guarantee', '')}</sup>",
        yaxis_title="events", template="plotly_white", height=380, margin=dict(t=80),
    )
    return fig


def event_strip(table, title: str = "Every acknowledged event") -> go.Figure:
    """One marker per event: sequence number on x, copies in the sink on y, colour by status.

    Lost events are large red crosses on the zero line, so they cannot be missed.
    """
    fig = go.Figure()
    for status in ("exactly-once", "duplicated", "unseen", "lost"):
        part = table[table["status"] == status]
        if not len(part) and status != "lost":
            continue
        lost = status == "lost"
        fig.add_trace(go.Scattergl(
            x=part["seq"], y=part["delivered"], mode="markers", name=f"{status} ({len(part)})",
            marker=dict(color=COLORS[status], size=11 if lost else 4, symbol="x" if lost else "circle",
                        line=dict(width=0)),
            customdata=part[["event_id", "partition", "kafka_offset"]].to_numpy() if len(part) else None,
            hovertemplate="seq %{x}<br>copies %{y}<br>id %{customdata[0]}<br>partition %{customdata[1]} offset "
                          "%{customdata[2]}<extra></extra>",
        ))
    ymax = int(table["delivered"].max()) if len(table) else 1
    fig.update_layout(
        title=title, xaxis_title="event sequence number (production order)", yaxis_title="copies in the sink",
        yaxis=dict(tickmode="linear", dtick=1, range=[-0.5, max(ymax, 2) + 0.5]),
        template="plotly_white", height=340, legend=dict(orientation="h", y=-0.25),
    )
    return fig


def pause_spans(events: list[dict], last: float) -> list[tuple[float, float, str, str]]:
    """``(start, end, label, colour)`` of each driver-pause (its fault to its SIGCONT) and each zombie's life after
    it."""
    spans, paused, zombie = [], None, None
    for e in events:
        if e["type"] == ev.FAULT and e.get("kind") == "driver-pause" and e.get("pid") is not None:
            paused = e["t"]
        elif e["type"] == ev.DRIVER_RESUME and paused is not None:
            spans.append((paused, e["t"], "paused", "#fdd0a2"))
            paused, zombie = None, (e["t"] if e.get("zombie") else None)
        elif e["type"] == ev.ZOMBIE_END and zombie is not None:
            spans.append((zombie, e["t"], "zombie", "#dfc27d"))
            zombie = None
    if paused is not None:
        spans.append((paused, last, "paused", "#fdd0a2"))
    if zombie is not None:
        spans.append((zombie, last, "zombie", "#dfc27d"))
    return spans


#: Pixels per character of an 11 px label (measured in Chromium: "driver-crash" is 70 px, "restart #1 · back in 0.5 s"
#: 146 px) and one line of labels' height; the narrowest plot the labels are laid out for (a 1280 px window with
#: JupyterLab's file browser open leaves about 760 px of plot).
LABEL_CHAR_PX, LABEL_LINE_PX, PLOT_PX = 6.2, 16, 760
#: Lines of labels above a timeline at most; more would crowd the title, so the labels go to the legend instead.
MAX_LABEL_LINES = 3


def stack_labels(labels: list[tuple[float, str]], x_span: float, plot_px: float = PLOT_PX,
                 max_lines: int = MAX_LABEL_LINES) -> list[tuple[int, str]] | None:
    """The line (0 = lowest) and side of each ``(x, text)`` label, so that none overlap and none leave the plot.

    A label is written rightwards from its x (side ``"left"``: its left edge on the line), or leftwards when it
    would pass the axis's end (``"right"``). It takes ``len(text) * LABEL_CHAR_PX`` pixels plus a gap;
    ``x_span`` (the axis's seconds) over ``plot_px`` converts them to seconds. Labels are placed in order of
    their left edge, each on the lowest line where it clears the previous label of that line. ``None`` when
    some label would need more than ``max_lines`` lines.
    """
    per_px = max(x_span, 1e-9) / plot_px
    spans = []
    for x, text in labels:
        width = (len(text) * LABEL_CHAR_PX + 8) * per_px
        spans.append((x - width, x, "right") if x + width > x_span and x - width >= 0 else (x, x + width, "left"))
    ends: list[float] = []  # the right end of each line's last label, in seconds
    placed: list[tuple[int, str]] = [(0, "left")] * len(labels)
    for i in sorted(range(len(labels)), key=lambda i: spans[i][0]):
        left, right, side = spans[i]
        line = next((k for k, end in enumerate(ends) if left >= end), len(ends))
        if line >= max_lines:
            return None
        if line == len(ends):
            ends.append(float("-inf"))
        ends[line] = right
        placed[i] = (line, side)
    return placed


def timeline(events: list[dict], title: str = "Timeline: batches, crashes and restarts",
             x_span: float | None = None) -> go.Figure:
    """Batches (rows per batch, by driver attempt), their replayed rows, faults, driver starts and the producer's end
    (and each record a share group moved to its dead-letter topic).

    A driver-pause is shaded from its SIGSTOP to its SIGCONT ("paused"), and a replaced driver's life after its
    SIGCONT ("zombie"): its batches are the markers of its attempt inside that span.

    A batch whose ``batch-start`` counts ``replayed`` rows (storm, samza: records at offsets the run's drivers had
    written before) gets a cross at that count: the replays a restart or a failed tuple brought.

    Each restart is shaded from the previous driver's death to the restarted
    driver's first batch done, its time written at the restart
    (:func:`lab.audit.restarts.driver_restarts`); a restart without one, to when
    that became final (the driver's death, the run's end) or else to the
    timeline's last event. A batch done before a crash and only logged by the
    next driver (``recovered``) is an open marker at the time it was logged.

    Faults, restarts and the producer's end are vertical lines; their labels sit above the plot, each starting
    or ending at its line (never crossed by one, never past the axis's end), on up to :data:`MAX_LABEL_LINES` lines so
    that none overlap (:func:`stack_labels`); when they would need more, each line is named in the legend instead.
    ``x_span``: the x axis's extent in seconds when the caller fixes it (a live view), else the events' own.
    """
    t0 = next((e["t"] for e in events if e["type"] == ev.RUN_START), events[0]["t"] if events else 0.0)
    restarts = {r.attempt: r for r in driver_restarts(events)}
    fig = go.Figure()
    done = [e for e in events if e["type"] == ev.BATCH_DONE and not e.get("recovered")]
    logged = [e for e in events if e["type"] == ev.BATCH_DONE and e.get("recovered")]
    attempts = sorted({e.get("attempt", 1) for e in done})
    traces = [(f"batches, driver #{a}", [e for e in done if e.get("attempt", 1) == a], "circle") for a in attempts]
    if logged:
        traces.append(("batch done before a crash, logged at the restart", logged, "circle-open"))
    for name, mine, symbol in traces:
        fig.add_trace(go.Scatter(
            x=[e["t"] - t0 for e in mine], y=[e["rows"] for e in mine], mode="markers",
            name=name, marker=dict(size=7, symbol=symbol),
            customdata=[e["batch"] for e in mine],
            hovertemplate="batch %{customdata}<br>%{y} rows<br>t=%{x:.2f}s<extra></extra>",
        ))
    replays = [e for e in events if e["type"] == ev.BATCH_START and e.get("replayed")]
    if replays:
        fig.add_trace(go.Scatter(
            x=[e["t"] - t0 for e in replays], y=[e["replayed"] for e in replays], mode="markers",
            name="of them replayed (written before)", marker=dict(size=9, symbol="x", color=_FAULT_COLOR),
            customdata=[e["batch"] for e in replays],
            hovertemplate="batch %{customdata}<br>%{y} rows replayed<br>t=%{x:.2f}s<extra></extra>"))
    ymax = max([e["rows"] for e in done + logged] or [1])
    marks = []  # (x, label, line style) of each vertical line
    for e in events:
        x = e["t"] - t0
        if e["type"] == ev.FAULT:
            label = e.get("kind", ev.FAULT) + (f" @{e['point']}" if e.get("point") else "")
            marks.append((x, label, dict(color=_FAULT_COLOR, width=2, dash="dash")))
        elif e["type"] == ev.DRIVER_START and e.get("attempt", 1) > 1:
            r = restarts.get(e["attempt"])
            back = f" · back in {r.back_s:.1f} s" if r is not None and r.back_s is not None else ""
            marks.append((x, f"restart #{e['attempt'] - 1}{back}", dict(color="#1f77b4", width=1, dash="dot")))
        elif e["type"] == ev.PRODUCER_DONE:
            marks.append((x, "producer done", dict(color="#7f7f7f", width=1)))
        elif e["type"] == ev.DEAD_LETTERED:  # the share group's broker moved a record it gave up on
            marks.append((x, f"dead-lettered p{e['partition']}@{e['offset']}", dict(color="#2ca02c", width=2)))
        elif e["type"] == ev.DRIVER_EXIT:
            fig.add_vline(x=x, line=dict(color="#9467bd", width=1))
    span = x_span if x_span is not None else max([m[0] for m in marks] + [e["t"] - t0 for e in events] or [1.0])
    lines = stack_labels([(x, label) for x, label, _ in marks], span)
    for i, (x, label, style) in enumerate(marks):
        if lines is not None:
            line, side = lines[i]
            fig.add_vline(x=x, line=style)
            fig.add_annotation(x=x, y=1, yref="paper", yanchor="bottom", xanchor=side,
                               xshift=2 if side == "left" else -2, yshift=2 + LABEL_LINE_PX * line, text=label,
                               showarrow=False, font=dict(color=style["color"], size=11))
        else:  # too many to write apart: each line is a trace, named in the legend
            fig.add_trace(go.Scatter(x=[x, x], y=[0, ymax * 1.2], mode="lines", line=style,
                                     name=f"{label} (at {x:.1f} s)", hoverinfo="name"))
    last = events[-1]["t"] if events else t0
    for x0, x1, label, color in pause_spans(events, last):
        fig.add_vrect(x0=x0 - t0, x1=x1 - t0, fillcolor=color, opacity=0.25, line_width=0, layer="below")
        fig.add_annotation(x=(x0 + x1) / 2 - t0, y=ymax * 0.95, text=label, showarrow=False, font=dict(color="#8c510a"))
    for r in restarts.values():  # no pipeline work from the death to the first batch done
        end = next(t for t in (r.back_t, r.over_t, last) if t is not None)
        fig.add_vrect(x0=r.down_t - t0, x1=end - t0, fillcolor="#1f77b4", opacity=0.1, line_width=0, layer="below")
    above = 1 + max(line for line, _ in lines) if marks and lines is not None else 0
    fig.update_layout(
        title=dict(text=title, y=1, yanchor="top", pad=dict(t=12)), xaxis_title="seconds since the run started",
        yaxis_title="rows in batch", yaxis=dict(range=[0, ymax * 1.2]), template="plotly_white",
        height=360 + LABEL_LINE_PX * above, margin=dict(t=56 + LABEL_LINE_PX * above, r=20),
        legend=dict(orientation="h", y=-0.25), autosize=True,
    )
    return fig


def semantics_grid(grid, title: str | None = None) -> go.Figure:
    """Deployments (rows) by failures (columns), as the Spark Streaming guide's fault-tolerance table, measured.

    ``grid`` is a :class:`lab.matrix.semantics.Grid`. Each cell is coloured by
    its measured outcome (the worst of its runs) and says what it measured,
    what was expected, the lost and duplicated counts and, for several runs, how
    many were as expected; a ✘ and a black frame mark a cell where a run measured
    something other than its expectation. Empty cells were not run.
    """
    from lab.matrix.semantics import GRID_TITLE

    deployments, failures = list(grid.deployments), list(grid.failures)
    n = len(WORDS)
    scale = []
    for i, c in enumerate(OUTCOME_COLORS[w] for w in WORDS):
        scale += [[i / n, c], [(i + 1) / n, c]]
    z, text, hover = [], [], []
    lines = max((len(c.lines()) for c in grid.cells.values()), default=1)  # the tallest cell sets every row's height
    for d in deployments:
        cells = [grid.cell(d, f) for f in failures]
        z.append([None if c is None else WORDS.index(c.measured) + 0.5 if c.measured in WORDS
                  else WORDS.index("error") + 0.5 for c in cells])
        text.append(["" if c is None else f"<b>{c.lines()[0]}</b><br>" + "<br>".join(c.lines()[1:]) for c in cells])
        hover.append(["not run" if c is None else "<br>".join(
            f"{r.name} (seed {r.seed}): {r.describe()}" for r in c.runs) for c in cells])
    fig = go.Figure(go.Heatmap(
        z=z, x=failures, y=deployments, text=text, texttemplate="%{text}", customdata=hover, colorscale=scale,
        zmin=0, zmax=n, showscale=False, xgap=3, ygap=3, textfont=dict(size=12, color="white"),
        hovertemplate="<b>%{y}</b><br>%{x}<br>%{customdata}<extra></extra>"))
    for i, d in enumerate(deployments):
        for j, f in enumerate(failures):
            c = grid.cell(d, f)
            if c is not None and c.mismatch:
                fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                              line=dict(color="#111111", width=3))
    for level in dict.fromkeys(c.measured for c in grid.cells.values()):  # a legend of the colours shown
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=level, showlegend=True,
                                 marker=dict(size=12, symbol="square", color=OUTCOME_COLORS.get(level, "#444444"))))
    fig.update_layout(
        title=title or GRID_TITLE, template="plotly_white", plot_bgcolor="#f4f4f4",
        height=max(320, len(deployments) * (15 * lines + 14) + 170),
        xaxis=dict(side="top", showgrid=False, tickfont=dict(size=13)),
        yaxis=dict(autorange="reversed", showgrid=False, tickfont=dict(size=12)),
        legend=dict(orientation="h", y=-0.02, yanchor="top", title_text="measured: "),
        margin=dict(l=20, r=20, t=110, b=40))
    return fig


def source_vs_sink(reports: dict[str, dict],
                   title: str = "Where duplicates are born, and where they are removed") -> go.Figure:
    """Grouped bars per scenario: duplicates in the topic (from the producer) vs duplicated events in the sink."""
    labels = list(reports)
    fig = go.Figure([
        go.Bar(name="duplicates in the topic", x=labels, y=[r.get("source_duplicates", 0) for r in reports.values()],
               marker_color="#9467bd", text=[r.get("source_duplicates", 0) for r in reports.values()],
               textposition="outside",
               cliponaxis=False),
        go.Bar(name="duplicated events in the sink", x=labels, y=[r["duplicated"] for r in reports.values()],
               marker_color=COLORS["duplicated"], text=[r["duplicated"] for r in reports.values()],
               textposition="outside", cliponaxis=False),
        go.Bar(name="lost events", x=labels, y=[r["lost"] for r in reports.values()], marker_color=COLORS["lost"],
               text=[r["lost"] for r in reports.values()], textposition="outside", cliponaxis=False),
    ])
    fig.update_layout(barmode="group", title=title, yaxis_title="events", template="plotly_white", height=420,
                      legend=dict(orientation="h", y=-0.3))
    return fig


def offset_ranges(plans: list[dict], replayed: set[int] | None = None,
                  title: str = "Offset ranges planned by the driver, per batch") -> go.Figure:
    """Each batch's ``[fromOffset, untilOffset)`` per partition as bars along the offset axis.

    ``plans`` are the direct pipeline's offset-log entries (``{"batch", "ranges": [{"partition",
    "fromOffset", "untilOffset"}]}``); batches in ``replayed`` were run again after a crash and
    are drawn with a red outline and hatching.
    """
    replayed = replayed or set()
    fig = go.Figure()
    palette = ["#1f77b4", "#aec7e8", "#2ca02c", "#98df8a", "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#17becf",
               "#9edae5"]
    for i, plan in enumerate(sorted(plans, key=lambda p: p["batch"])):
        rs = [r for r in plan["ranges"] if r["untilOffset"] > r["fromOffset"]]
        if not rs:
            continue
        again = plan["batch"] in replayed
        fig.add_trace(go.Bar(
            orientation="h", y=[f"partition {r['partition']}" for r in rs],
            x=[r["untilOffset"] - r["fromOffset"] for r in rs], base=[r["fromOffset"] for r in rs],
            name=f"batch {plan['batch']}" + (" (replayed)" if again else ""),
            marker=dict(color=palette[i % len(palette)],
                        line=dict(color="#d62728" if again else "white", width=3 if again else 1),
                        pattern=dict(shape="/" if again else "")),
            text=[f"{plan['batch']}" for _ in rs], textposition="inside", insidetextanchor="middle",
            customdata=[r["untilOffset"] for r in rs],
            hovertemplate="batch " + str(plan["batch"]) + "<br>%{y}: [%{base}, %{customdata})<extra></extra>",
        ))
    fig.update_layout(barmode="overlay", title=title, xaxis_title="offset", template="plotly_white",
                      height=320, legend=dict(orientation="h", y=-0.3), yaxis=dict(autorange="reversed"))
    return fig


def outcome_bars(reports: dict[str, dict], title: str = "Same crash, different settings") -> go.Figure:
    """Grouped bars per scenario: events delivered exactly once, duplicated and lost."""
    labels = list(reports)
    fig = go.Figure()
    for key, name in (("exactly_once", "exactly-once"), ("duplicated", "duplicated"), ("lost", "lost")):
        vals = [r[key] for r in reports.values()]
        fig.add_trace(go.Bar(name=name, x=labels, y=vals, marker_color=COLORS[name], text=vals,
                             textposition="outside", cliponaxis=False))
    fig.update_layout(barmode="group", title=title, yaxis_title="events", template="plotly_white", height=420,
                      legend=dict(orientation="h", y=-0.3))
    return fig


def aborted_transactions(rows: dict[str, dict],
                         title: str = "Aborted transactions: in the topic, and in the sink?") -> go.Figure:
    """Grouped bars per run: acknowledged events, aborted events in the topic, aborted events in the sink.

    ``rows`` maps a run's label to its counts: ``acked``, ``aborted in topic`` and
    ``aborted in sink`` (the columns of :func:`lab.notebook.aborted_summary`).
    """
    labels = list(rows)
    fig = go.Figure()
    for key, color in (("acked", COLORS["exactly-once"]), ("aborted in topic", "#7f7f7f"),
                       ("aborted in sink", COLORS["unexpected"])):
        vals = [int(r[key]) for r in rows.values()]
        fig.add_trace(go.Bar(name=key, x=labels, y=vals, marker_color=color, text=vals, textposition="outside",
                             cliponaxis=False, hovertemplate="%{x}<br>" + key + ": %{y}<extra></extra>"))
    fig.update_layout(barmode="group", title=title, yaxis_title="events", template="plotly_white", height=420,
                      legend=dict(orientation="h", y=-0.3))
    return fig


def window_counts(table, title: str = "Every window: expected vs measured count") -> go.Figure:
    """Per (window, key): the count the ledger owes (bar) and the sink's (marker); over and under marked.

    ``table`` is a window audit's (:class:`lab.audit.window.WindowAudit`):
    ``window_start``, ``key``, ``expected``, ``measured``, ``late``, ``status``.
    Late events (dropped behind the watermark, owed to nobody) are a grey bar
    on top of the expected count.
    """
    import pandas as pd

    t = table.copy()
    t["label"] = [f"{pd.to_datetime(w, unit='ms'):%H:%M:%S} {k}" for w, k in zip(t["window_start"], t["key"])]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=t["label"], y=t["expected"], name="expected (ledger)", marker_color="#c7e9c0"))
    if t["late"].sum():
        fig.add_trace(go.Bar(x=t["label"], y=t["late"], name=f"late, dropped ({int(t['late'].sum())})",
                             marker_color="#bdbdbd"))
    for status, color, symbol in (("exact", COLORS["exactly-once"],
                                   "circle"), ("over", COLORS["duplicated"], "triangle-up"),
                                  ("under", COLORS["lost"], "triangle-down")):
        part = t[t["status"] == status]
        if len(part) or status == "exact":
            fig.add_trace(go.Scatter(
                x=part["label"], y=part["measured"], mode="markers", name=f"measured: {status} ({len(part)})",
                marker=dict(color=color, symbol=symbol, size=9 if status == "exact" else 12),
                customdata=(part["measured"] - part["expected"]).to_numpy(),
                hovertemplate="%{x}<br>measured %{y} (%{customdata:+d})<extra></extra>"))
    over = int((t["measured"] - t["expected"]).clip(lower=0).sum())
    under = int((t["expected"] - t["measured"]).clip(lower=0).sum())
    fig.update_layout(
        title=f"{title}<br><sup>{len(t)} windows × keys · overcount {over} · undercount {under} events</sup>",
        barmode="stack", xaxis_title="window start (UTC) and key", yaxis_title="events",
        xaxis=dict(showticklabels=len(t) <= 80), template="plotly_white", height=420, margin=dict(t=80))
    return fig


_ROLE_COLORS = {"leader": "#1f4e79", "in-sync": "#74c476", "out-of-sync": "#fd8d3c", "down": "#252525"}


def replication_timeline(events: list[dict], lost=None,
                         title: str = "Leaders and in-sync replicas, with the faults") -> go.Figure:
    """One row per replica (partition × broker): leading, in sync, out of sync; killed brokers; lost acks.

    ``events`` is a cluster run's timeline (``partition-state``, ``fault``,
    ``node-restart``: :func:`lab.kafka.replication.replica_intervals`). ``lost``,
    the run's ``topic_lost.csv`` as a table, adds a row with one mark per
    acknowledged send the final read did not find, at the time it was acknowledged.
    A ``follower-lag`` window is shaded.
    """
    from lab.kafka.replication import node_down_intervals, replica_intervals

    t0 = next((e["t"] for e in events if e["type"] == ev.RUN_START), events[0]["t"] if events else 0.0)
    # The run may go on long after the cluster settled (draining, the final read): end 3 s after its last change.
    changed = [e["t"] for e in events if e["type"] in (ev.PARTITION_STATE, ev.NODE_RESTART, ev.FAULT, ev.PRODUCER_DONE)]
    stop = min(max(changed, default=t0) + 3.0,
               next((e["t"] for e in events if e["type"] == ev.RUN_END), max((e["t"] for e in events), default=t0)))
    fig = go.Figure()
    spans = replica_intervals(events)
    rows = sorted({(s["partition"], s["node"]) for s in spans})
    labels = {r: f"p{r[0]} · broker {r[1]}" for r in rows}
    for role in ("leader", "in-sync", "out-of-sync"):
        mine = [s for s in spans if s["role"] == role and s["start"] < stop]
        fig.add_trace(go.Bar(
            name=role, orientation="h", y=[labels[(s["partition"], s["node"])] for s in mine],
            base=[s["start"] - t0 for s in mine], x=[min(s["end"], stop) - s["start"] for s in mine],
            marker_color=_ROLE_COLORS[role], customdata=[s["epoch"] for s in mine],
            hovertemplate="%{y}: " + role + "<br>from %{base:.1f}s for %{x:.1f}s<br>leader epoch "
                                            "%{customdata}<extra></extra>"))
    down = node_down_intervals(events)
    if down:
        fig.add_trace(go.Bar(
            name="broker killed", orientation="h", y=[f"broker {d['node']} process" for d in down],
            base=[d["start"] - t0 for d in down], x=[min(d["end"], stop) - d["start"] for d in down],
            marker_color=_ROLE_COLORS["down"], hovertemplate="%{y}: down for %{x:.1f}s<extra></extra>"))
    if lost is not None and len(lost):
        fig.add_trace(go.Scatter(
            name=f"acknowledged, then lost ({len(lost)})", y=["lost acks"] * len(lost), x=lost["done_at"] - t0,
            mode="markers", marker=dict(color=COLORS["lost"], symbol="x", size=7),
            customdata=lost[["partition", "kafka_offset"]].to_numpy(),
            hovertemplate="acknowledged at %{x:.2f}s<br>partition %{customdata[0]} offset "
                          "%{customdata[1]}<extra></extra>"))
    for e in events:
        if e["type"] == ev.FAULT and e.get("kind") == "follower-lag" and e.get("duration_s"):
            fig.add_vrect(x0=e["t"] - t0, x1=e["t"] - t0 + e["duration_s"], fillcolor="#fdd0a2", opacity=0.5,
                          line_width=0, layer="below", annotation_text="followers held", annotation_position="top left")
        elif e["type"] == ev.FAULT and e.get("kind") == "leader-crash":
            fig.add_vline(x=e["t"] - t0, line=dict(color=_FAULT_COLOR, width=2, dash="dash"))
            fig.add_annotation(x=e["t"] - t0, y=1.06, yref="paper", showarrow=False, font=dict(color=_FAULT_COLOR),
                               text=f"leader-crash: broker {e.get('node')}")
        elif e["type"] == ev.PRODUCER_DONE:
            fig.add_vline(x=e["t"] - t0, line=dict(color="#7f7f7f", width=1))
    order = [labels[r] for r in rows] + sorted({f"broker {d['node']} process" for d in down})
    if lost is not None and len(lost):
        order.append("lost acks")
    fig.update_layout(
        title=title, barmode="overlay", xaxis_title="seconds since the run started (grey line: producer done)",
        yaxis=dict(categoryorder="array", categoryarray=order[::-1]), template="plotly_white",
        height=160 + 26 * len(order), legend=dict(orientation="h", y=-0.2), margin=dict(t=80))
    return fig


def acked_outcomes(rows: dict[str, dict],
                   title: str = "What the topic kept of what the brokers acknowledged") -> go.Figure:
    """Grouped bars per setting: acknowledged sends kept and lost (final read); sends the producer saw fail.

    ``rows`` maps a label to a report's ``topic`` section (:class:`lab.audit.topic.TopicAudit` as a dict).
    """
    labels = list(rows)
    fig = go.Figure()
    for key, name, color in (("present_once", "acknowledged, kept", COLORS["exactly-once"]),
                             ("duplicated", "acknowledged, kept twice", COLORS["duplicated"]),
                             ("lost", "acknowledged, lost", COLORS["lost"]),
                             ("failed_sends", "failed at the producer", "#7f7f7f"),
                             ("unknown_sends", "outcome unknown", "#bdbdbd")):
        vals = [int(r.get(key) or 0) for r in rows.values()]
        fig.add_trace(go.Bar(name=name, x=labels, y=vals, marker_color=color, text=vals, textposition="outside",
                             cliponaxis=False, hovertemplate="%{x}<br>" + name + ": %{y}<extra></extra>"))
    fig.update_layout(barmode="group", title=title, yaxis_title="sends", template="plotly_white", height=440,
                      legend=dict(orientation="h", y=-0.3))
    return fig


def flink_checkpoints(runs: dict[str, list[dict]],
                      title: str = "Flink's checkpoints: size and duration, with the crash") -> go.Figure:
    """Each completed checkpoint of each run (``label -> timeline events``): its size over time, its duration.

    Top: the checkpoint's size in KB (log scale; an unaligned checkpoint's in-flight records make it hundreds
    of times an aligned one's); bottom: its duration (an aligned one under back-pressure waits for its
    barriers). A crash is a dashed line in the run's colour.
    """
    from plotly.subplots import make_subplots

    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("checkpointed size (KB)", "duration (ms)"))
    for i, (label, events) in enumerate(runs.items()):
        color = palette[i % len(palette)]
        t0 = next((e["t"] for e in events if e["type"] == ev.RUN_START), events[0]["t"] if events else 0.0)
        done = [e for e in events if e["type"] == ev.FLINK_CHECKPOINT and e.get("status") == "completed"
                and not e.get("savepoint") and e.get("ack_ms")]
        x = [e["ack_ms"] / 1000 - t0 for e in done]
        hover = [f"checkpoint {e['checkpoint']} (driver "
                 f"#{e.get('attempt', 1)})<br>{(e.get('checkpointed_size') or 0) / 1024:.1f} KB, in flight "
                 f"{(e.get('persisted_data') or 0) / 1024:.1f} KB<br>{e.get('duration_ms')} ms" for e in done]
        fig.add_trace(go.Scatter(x=x, y=[max(e.get("checkpointed_size") or 0, 1) / 1024
                                         for e in done], mode="markers+lines",
                                 name=label, legendgroup=label, marker=dict(color=color, size=8), line=dict(width=1),
                                 hovertext=hover, hoverinfo="text"), row=1, col=1)
        fig.add_trace(go.Scatter(x=x, y=[e.get("duration_ms") or 0 for e in done], mode="markers+lines", name=label,
                                 legendgroup=label, showlegend=False, marker=dict(color=color, size=8),
                                 line=dict(width=1), hovertext=hover, hoverinfo="text"), row=2, col=1)
        for e in events:
            if e["type"] == ev.FAULT:
                fig.add_vline(x=e["t"] - t0, line=dict(color=color, width=2, dash="dash"))
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_xaxes(title_text="seconds since the run started", row=2, col=1)
    fig.update_layout(title=title, template="plotly_white", height=520, legend=dict(orientation="h", y=-0.15))
    return fig
