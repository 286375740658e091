"""The failure-injection control panel: press a button, watch duplicates and losses appear.

A :class:`Panel` drives one :class:`lab.run.supervisor.Run`:

* **predict** the outcome (exactly-once, at-least-once, ...) before starting;
* **start**, then press a fault button (crash the driver, kill an executor,
  drop the receiver, cut the broker, lose producer acks) while it runs;
* watch live counters, a progress bar while the topic drains, the latest
  driver restart (how long it has lasted, then how long it took:
  :mod:`lab.audit.restarts`), the fault log and a live timeline (a ``FigureWidget``);
* at the end, the **verdict** compares the prediction with the measurement.

Every press goes through :meth:`lab.run.supervisor.Run.inject`, so it is recorded
in the run's ``events.jsonl`` (time and batch) and the run can be replayed with
``lab run --faults-from runs/<run>/events.jsonl``.

Headless (``interactive=False``, as under papermill) nothing waits for a
click: the fault plan comes from the parameters, :meth:`Panel.show` runs the
scenario to the end and renders a static summary with the same plots.

Threads: button callbacks run inside ``Output.capture`` so an exception is
shown in the panel, never swallowed. One background thread refreshes the
counters by setting widget values (never ``with out:``); it stops when the
run ends, when :meth:`Panel.close` is called, or when the kernel exits.
"""

from __future__ import annotations

import atexit
import html
import threading
import time
import traceback
from dataclasses import dataclass

from lab import events as ev
from lab.audit.restarts import driver_restarts, restart_line
from lab.config import RunConfig
from lab.errors import LabError
from lab.events import read_events
from lab.faults.catalogue import FAULTS
from lab.host.start_tuning import StartTuning
from lab.outcomes import GUARANTEES  # the panel offers the same choices as the prediction buttons
from lab.registry import PIPELINES
from lab.run.result import RunStatus
from lab.run.supervisor import Run, RunResult
from lab.views import plots
from lab.views.choice import choice_row


@dataclass(frozen=True)
class LiveCounts:
    """What the panel's counters show at one moment."""

    produced: int
    acked: int
    stored_rows: int
    duplicated: int
    lost: int
    unseen: int
    read: int
    to_read: int
    batches: int
    restarts: int
    finished: bool


def live_counts(run: Run, st: RunStatus | None = None) -> LiveCounts:
    """Counters of a running scenario (audits the sink as it is now: slow events are unseen, not lost).

    ``st``: the run's status when the caller has just taken it (:meth:`Run.status` reads ``progress.json``).
    """
    st = st or run.status()
    a = run.live_audit()
    read = sum(st.positions.values())
    to_read = sum(st.end_offsets.values()) or max(st.acked, read)
    return LiveCounts(
        produced=st.produced, acked=st.acked, stored_rows=a.stored_rows, duplicated=a.duplicated, lost=a.lost,
        unseen=a.unseen, read=read, to_read=to_read, batches=st.batches, restarts=st.restarts, finished=st.finished,
    )


@dataclass(frozen=True)
class Verdict:
    predicted: str | None
    measured: str
    counts: dict
    #: Why the run could not show its lesson (lab.audit.shown); then the prediction is not judged.
    unshown: tuple[str, ...] = ()
    #: What to read the counts with (a producer far behind its rate), judged all the same.
    cautions: tuple[str, ...] = ()

    @property
    def match(self) -> bool | None:
        return None if self.predicted is None or self.unshown else self.predicted == self.measured


def verdict(predicted: str | None, result: RunResult) -> Verdict:
    """Compare a prediction with the measured guarantee of ``result``."""
    return Verdict(predicted=predicted, measured=result.audit.guarantee, counts=result.audit.counts(),
                   unshown=tuple((result.report or {}).get("could_not_show") or ()),
                   cautions=tuple((result.report or {}).get("cautions") or ()))


def counts_html(c: dict) -> str:
    """A small HTML table of a report's counts (also used for static, headless output)."""
    rows = [
        ("acknowledged", c["acked"]), ("exactly once", c["exactly_once"]),
        ("duplicated", f"{c['duplicated']} (+{c['extra_copies']} rows)"), ("lost", c["lost"]),
        ("unseen", c["unseen"]), ("unexpected rows", c["unexpected"]),
        ("write attempts / stored rows", f"{c['write_attempts']} / {c['stored_rows']}"),
        ("measured guarantee", f"<b>{html.escape(str(c.get('guarantee', '')))}</b>"),
    ]
    body = "".join(f"<tr><td style='padding:2px 12px 2px 0'>{k}</td><td><b>{v}</b></td></tr>" for k, v in rows)
    return f"<table class='lab-counts'>{body}</table>"


class Panel:
    """The control panel for one scenario.

    Parameters
    ----------
    config : RunConfig
    interactive : bool
        False: run the fault plan from ``config`` to the end without waiting
        for clicks (papermill), and render a static summary.
    refresh_s : float
        Seconds between counter refreshes.
    """

    def __init__(self, config: RunConfig, interactive: bool = True, refresh_s: float = 1.0,
                 predictions=None, label: str = "") -> None:
        import ipywidgets as w

        from lab.audit.predictions import as_choice, check_mapping

        self.config = config
        #: The run's name in a notebook's ``PREDICTIONS`` (headless: the prediction; interactively: the start value).
        self.label = label or f"{config.pipeline} pipeline"
        given = as_choice(check_mapping(predictions).get(self.label), GUARANTEES, self.label)
        self.interactive = interactive
        self.refresh_s = refresh_s
        self.run: Run | None = None
        self.result: RunResult | None = None
        self.verdict: Verdict | None = None
        self._poller: threading.Thread | None = None
        self._stop = threading.Event()
        self._closed = False
        self._started_at: float | None = None
        spec = PIPELINES[config.pipeline]

        self.title = w.HTML(
            f"<h3 style='margin:0'>{config.pipeline} pipeline · sink <code>{config.sink}</code> · "
            f"{config.events} events at {config.rate:g}/s</h3>"
        )
        self.errors = w.Output(layout={"border": "1px solid #d62728", "max_height": "200px", "overflow": "auto"})
        self.errors.layout.display = "none"
        self.predict = choice_row(GUARANTEES, given, label="Your prediction:", inline=True)
        self.start_button = w.Button(description="Start", button_style="success", icon="play")
        self.fault_buttons = {}
        for kind in spec.faults:  # the catalogue says which faults have a button, and its label
            if FAULTS[kind].button and not config.why_not(kind):  # only what this run can carry out
                label, tip = FAULTS[kind].button
                b = w.Button(description=label, tooltip=tip, button_style="danger", disabled=True)
                b.on_click(self._callback(lambda _b, k=kind: self.inject(k)))
                self.fault_buttons[kind] = b
        self.start_button.on_click(self._callback(lambda _b: self.start()))
        self.counters = w.HTML(self._counters_html(None), layout={"min_width": "600px"})
        self.progress = w.IntProgress(value=0, min=0, max=1, description="read:", bar_style="info")
        self.progress_label = w.Label("not started")
        self.restart_label = w.Label("")  # the latest driver restart (lab.audit.restarts), on a line of its own
        self.fault_log = w.HTML("<i>no faults yet</i>")
        self.verdict_html = w.HTML("")
        self.timeline = self._figure_widget()
        self._timeline_key = None
        self.widget = w.VBox([
            self.title,
            self.predict,
            w.HBox([self.start_button, *self.fault_buttons.values()]),
            w.HBox([self.counters, w.VBox([self.progress, self.progress_label, self.restart_label, self.fault_log])]),
            self.timeline,
            self.verdict_html,
            self.errors,
        ])
        atexit.register(self.close)

    # -- public ----------------------------------------------------------
    def show(self) -> RunResult | None:
        """Display the panel. Headless: run to the end first and render the static summary."""
        from IPython.display import HTML, display

        if self.interactive:
            display(self.widget)
            return None
        self.start()
        result = self.wait()
        display(HTML(self.summary_html()))
        for fig in self.figures():
            fig.show()
        return result

    def start(self) -> None:
        """Start the scenario (once)."""
        if self.run is not None:
            return
        self.start_button.disabled = True
        self.predict.disabled = True  # the prediction is frozen here: what is chosen later does not count
        self._started_at = time.time()
        # A Crash button may be pressed at any time: the next driver waits, started ahead (LAB_STANDBY).
        self.run = Run(self.config, tuning=StartTuning.from_env(standby_default="always"))
        self.run.start()
        for b in self.fault_buttons.values():
            b.disabled = False
        self.progress_label.value = f"run {self.run.run_dir.name}"
        self._poller = threading.Thread(target=self._poll, name="lab-panel", daemon=True)
        self._poller.start()

    def inject(self, kind: str) -> dict:
        """Inject a fault now, as a press of its button does."""
        if self.run is None:
            raise RuntimeError("press Start first: there is no running scenario to inject a fault into")
        if self.run.status().finished:
            raise RuntimeError("the scenario has finished; start a new panel to inject more faults")
        return self.run.inject(kind, source="ui", **dict(FAULTS[kind].panel_options))

    def wait(self, timeout: float | None = None) -> RunResult:
        """Block until the scenario ends; stop the refresh thread; return the result.

        Do not call this in interactive use before the run is over: while a cell
        runs, the kernel cannot process button presses.
        """
        if self.run is None:
            raise RuntimeError("the scenario was not started")
        try:
            self.result = self.run.wait(timeout)
        finally:
            self._stop_poller()
        self._final_render()
        return self.result

    def close(self) -> None:
        """Stop the scenario (every process) and the refresh thread. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self.run is not None:
            self.run.stop()
        self._stop_poller()
        self._disable_faults()

    def figures(self) -> list:
        """The run's figures: delivery counts, the per-event strip and the timeline."""
        if self.result is None:
            raise RuntimeError("the scenario has not finished")
        events = read_events(self.result.run_dir)
        return [plots.delivery_counts(self.result.audit), plots.event_strip(self.result.audit.table),
                plots.timeline(events)]

    def summary_html(self) -> str:
        """Static summary: prediction, measured counts, the fault log."""
        v = self.verdict
        parts = [self.title.value, counts_html(self.result.report), self._verdict_html(v), self.fault_log.value]
        return "<div class='lab-panel-static'>" + "".join(parts) + "</div>"

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    # -- inside -----------------------------------------------------------
    def _callback(self, fn):
        """Wrap a widget callback so an exception shows in the panel's error box."""

        @self.errors.capture()
        def handler(*args):
            try:
                fn(*args)
            except LabError as exc:  # a refusal that names its reason: one line, no traceback
                self._show_error(f"{exc}\n")
            except Exception as exc:  # shown in the panel: a press that failed must say why
                self._show_error(f"{type(exc).__name__}: {exc}\n" + traceback.format_exc())

        return handler

    def _figure_widget(self):
        import plotly.graph_objects as go

        fig = plots.timeline([])
        fig.update_layout(height=320, legend=dict(orientation="h", y=-0.4), margin=dict(b=90), autosize=True)
        return go.FigureWidget(fig)

    def _counters_html(self, c: LiveCounts | None) -> str:
        if c is None:
            vals = dict.fromkeys(("produced", "acknowledged", "in sink (rows)", "duplicates", "lost so far", "unseen"),
                                 "–")
        else:
            vals = {"produced": c.produced, "acknowledged": c.acked, "in sink (rows)": c.stored_rows,
                    "duplicates": c.duplicated, "lost so far": c.lost, "unseen": c.unseen}
        colors = {"duplicates": plots.COLORS["duplicated"], "lost so far": plots.COLORS["lost"]}
        cells = "".join(
            f"<div style='display:inline-block;margin:0 14px 6px 0;text-align:center'>"
            f"<div style='font-size:22px;font-weight:600;color:{colors.get(k, '#333')}' class='lab-counter' "
            f"data-name='{k}'>{v}</div><div style='font-size:11px;color:#666'>{k}</div></div>"
            for k, v in vals.items()
        )
        return f"<div class='lab-counters'>{cells}</div>"

    def _poll(self) -> None:
        shown = set()
        while not self._stop.is_set():
            try:
                status = self.run.status()
                if status.ended:  # the run refuses faults from here on (Run.inject): the buttons say so
                    self._disable_faults()
                self._refresh(status)
                if status.finished:
                    break
            except Exception as exc:
                # Shown once per kind of error; the next refresh may well succeed (a file being written).
                if repr(exc) not in shown:
                    shown.add(repr(exc))
                    self._show_error(traceback.format_exc())
            self._stop.wait(self.refresh_s)
        if not self._stop.is_set() and self.run is not None and self.run.status().finished:
            try:
                self.result = self.run.wait(0)
                self._final_render()
            except Exception:
                self._show_error(traceback.format_exc())

    def _refresh(self, status: RunStatus) -> None:
        c = live_counts(self.run, status)
        self.counters.value = self._counters_html(c)
        self.progress.max = max(1, c.to_read)
        self.progress.value = min(c.read, self.progress.max)
        events = read_events(self.run.run_dir)
        self.progress_label.value = f"{c.read}/{c.to_read} offsets read · batch {c.batches} · restarts {c.restarts}"
        self._show_restart(events)
        faults = [e for e in events if e["type"] == ev.FAULT]
        if faults:
            self.fault_log.value = "<b>fault log</b><br>" + "<br>".join(
                f"t={e.get('elapsed_s', 0):.1f}s · {e['kind']} · by {e.get('by')}"
                + (f" · batch {e['batch']}" if e.get("batch") is not None else "") for e in faults
            )
        key = (sum(e["type"] == ev.BATCH_DONE for e in events), len(faults),
               sum(e["type"] in (ev.DRIVER_START, ev.PRODUCER_DONE) for e in events))
        if key != self._timeline_key:
            self._timeline_key = key
            span = max(5.0, self.run.elapsed() + 1)
            new = plots.timeline(events, x_span=span)  # its labels laid out for the axis shown
            with self.timeline.batch_update():
                self.timeline.data = []
                self.timeline.add_traces(list(new.data))
                self.timeline.layout.shapes = new.layout.shapes
                self.timeline.layout.annotations = new.layout.annotations
                self.timeline.layout.yaxis.range = new.layout.yaxis.range
                self.timeline.layout.xaxis.range = [0, span]
                self.timeline.layout.margin.t = new.layout.margin.t
                self.timeline.layout.height = new.layout.height - 40

    def _final_render(self) -> None:
        if self.result is None:
            return
        self.verdict = verdict(self.predict.value, self.result)
        self._record()
        self.counters.value = self._counters_html(LiveCounts(
            produced=self.result.audit.acked + self.result.audit.failed_sends + self.result.audit.unknown_sends,
            acked=self.result.audit.acked, stored_rows=self.result.audit.stored_rows,
            duplicated=self.result.audit.duplicated, lost=self.result.audit.lost, unseen=self.result.audit.unseen,
            read=0, to_read=0, batches=self.result.batches, restarts=self.result.restarts, finished=True))
        self.progress.value = self.progress.max
        self.progress.bar_style = "success"
        self._show_restart(read_events(self.result.run_dir))  # the last refresh may predate the run's end
        self.verdict_html.value = self._verdict_html(self.verdict)
        self._disable_faults()

    def _record(self) -> None:
        """The prediction as frozen at Start, judged on the run's counts, in the run's ``prediction.json``."""
        from lab.audit.predictions import Prediction, judge, record

        source = "buttons" if self.interactive else "PREDICTIONS"
        outcome = self.predict.value
        judged = judge(Prediction(self.label, outcome, source if outcome else "none", self._started_at or 0.0),
                       self.result.report)
        record(judged, self.result.run_dir)

    def _show_restart(self, events: list[dict]) -> None:
        """The latest restart: how long it has lasted, how long it took, or that it did no batch."""
        restarts = driver_restarts(events)
        if restarts:
            self.restart_label.value = restart_line(restarts[-1], time.time())

    def _disable_faults(self) -> None:
        for b in self.fault_buttons.values():
            b.disabled = True

    @staticmethod
    def _verdict_html(v: Verdict | None) -> str:
        if v is None:
            return ""
        if v.unshown:
            head = (f"Measured: <b>{v.measured}</b>, not judged: this run could not show its lesson: "
                    f"{html.escape('; '.join(v.unshown))}.")
        elif v.predicted is None:
            head = f"Measured: <b>{v.measured}</b> (no prediction recorded)"
        elif v.match:
            head = f"✔ You predicted <b>{v.predicted}</b>; measured <b>{v.measured}</b>."
        else:
            head = f"✘ You predicted <b>{v.predicted}</b>; measured <b>{v.measured}</b>."
        c = v.counts
        caution = f"<br><i>Caution: {html.escape('; '.join(v.cautions))}.</i>" if v.cautions else ""
        return (f"<div class='lab-verdict' style='font-size:15px;margin-top:6px'>{head} "
                f"{c['duplicated']} duplicated, {c['lost']} lost of {c['acked']} acknowledged.{caution}</div>")

    def _show_error(self, text: str) -> None:
        # append_stderr sets the widget's outputs; safe from a background thread (no `with out:`).
        self.errors.layout.display = None
        self.errors.append_stderr(text)

    def _stop_poller(self) -> None:
        self._stop.set()
        if self._poller is not None and self._poller is not threading.current_thread():
            self._poller.join(10)
