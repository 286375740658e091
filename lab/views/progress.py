"""A run in a notebook: its mode (widgets or text lines), its progress while it runs, its one-line result, its display.

The notebooks reach these through :mod:`lab.notebook`; the exercises' checks
(:mod:`lab.lessons.solve`) run through them too, so a solution's run shows
as a lesson's does.
"""

from __future__ import annotations

from lab import events as ev
from lab.config import RunConfig, make_config
from lab.run.supervisor import Run, RunResult

#: The notebook's ``INTERACTIVE`` as :func:`setup` was given it.
_MODE = {"interactive": True}


def setup(interactive: bool = True) -> None:
    """Prepare the notebook: plotly figures render live in JupyterLab *and* in executed/HTML copies.

    ``plotly_mimetype`` is what JupyterLab draws; ``notebook`` embeds plotly.js
    in the output, so a papermill run exported to HTML shows the same figures
    with no network.

    ``interactive`` is the notebook's ``INTERACTIVE``, and means the same in
    every notebook: ``True``, widgets (progress bars, prediction buttons, the
    panel) that a person watches and clicks; ``False`` (papermill, CI), nothing
    waits for a click, predictions come from ``PREDICTIONS`` and progress is
    printed as text lines.
    """
    import plotly.io as pio

    pio.renderers.default = "plotly_mimetype+notebook"
    _MODE["interactive"] = bool(interactive)


def is_interactive() -> bool:
    """The ``INTERACTIVE`` the notebook gave :func:`setup`."""
    return _MODE["interactive"]


def config(**params) -> RunConfig:
    """:func:`lab.config.make_config` with parameter names as notebooks write them (UPPER_CASE allowed)."""
    return make_config(**{k.lower(): v for k, v in params.items()})


#: Seconds between two text progress lines of a headless run.
TEXT_PROGRESS_EVERY_S = 5.0


def run(cfg: RunConfig, quiet: bool = False, turn: str = "") -> RunResult:
    """Run one scenario to the end, showing its progress, and return its result.

    Progress is a bar interactively and a text line every
    :data:`TEXT_PROGRESS_EVERY_S` seconds (and at each restart) headless, where a
    widget would print nothing. ``turn``: a matrix row started ahead; its run
    waits for this file once its first driver has started (:func:`lab.matrix.rows.wait_for_turn`).

    Delivery guarantee: none of its own; it measures the pipeline's. On
    interrupt (the stop button), every process of the run is ended first.
    """
    import ipywidgets as w
    from IPython.display import display

    r = Run(cfg)
    if turn:
        from lab.matrix.rows import wait_for_turn

        r.start(hold=lambda: wait_for_turn(turn))
    else:
        r.start()
    bar = w.IntProgress(value=0, min=0, max=max(1, cfg.events), description="read:", bar_style="info")
    label = w.Label(f"run {r.run_dir.name}")
    text = not quiet and not is_interactive()
    if not quiet and not text:
        display(w.HBox([bar, label]))
    if text:
        print(f"run {r.run_dir.name}: {cfg.events} events, faults: {cfg.faults or 'none'}", flush=True)
    last_line, last_restarts = 0.0, 0
    ui = ev.EventTail(r.run_dir) if cfg.spark.spark_ui else None
    try:
        while not r.status().finished:
            for e in ui.read_new() if ui else ():
                if e["type"] == ev.SPARK_UI:  # each driver attempt has a UI of its own
                    from lab.spark.session import ui_hint

                    print(f"Spark UI of driver attempt {e['attempt']}: {e['url']}  ({ui_hint(cfg.pipeline)})",
                          flush=True)
            st = r.status()
            total = sum(st.end_offsets.values()) or st.acked or 1
            bar.max = max(1, total)
            bar.value = min(sum(st.positions.values()), bar.max)
            label.value = f"batch {st.batches} · restarts {st.restarts} · {st.elapsed_s:.0f}s"
            if text and (st.elapsed_s - last_line >= TEXT_PROGRESS_EVERY_S or st.restarts != last_restarts):
                print(f"  {st.elapsed_s:5.1f}s  read {bar.value}/{total}  {label.value}", flush=True)
                last_line, last_restarts = st.elapsed_s, st.restarts
            r.finished_within(0.5)  # not a plain sleep: the result comes as soon as the run has it
    except BaseException:  # the stop button: end every process of the run, then stop
        r.stop()
        raise
    result = r.wait()
    bar.value, bar.bar_style = bar.max, "success"
    if not quiet:
        print(f"{cfg.pipeline}/{cfg.sink} faults={cfg.faults or 'none'}: {result.audit.guarantee} "
              f"({result.audit.duplicated} duplicated, {result.audit.lost} lost of {result.audit.acked}) "
              f"in {result.timings.get('total_s', 0):.0f}s -> {result.run_dir}")
    return result


def show(result: RunResult) -> None:
    """Display a result: counts table and the three figures."""
    from IPython.display import HTML, display

    from lab.views import plots
    from lab.views.panel import counts_html

    display(HTML(counts_html(result.report)))
    if result.audit.windows is not None:  # window-count: the sink holds counts, audited per window
        plots.window_counts(result.audit.table).show()
    else:
        plots.delivery_counts(result.audit).show()
        plots.event_strip(result.audit.table).show()
    plots.timeline(ev.read_events(result.run_dir)).show()
