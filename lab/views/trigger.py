"""Notebook 03's view of real-time mode: what a crash wrote twice, and the latency, against the trigger's interval;
for a deduplication, its state read back against the ledger.

Reads finished runs (their timeline, checkpoint, ledger and report) and writes nothing. Figures are
:class:`plotly.graph_objects.Figure`; tables pandas DataFrames.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab import events as ev
from lab.audit.ledger import sends_frame
from lab.events import read_events
from lab.pipelines.structured.checkpoint import Checkpoint
from lab.sinks.spec import SinkSpec
from lab.sinks.topic import TopicSink
from lab.spark.trigger import parse_trigger
from lab.views.run_files import read_json, spark_state

#: What a run's ``could not show`` column says when its kill found nothing written past the last commit.
NOTHING_TO_SHOW = ("the kill found nothing written past the last commit: nothing to write twice; run the cell "
                   "again, or crash later")


def _could_not_show(window: dict | None) -> str:
    return NOTHING_TO_SHOW if window and not window["written_before_kill"] else ""


def crash_window(result) -> dict | None:
    """Where a run's first driver crash fell against the checkpoint: ``None`` without a crash.

    ``since_commit_s``: seconds from the last commit-log entry Spark wrote before the kill (or from the
    query's start when none) to the kill; None when the kill came before the query started. ``past_commit``:
    events the producer had sent by then at offsets past that commit's end offsets: what the restarted query
    reads again. ``written_before_kill``: those of
    them whose first copy in the output topic is older than the kill (its Kafka timestamp; the ``fault``
    event is written after the kill): what the replay writes a second time. A query that keeps up writes
    nearly all of ``past_commit`` before the kill; one still catching up after its start writes fewer.
    For ``window-count`` ``written_before_kill`` counts updates: those older than the kill whose count is above
    what the ledger's events up to that commit's end offsets give their (window, key), i.e. the cut batch's.
    """
    events = read_events(result.run_dir)
    kill = next((e for e in events if e["type"] == ev.FAULT and e.get("kind") == "driver-crash"), None)
    if kill is None:
        return None
    commits = result.run_dir / "checkpoint" / "commits"
    written = (sorted((f.stat().st_mtime, int(f.name)) for f in commits.iterdir() if f.name.isdigit())
               if commits.is_dir() else [])
    before = [(t, b) for t, b in written if t < kill["t"]]
    ends: dict[int, int] = {}
    if before:
        ends = Checkpoint(result.run_dir / "checkpoint").end_offsets(before[-1][1]) or {}
    # The killed driver's query start: none when the kill came before it (the next driver's is after the kill).
    query = next((e["t"] for e in events if e["type"] == ev.DRIVER_PHASE and e.get("phase") == "query"
                  and e["t"] < kill["t"]), None)
    sends = sends_frame(result.run_dir / "ledger.sqlite")
    sent = sends[(sends["status"] == "acked") & (sends["sent_at"] < kill["t"])]
    past_ids = {eid for eid, p, o in zip(sent["event_id"], sent["partition"], sent["kafka_offset"])
                if int(o) >= ends.get(int(p), 0)}
    with TopicSink(SinkSpec.load(result.run_dir)) as sink:
        if sink.holds_windows:
            window_ms = int(round(float(read_json(result.run_dir / "config.json")["window_s"]) * 1000))
            written_before = len(cut_batch_updates(result.run_dir, sink.windows(), ends, kill["t"], window_ms))
        else:
            ids, times = sink.view("read_committed")[1], sink.timestamps("read_committed")
            written_before = len({eid for eid, ts in zip(ids, times) if ts < kill["t"] * 1000 and eid in past_ids})
    since = before[-1][0] if before else query
    return {"since_commit_s": None if since is None else round(kill["t"] - since, 2),
            "commits_before": len(before), "past_commit": len(past_ids), "written_before_kill": written_before}


def cut_batch_updates(run_dir, windows: list[tuple], ends: dict[int, int], kill_t: float,
                      window_ms: int) -> list[tuple]:
    """The ``window-count`` updates (:func:`lab.sinks.topic.read_windows` rows) a batch cut by a kill at ``kill_t``
    had sent: older than the kill, with a count above what the ledger's acknowledged events below ``ends`` (the last
    commit's end offsets) give their (window, key)."""
    from lab.audit.window import below, ledger_window_counts, read_event_times

    events = read_event_times(run_dir / "ledger.sqlite")
    committed = ledger_window_counts(events, below(events, ends), window_ms)
    return [r for r in windows if r[6] < kill_t * 1000 and r[5] > committed.get((r[2], r[4]), 0)]


def sweep_table(results: dict):
    """One row per run: its trigger, what the crash wrote twice and what lay past the last commit, the latency;
    ``could not show`` says when the kill found nothing written past the last commit (:data:`NOTHING_TO_SHOW`)."""
    import pandas as pd

    rows = []
    for label, r in results.items():
        trigger = parse_trigger(r.config.spark.trigger)
        window = crash_window(r) or {}
        lat = r.report.get("latency") or {}
        rows.append({"run": label, "trigger": trigger.to_text(),
                     "interval (s)": trigger.interval_s if trigger.real_time else r.config.batch_interval_s,
                     "duplicated": r.audit.duplicated, "past the last commit at the crash": window.get("past_commit"),
                     "of them written before the kill": window.get("written_before_kill"),
                     "seconds since that commit": window.get("since_commit_s"),
                     "latency p50 (ms)": lat.get("steady_p50_ms"), "latency p95 (ms)": lat.get("steady_p95_ms"),
                     "lost": r.audit.lost, "could not show": _could_not_show(window)})
    return pd.DataFrame(rows).set_index("run")


def sweep_figure(table, rate: float,
                 title: str = "Real-time mode: the interval sets the duplicates, not the latency") -> go.Figure:
    """Two panels from :func:`sweep_table`: events written twice (and the interval's bound, ``rate`` x interval)
    per run, and the steady-state latency per run (log scale)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("events written twice after the crash",
                                                        "latency, send to output (events sent after the first output)"))
    x = [f"{run}" for run in table.index]
    fig.add_trace(go.Bar(x=x, y=table["duplicated"], name="duplicated (audit)", text=table["duplicated"],
                         textposition="outside", marker_color="#d62728"), 1, 1)
    fig.add_trace(go.Scatter(x=x, y=table["past the last commit at the crash"], mode="markers",
                             name="sent past the last commit",
                             marker=dict(symbol="diamond", size=11, color="#1f77b4")), 1, 1)
    fig.add_trace(go.Scatter(x=x, y=table["of them written before the kill"], mode="markers",
                             name="of them written before the kill", marker=dict(symbol="x", size=10, color="#000000")),
                  1, 1)
    real = table["trigger"].str.startswith("real-time")
    fig.add_trace(go.Scatter(x=[x[i] for i in range(len(x)) if real.iloc[i]],
                             y=[rate * v for v, rt in zip(table["interval (s)"], real) if rt], mode="markers",
                             name="rate x interval", marker=dict(symbol="line-ew-open", size=26, color="#7f7f7f")), 1,
                  1)
    for col, color in (("latency p50 (ms)", "#2ca02c"), ("latency p95 (ms)", "#98df8a")):
        fig.add_trace(go.Bar(x=x, y=table[col], name=col.replace(" (ms)", ""), marker_color=color,
                             text=[None if v != v or v is None else f"{v:.0f}" for v in table[col]],
                             textposition="outside"), 1, 2)
    fig.update_yaxes(title_text="events", row=1, col=1)
    fig.update_yaxes(title_text="ms", type="log", row=1, col=2)
    fig.update_layout(title=title, template="plotly_white", height=420, barmode="group",
                      legend=dict(orientation="h", y=-0.2))
    return fig


def state_table(results: dict):
    """One row per ``dedupe`` or ``window-count`` run into the Kafka sink: what its output holds twice, and its state
    read back.

    The state is read by Spark's own reader (:func:`lab.views.run_files.spark_state`) as the run's last committed
    batch left it, and compared with the ledger's acknowledged events up to that batch's end offsets. ``dedupe``:
    id by id, ``ids not in the ledger`` and ``ledger ids not in the state`` both 0 is a state that holds every event
    once; ``duplicated (output)`` is the audit's count of the output topic. ``window-count``: count by count,
    ``windows over the ledger`` and ``windows under the ledger`` both 0 is a state whose every count is the ledger's;
    ``updates (output)`` are the topic's records, ``re-sent updates (output)`` the
    topic's updates sent again (:func:`lab.sinks.topic.resent_updates`), and ``windows exact (output)`` the audit's
    windows whose last count in the topic is the ledger's. ``of them written before the kill``
    (:func:`crash_window`) is what the run's own files say the crash wrote twice. ``could not show`` says when the
    kill found nothing written past the last commit, so that the run could not show a duplicate.

    Raises
    ------
    RuntimeError
        When Spark's state reader fails (its error in one line).
    """
    import pandas as pd

    rows = []
    for label, r in results.items():
        last = Checkpoint(r.run_dir / "checkpoint").last_committed()
        window = crash_window(r) or {}
        windows = r.config.query == "window-count"
        row = {"run": label, "trigger": parse_trigger(r.config.spark.trigger).to_text()}
        if windows:
            row.update({"updates (output)": r.report.get("window_updates"),
                        "re-sent updates (output)": r.report.get("resent_updates"),
                        "windows exact (output)": f"{r.report.get('windows_exact')} / {r.report.get('windows')}"})
        else:
            row["duplicated (output)"] = r.audit.duplicated
        row.update({"of them written before the kill": window.get("written_before_kill"), "lost": r.audit.lost,
                    "last committed batch": last,
                    "could not show": _could_not_show(window)})
        if last >= 0:
            state = spark_state(r.run_dir, [last])[0].loc[last]
            acked = int(state["events up to its end offsets"])
            if windows:
                row.update({"windows in the state": int(state["state rows"]),
                            "counts in the state": int(state["counts in the state"]),
                            "events acknowledged up to it": acked,
                            "windows over the ledger": int(state["windows over the ledger"]),
                            "windows under the ledger": int(state["windows under the ledger"])})
                row["state exact"] = row["windows over the ledger"] == row["windows under the ledger"] == 0
            else:
                row.update({"ids in the state": int(state["state rows"]), "events acknowledged up to it": acked,
                            "ids not in the ledger": int(state["ids not in the ledger"]),
                            "ledger ids not in the state": int(state["ledger ids not in the state"])})
                row["state exact"] = row["ids not in the ledger"] == row["ledger ids not in the state"] == 0
        rows.append(row)
    return pd.DataFrame(rows).set_index("run")


def _require_state(row) -> None:
    """Raise :class:`lab.errors.LabError` for a :func:`state_table` row whose run committed no batch (no state)."""
    from lab.errors import LabError

    if "state exact" not in row or row["state exact"] != row["state exact"]:
        raise LabError(f"run {row.name!r} committed no batch: its state could not be read")


def state_outcome(row) -> tuple[str, str]:
    """The answer to the question "dedupe state" (:data:`lab.audit.predictions.QUESTIONS`) from a
    :func:`state_table` row: ``every event once``, ``some events missing`` or ``ids of no event``, and the counts."""
    _require_state(row)
    missing, foreign = int(row["ledger ids not in the state"]), int(row["ids not in the ledger"])
    outcome = "some events missing" if missing else "ids of no event" if foreign else "every event once"
    return outcome, (f"{int(row['ids in the state'])} ids in the state at batch {int(row['last committed batch'])}, "
                     f"{int(row['events acknowledged up to it'])} events acknowledged up to it; {missing} missing, "
                     f"{foreign} not in the ledger")


def window_state_outcome(row) -> tuple[str, str]:
    """The answer to the question "window state" (:data:`lab.audit.predictions.QUESTIONS`) from a ``window-count``
    :func:`state_table` row: ``every count exact``, ``some counts over`` or ``some counts under``, and the counts."""
    _require_state(row)
    over, under = int(row["windows over the ledger"]), int(row["windows under the ledger"])
    outcome = "some counts over" if over else "some counts under" if under else "every count exact"
    return outcome, (f"{int(row['windows in the state'])} (window, key) counts in the state at batch "
                     f"{int(row['last committed batch'])}, summing to {int(row['counts in the state'])}; "
                     f"{int(row['events acknowledged up to it'])} events acknowledged up to it; {over} over, "
                     f"{under} under the ledger")


def updates_outcome(row) -> tuple[str, str]:
    """The answer to the question "window updates" from a ``window-count`` :func:`state_table` row: ``each update
    once`` (none sent again), ``the cut batch's updates twice`` (those sent again are exactly the updates the run's own
    files say the cut batch had sent, :func:`crash_window`) or ``more updates twice``, and the counts."""
    resent, before = int(row["re-sent updates (output)"]), row["of them written before the kill"]
    before = None if before is None or before != before else int(before)
    outcome = ("each update once" if resent == 0 else "the cut batch's updates twice" if resent == before
               else "more updates twice")
    return outcome, (f"{int(row['updates (output)'])} updates in the output topic, {resent} of them sent again; "
                     f"the cut batch had sent {before} before the kill")
