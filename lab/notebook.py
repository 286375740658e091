"""What the notebooks call: set up, run a scenario with progress, show its result.

Thin by design: the logic lives in :mod:`lab.supervisor`, :mod:`lab.auditor`
and :mod:`lab.plots`; this module only displays.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from lab import events as ev
from lab.config import RunConfig, make_config
from lab.predict_ui import verdicts  # noqa: F401  (notebooks call nb.verdicts)
from lab.run_files import (checkpoint_log, file_sink_readers, files_under, offset_log_entry,  # noqa: F401
                           read_json, state_store)  # (the notebooks call them as nb.<name>)
from lab.solve import solve  # noqa: F401  (solutions call nb.solve)
from lab.supervisor import Run, RunResult

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


def predict(scenarios, predictions=None, **kwargs):
    """:func:`lab.predict_ui.predict` in the notebook's mode: buttons interactively, ``PREDICTIONS`` headless."""
    from lab.predict_ui import predict as show_buttons

    return show_buttons(scenarios, predictions, interactive=is_interactive(), **kwargs)


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
    waits for this file once its first driver has started (:func:`lab.matrix_rows.wait_for_turn`).

    Delivery guarantee: none of its own; it measures the pipeline's. On
    interrupt (the stop button), every process of the run is ended first.
    """
    import ipywidgets as w
    from IPython.display import display

    r = Run(cfg)
    if turn:
        from lab.matrix_rows import wait_for_turn

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
    ui = ev.EventTail(r.run_dir) if cfg.spark_ui else None
    try:
        while not r.status().finished:
            for e in ui.read_new() if ui else ():
                if e["type"] == ev.SPARK_UI:  # each driver attempt has a UI of its own
                    from lab.spark import ui_hint

                    print(f"Spark UI of driver attempt {e['attempt']}: {e['url']}  ({ui_hint(cfg.pipeline)})", flush=True)
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

    from lab import plots
    from lab.events import read_events
    from lab.ui import counts_html

    display(HTML(counts_html(result.report)))
    if result.audit.windows is not None:  # window-count: the sink holds counts, audited per window
        plots.window_counts(result.audit.table).show()
    else:
        plots.delivery_counts(result.audit).show()
        plots.event_strip(result.audit.table).show()
    plots.timeline(read_events(result.run_dir)).show()


def compare(results: dict[str, RunResult]):
    """A table of several results side by side (a pandas DataFrame, one row per label)."""
    import pandas as pd

    rows = []
    for label, r in results.items():
        c = r.audit.counts()
        rows.append({"scenario": label, "guarantee": c["guarantee"], "acked": c["acked"],
                     "exactly once": c["exactly_once"], "duplicated": c["duplicated"], "lost": c["lost"],
                     "unseen": c["unseen"], "unexpected": c["unexpected"], "write attempts": c["write_attempts"], "stored rows": c["stored_rows"]})
        if c.get("late_dropped") or "windows" in c:
            rows[-1].update({k.replace("_", " "): c.get(k) for k in (
                "late_dropped", "windows", "windows_exact", "windows_over", "windows_under", "overcount", "undercount")})
        if "source_duplicates" in r.report:
            rows[-1]["source duplicates"] = r.report["source_duplicates"]
    return pd.DataFrame(rows).set_index("scenario")


def recovery_s(result: RunResult) -> float | None:
    """The run's first restart: seconds from the driver's death to the next driver's first batch done.

    From the report's ``restart_s`` (:mod:`lab.restarts`). ``None`` without a
    restart, or when the restarted driver did no batch.
    """
    restarts = result.report.get("restart_s") or [None]
    return restarts[0]


#: The brokers this kernel started: runs directory -> its :class:`lab.broker.BrokerInfo`.
_started: dict = {}


def start_broker():
    """Start an embedded broker for this notebook; runs reuse it and it stays up between them.

    It dies with the kernel (and :func:`stop_broker` ends it earlier), so a
    notebook can look into Kafka after a run, e.g. at a consumer group's offsets.
    A broker already running for the runs directory (``lab broker start``, a
    workshop's, a test session's) is used as it is, and never stopped from here.
    """
    from lab import shared_broker

    runs = Path(make_config().runs_dir)
    return shared_broker.load_running(runs) or _start(runs)


def start_cluster() -> Path:
    """Start the lab's three-broker cluster for this notebook; return the runs directory its runs use.

    A cluster ``lab broker start --nodes 3`` left running for the runs directory
    is used as it is (never stopped from here), and that directory is returned.
    Otherwise the cluster gets a runs directory of its own, ``<runs>/cluster``,
    so a single broker another notebook started keeps serving ``<runs>``. Pass
    the returned path as ``runs_dir``, with ``nodes=3``, to :func:`config`.

    The cluster is started as ``lab broker start --nodes 3`` starts it (detached):
    a broker a ``leader-crash`` restarts must outlive the run that restarted it.
    It is stopped when the kernel exits (:func:`stop_broker` stops it earlier);
    after a kernel killed with ``kill -9``, the next kernel's call finds it and
    reuses it (and stops it at its exit); ``LAB_RUNS_DIR=<runs>/cluster lab broker stop``
    ends it too.
    Measured on 2 cores: up in about 8 s, about 0.9 GB of memory in all.

    Raises
    ------
    lab.errors.LabError
        When ``<runs>/cluster`` records a broker that is not a three-node cluster.
    """
    import atexit

    from lab import shared_broker

    runs = Path(make_config().runs_dir)
    running = shared_broker.load_running(runs)
    if running and running.node_count == 3:
        return runs
    own = runs / "cluster"
    shared_broker.start_detached(own, nodes=3)  # an already running one is checked (3 nodes) and reused
    if not _started:
        atexit.register(stop_broker)
    _started[own] = None  # detached: stopped through its record, which a node restart keeps current
    return own


def _start(runs: Path):
    """Start an embedded broker as a child of the kernel, recorded for ``runs``."""
    import atexit

    from lab import broker, shared_broker

    info = broker.start_embedded(runs / "broker-logs")  # a child of the kernel: gone when the kernel is
    shared_broker.save_state(runs, info)
    if not _started:
        atexit.register(stop_broker)
    _started[runs] = info
    return info


def stop_broker() -> None:
    """Stop every broker :func:`start_broker` or :func:`start_cluster` started in this kernel (nothing if none)."""
    from lab import broker, shared_broker

    while _started:
        runs, info = _started.popitem()
        if info is None:
            shared_broker.stop_detached(runs)
            continue
        running = shared_broker.load_running(runs)
        if running and running.proxy_pid == info.proxy_pid:  # still the record of ours (a broker-crash may renew the JVM)
            shared_broker.state_file(runs).unlink(missing_ok=True)
            info = running
        broker.stop_embedded(info)


def group_offsets(result: RunResult) -> dict[int, int | None]:
    """The offsets a run's consumer group has committed in Kafka, per partition (None: nothing committed).

    Needs the broker the run used to be running (see :func:`start_broker`).
    """
    from kafka import TopicPartition

    from lab import kafka_tools

    bootstrap = json.loads((result.run_dir / "broker.json").read_text())["bootstrap"]
    c = kafka_tools.consumer(bootstrap, group_id=f"lab-{result.run_dir.name}")
    try:
        return {p: c.committed(TopicPartition(result.config.topic, p)) for p in range(result.config.partitions)}
    finally:
        c.close()


def crash_story(result: RunResult) -> list[str]:
    """The run's own timeline around its faults, in sentences: what was done, what was lost, what ran again."""
    from lab.events import read_events

    events = read_events(result.run_dir)
    t0 = next((e["t"] for e in events if e["type"] == ev.RUN_START), events[0]["t"] if events else 0.0)
    lines = []
    for e in events:
        t = f"t={e['t'] - t0:5.1f}s"
        kind = e["type"]
        if kind == ev.FAULT:
            where = f" at {e['point']} of batch {e['batch']}" if e.get("point") else ""
            lines.append(f"{t}  FAULT {e['kind']}{where} (by {e.get('by', e.get('source'))})")
        elif kind == ev.DRIVER_START and e.get("attempt", 1) > 1:
            lines.append(f"{t}  driver restarted (attempt {e['attempt']})")
        elif kind == ev.BATCH_LOST:
            detail = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("t", "type", "source"))
            lines.append(f"{t}  batch LOST: {detail}")
        elif kind == ev.BATCH_START and (e.get("replay") or e.get("recovered")):
            lines.append(f"{t}  batch {e['batch']} runs again ({e.get('rows')} rows)")
    a = result.audit
    lines.append(f"result: {a.exactly_once} exactly once, {a.duplicated} duplicated, {a.lost} lost of {a.acked}")
    return lines


def kafka_reader_options(result: RunResult) -> tuple[str, dict]:
    """The Kafka reader a structured run used, and the options its driver passed to that source.

    The same pure functions the driver calls (:data:`lab.pipelines.structured_input.READER_OPTIONS`),
    given the run's own config and the bootstrap of its ``broker.json``: what really ran.
    """
    from lab.pipelines.structured_input import READER_OPTIONS

    cfg = result.config
    reader = result.report.get("settings", {}).get("kafka_reader", cfg.kafka_reader)
    bootstrap = read_json(result.run_dir / "broker.json")["bootstrap"]
    options = READER_OPTIONS[reader][1](bootstrap, cfg.topic, cfg.partitions, cfg.max_batch_records,
                                        cfg.isolation_level)
    return reader, options


def aborted_in_sink(result: RunResult) -> int:
    """Sink rows of events whose transaction the producer aborted (``txn-abort``): delivered, never owed."""
    from lab.ledger import LEDGER_FILE
    from lab.run_report import aborted_ids
    from lab.sinks import open_sink

    aborted = set(aborted_ids(result.run_dir / LEDGER_FILE))
    with open_sink(result.run_dir) as sink:
        return sum(n for eid, n in sink.event_counts() if eid in aborted)


def aborted_summary(results: dict[str, RunResult]):
    """Runs with aborted transactions side by side (a pandas DataFrame, one row per label).

    ``aborted in topic``: the aborted sends a ``read_uncommitted`` read of the
    topic finds; ``aborted in sink``: sink rows of them (:func:`aborted_in_sink`).
    """
    import pandas as pd

    rows = []
    for label, r in results.items():
        rep = r.report
        rows.append({"run": label, "isolation": rep["settings"]["isolation"], "acked": rep["acked"],
                     "exactly once": rep["exactly_once"], "lost": rep["lost"],
                     "aborted sends": rep["aborted_sends"], "aborted in topic": rep.get("aborted_in_topic", 0),
                     "aborted in sink": aborted_in_sink(r), "unexpected": rep["unexpected"]})
    return pd.DataFrame(rows).set_index("run")


def fencing(records: int = 20, successor_records: int = 10):
    """Run :func:`lab.fencing.measure` against this notebook's broker and display its table.

    The broker is :func:`start_broker`'s (the one ``lab broker start`` left,
    or one for this kernel). Its files go under the runs directory
    (``fencing-<time>/``).

    Returns
    -------
    lab.fencing.FencingResult or None
        None on Tansu, after printing why (:func:`lab.fencing.check_broker`).
    """
    import pandas as pd
    from IPython.display import display

    from lab import fencing as fencing_mod
    from lab.errors import LabError

    info = start_broker()
    try:
        fencing_mod.check_broker(info)
    except LabError as e:
        print(f"skipped: {e}")
        return None
    work = Path(make_config().runs_dir) / f"fencing-{time.strftime('%Y%m%d-%H%M%S')}"
    result = fencing_mod.measure(info, work, records=records, successor_records=successor_records)
    display(pd.DataFrame(result.table()).set_index(["case", "producer"]))
    return result


def show_code(name: str) -> None:
    """Show a lesson region of the lab's code (:mod:`lab.code_view`) as the driver runs it, and the guides it illustrates.

    Raises
    ------
    lab.errors.LabError
        When no region has that name, naming the ones there are.
    """
    from IPython.display import HTML, Code, display

    from lab.code_view import lesson

    found = lesson(name)
    display(HTML(f"<p>The code that runs, read from <code>{found.path}</code> (from line {found.first_line}):</p>"))
    display(Code(found.text, language="python"))
    if found.links:
        display(HTML("<p>Read more: " + " · ".join(f'<a href="{url}" target="_blank">{title}</a>'
                                                   for title, url in found.links) + "</p>"))


def choose(options: dict, names, what: str) -> dict:
    """The entries of ``options`` that ``names`` (a notebook parameter such as ``COMBOS``) lists, in its order.

    Raises
    ------
    lab.errors.LabError
        For a name that is not an option, naming the parameter and the valid ones.
    """
    from lab.errors import choices_error

    for n in names:
        if n not in options:
            raise choices_error(f"{what} entry", n, options)
    return {n: options[n] for n in names}


