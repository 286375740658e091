"""What the notebooks call, and the only module of the lab they import: set up, run a scenario, show its result.

A thin face: the runs are :mod:`lab.views.progress`'s over :mod:`lab.run.supervisor`,
the brokers :mod:`lab.run.kernel`'s, the figures :mod:`lab.views.plots`'s, the checked
exercises :mod:`lab.lessons.solve`'s. A lesson that needs many names of one part
reaches them through a namespace: ``nb.plots``, ``nb.matrix``, ``nb.replication``,
``nb.flink_env``, ``nb.flink_view``, ``nb.storm_view``, ``nb.share_view``, ``nb.trigger_view``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from lab import events as ev
from lab.audit.predictions import TOPIC_OUTCOMES, topic_outcome_of, uncommitted_reader_outcome  # noqa: F401  (07)
from lab.config import make_config
from lab.doctor import run_checks  # noqa: F401  (notebook 00)
from lab.events import read_events
from lab.flink import env as flink_env  # noqa: F401  (notebook 08)
from lab.lessons.evidence import flink_checkpoints, output_readers, share_held, topic_duplicates, wal_segments  # noqa: F401  (evidence exercises)
from lab.lessons.solve import attempt as exercise, explain, solve  # noqa: F401  (exercises; solutions call nb.solve)
from lab.outcomes import NAIVE_READER_OUTCOMES  # noqa: F401  (03)
from lab.run.kernel import start_broker, start_cluster, stop_broker  # noqa: F401  (the notebooks' brokers)
from lab.run.supervisor import RunResult
from lab.sinks.files import naive_reader_outcome  # noqa: F401  (notebook 03)
from lab.views import (
    flink as flink_view,  # noqa: F401  (notebook 08)
    replication,  # noqa: F401  (notebook 07)
    share as share_view,  # noqa: F401  (notebook 09)
    storm as storm_view,  # noqa: F401  (notebook 08)
    trigger as trigger_view,  # noqa: F401  (notebook 03)
)
from lab.views.predict import verdicts  # noqa: F401  (notebooks call nb.verdicts)
from lab.views.progress import TEXT_PROGRESS_EVERY_S, config, is_interactive, run, setup, show  # noqa: F401  (the notebooks' runs)
from lab.views.run_files import (  # noqa: F401
    checkpoint_log,
    file_sink_readers,
    files_under,
    offset_log_entry,
    read_json,  # (the notebooks call them as nb.<name>)
    same_counts,
    spark_state,
    state_store,
)


def predict(scenarios, predictions=None, **kwargs):
    """:func:`lab.views.predict.predict` in the notebook's mode: buttons interactively, ``PREDICTIONS`` headless."""
    from lab.views.predict import predict as show_buttons

    return show_buttons(scenarios, predictions, interactive=is_interactive(), **kwargs)


def ask(questions, predictions=None, **kwargs):
    """:func:`lab.views.predict.ask` in the notebook's mode: a question's buttons, or ``PREDICTIONS`` headless."""
    from lab.views.predict import ask as show_buttons

    return show_buttons(questions, predictions, interactive=is_interactive(), **kwargs)


def answers(frozen, measured, where):
    """:func:`lab.views.predict.answers`: each question's prediction against what was measured, recorded in
    ``where``."""
    from lab.views.predict import answers as judge_answers

    return judge_answers(frozen, measured, where)


def predict_grid(questions, predictions=None, **kwargs):
    """:func:`lab.views.predict.predict_grid` in the notebook's mode: a row of buttons per grid row, or
    ``PREDICTIONS``."""
    from lab.views.predict import predict_grid as show_buttons

    return show_buttons(questions, predictions, interactive=is_interactive(), **kwargs)


def grid_verdicts(sheet, answers):
    """Notebook 04: the grid's predictions against the measured rows (:meth:`lab.views.predict.GridSheet.verdicts`).

    Recorded under the runs directory the lab's settings give (``LAB_RUNS_DIR``).
    """
    return sheet.verdicts(answers, make_config().runs_dir)


def compare(results: dict[str, RunResult]):
    """A table of several results side by side (a pandas DataFrame, one row per label)."""
    import pandas as pd

    rows = []
    for label, r in results.items():
        c = r.audit.counts()
        rows.append({"scenario": label, "guarantee": c["guarantee"], "acked": c["acked"],
                     "exactly once": c["exactly_once"], "duplicated": c["duplicated"], "lost": c["lost"],
                     "unseen": c["unseen"], "unexpected": c["unexpected"], "write attempts": c["write_attempts"],
                     "stored rows": c["stored_rows"]})
        if c.get("late_dropped") or "windows" in c:
            rows[-1].update({k.replace("_", " "): c.get(k) for k in (
                "late_dropped", "windows", "windows_exact", "windows_over", "windows_under", "overcount",
                "undercount")})
        if "source_duplicates" in r.report:
            rows[-1]["source duplicates"] = r.report["source_duplicates"]
    return pd.DataFrame(rows).set_index("scenario")


def recovery_s(result: RunResult) -> float | None:
    """The run's first restart: seconds from the driver's death to the next driver's first batch done.

    From the report's ``restart_s`` (:mod:`lab.audit.restarts`). ``None`` without a
    restart, or when the restarted driver did no batch.
    """
    restarts = result.report.get("restart_s") or [None]
    return restarts[0]


def group_offsets(result: RunResult) -> dict[int, int | None]:
    """The offsets a run's consumer group has committed in Kafka, per partition (None: nothing committed).

    Needs the broker the run used to be running (see :func:`start_broker`).
    """
    from kafka import TopicPartition

    from lab.kafka import tools as kafka_tools

    bootstrap = json.loads((result.run_dir / "broker.json").read_text())["bootstrap"]
    c = kafka_tools.consumer(bootstrap, group_id=f"lab-{result.run_dir.name}")
    try:
        return {p: c.committed(TopicPartition(result.config.topic, p)) for p in range(result.config.partitions)}
    finally:
        c.close()


def crash_story(result: RunResult) -> list[str]:
    """The run's own timeline around its faults, in sentences: what was done, what was lost, what ran again."""
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

    The same pure functions the driver calls (:data:`lab.pipelines.structured.kafka_input.READER_OPTIONS`),
    given the run's own config and the bootstrap of its ``broker.json``: what really ran.
    """
    from lab.pipelines.structured.kafka_input import READER_OPTIONS

    cfg = result.config
    reader = result.report.get("settings", {}).get("kafka_reader", cfg.spark.kafka_reader)
    bootstrap = read_json(result.run_dir / "broker.json")["bootstrap"]
    options = READER_OPTIONS[reader][1](bootstrap, cfg.topic, cfg.partitions, cfg.max_batch_records,
                                        cfg.isolation_level)
    return reader, options


def aborted_in_sink(result: RunResult) -> int:
    """Sink rows of events whose transaction the producer aborted (``txn-abort``): delivered, never owed."""
    from lab.audit.ledger import LEDGER_FILE, aborted_event_ids
    from lab.sinks.reader import open_sink

    aborted = set(aborted_event_ids(result.run_dir / LEDGER_FILE))
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
    """Run :func:`lab.lessons.fencing.measure` against this notebook's broker and display its table.

    The broker is :func:`start_broker`'s (the one ``lab broker start`` left,
    or one for this kernel). Its files go under the runs directory
    (``fencing-<time>/``).

    Returns
    -------
    lab.lessons.fencing.FencingResult
    """
    import pandas as pd
    from IPython.display import display

    from lab.lessons import fencing as fencing_mod

    info = start_broker()
    work = Path(make_config().runs_dir) / f"fencing-{time.strftime('%Y%m%d-%H%M%S')}"
    result = fencing_mod.measure(info, work, records=records, successor_records=successor_records)
    display(pd.DataFrame(result.table()).set_index(["case", "producer"]))
    return result


def txn_epochs(transactions: int = 5, records: int = 20, abort_every: int = 3, partitions: int = 2):
    """Run :func:`lab.lessons.txn_epochs.compare` against this notebook's broker; display each client's summary, its
    transactions and the epochs figure.

    The broker is :func:`start_broker`'s; its log is read from its data directory, so it must be the lab's own.
    The tables go under the runs directory (``txn-epochs-<time>/``, the returned ``work_dir``), where the answers
    to the notebook's questions are recorded too.

    Returns
    -------
    types.SimpleNamespace
        ``results`` (per client, :class:`lab.lessons.txn_epochs.ClientTransactions`), ``work_dir``, and
        ``outcome(client)``, the answer to the question "txn epochs" for ``python`` or ``java``.
    """
    from lab.broker.log_files import broker_data_dir
    from lab.lessons.txn_epochs import compare
    from lab.views import txn_epochs as view

    info = start_broker()
    results = compare(info.bootstrap, broker_data_dir(info), transactions, records, abort_every, partitions)
    return _client_lesson(Path(make_config().runs_dir) / f"txn-epochs-{time.strftime('%Y%m%d-%H%M%S')}", results,
                          view.summary_table(results), ("transactions", view.transactions_table(results)),
                          view.epochs_figure(results), view.epochs_outcome)


def _client_lesson(work: Path, results, summary, table: tuple, figure, outcome):
    """Save a per-client lesson's tables under ``work``; show the summary, the figure and the table; return
    ``results``, ``work_dir`` and ``outcome(client)`` (``outcome`` applied to that client's result)."""
    from types import SimpleNamespace

    from IPython.display import display

    work.mkdir(parents=True, exist_ok=True)
    summary.to_csv(work / "summary.csv")
    table[1].to_csv(work / f"{table[0]}.csv")
    display(summary)
    figure.show()
    display(table[1])
    by_client = {r.client: r for r in results}
    return SimpleNamespace(results=results, work_dir=work, outcome=lambda client: outcome(by_client[client]))


def late_write(records: int = 10):
    """Run :func:`lab.lessons.late_write.run` for each client on this notebook's three-broker cluster
    (:func:`start_cluster`); display each client's summary, the written partition's log and the epochs figure.

    The tables go under the cluster's runs directory (``late-write-<time>/``, the returned ``work_dir``).

    Returns
    -------
    types.SimpleNamespace
        ``results`` (per client, :class:`lab.lessons.late_write.LateWrite`), ``work_dir``, and
        ``outcome(client)``, the answer to the question "late write" for ``python`` or ``java``.
    """
    from lab.broker import shared as shared_broker
    from lab.lessons.late_write import CLIENTS, run as late_run
    from lab.views import txn_epochs as view

    runs = start_cluster()
    info = shared_broker.load_running(runs)
    results = []
    for client in CLIENTS:
        print(f"{client}: writing its transactions; one produce request kept by the leader's proxy ...", flush=True)
        results.append(late_run(info, client, records))
        for line in results[-1].could_not_show:
            print(f"  could not show: {line}")
    return _client_lesson(Path(runs) / f"late-write-{time.strftime('%Y%m%d-%H%M%S')}", results,
                          view.late_summary_table(results), ("log", view.late_log_table(results)),
                          view.late_epochs_figure(results), view.late_write_outcome)


def show_code(name: str) -> None:
    """Show a lesson region of the lab's code (:mod:`lab.lessons.code`) as the driver runs it, and the guides it
    illustrates.

    Raises
    ------
    lab.errors.LabError
        When no region has that name, naming the ones there are.
    """
    from IPython.display import HTML, Code, display

    from lab.lessons.code import lesson

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


#: The names of :data:`LAZY` and ``nb.matrix`` are imported at first use, so plotly, pandas and the widgets are
#: not imported with the face: ``import lab.notebook`` took 0.54 s, 1.29 s with them (whole-process medians of 7
#: in turns, 2 cores). The face's other names cost under 25 ms each once it is imported (-X importtime).
LAZY = {
    "plots": ("lab.views.plots", None),
    "Panel": ("lab.views.panel", "Panel"),
    "SettingsPicker": ("lab.views.replication_picker", "SettingsPicker"),
}

#: ``nb.matrix``: notebook 04's names, from the matrix's runner, report and grid.
MATRIX_NAMES = {
    "lab.matrix.grid": ("load_grid",),
    "lab.matrix.runner": ("run_matrix",),
    "lab.audit.expectations": ("EXPECTATIONS",),
    "lab.matrix.report": ("find_results", "matrix_view", "mismatches", "read_results", "results_dir", "results_note",
                          "table_html"),
    "lab.matrix.semantics": ("build_grid", "grid_html", "grid_from_results"),
    "lab.matrix.questions": ("answers_for", "grid_questions"),
}


def _matrix():
    import importlib
    from types import SimpleNamespace

    return SimpleNamespace(**{name: getattr(importlib.import_module(module), name)
                              for module, names in MATRIX_NAMES.items() for name in names})


def __getattr__(name: str):
    import importlib

    if name == "matrix":
        value = _matrix()
    elif name in LAZY:
        module, attr = LAZY[name]
        value = importlib.import_module(module)
        value = getattr(value, attr) if attr else value
    else:
        raise AttributeError(f"module 'lab.notebook' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *LAZY, "matrix"])
