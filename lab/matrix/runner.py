"""The semantics matrix: many scenarios, run headless, one results table.

A grid (YAML or JSON) lists scenarios; each runs through papermill in the
scenario notebook (``lab/templates/scenario.ipynb``), which leaves an executed
notebook, its HTML and a ``report.json`` per run in ``data/results/runs/<key>/``.
The key is a hash of the scenario's parameters and seed, so an interrupted
matrix run again completes only the runs that have no report yet.

Grid format::

    defaults: {events: 3000, rate: 1000}        # optional, for every scenario
    seeds: [1, 2]                                # optional, default [1]
    scenarios:
      - name: direct, offsets in checkpoint, append
        params: {pipeline: direct, offsets: checkpoint, sink: append,
                 faults: "driver-crash@batch=2:after-output-before-commit"}
        expect: at-least-once

``expect`` is one of :data:`EXPECTATIONS`. Verdicts are computed from the
measured counts only (``lost``, ``duplicated``, ``unexpected``,
``source_duplicates``; ``acked-lost`` and ``acked-kept`` from the topic's final
read, ``topic.lost``), never copied from the expectation.

Brokers shared by the rows
--------------------------
Scenarios run one at a time (``jobs=1``) share one embedded broker, and the
rows on the three-broker cluster (``nodes: 3``) one cluster, each started
once and stopped after the last row; a row that kills its broker
(``broker-crash``) gets its own
(:mod:`lab.matrix.brokers` has the protocol, a restarted cluster broker included).

One at a time, the next started ahead
-------------------------------------
With ``jobs=1`` the next row's papermill starts while a row runs, and its run
starts its first driver, then waits for its turn (:mod:`lab.matrix.rows`,
:func:`_relay`): a row's kernel start and imports (about 1.9 s), its first
driver's JVM and session (about 2.5 s) and its plots and notebook end (about
1.2 s) leave the matrix's critical path, while the runs' broker, topics and
faults stay one at a time. The first row starts held as well, while the shared
broker starts, and gets its turn once the broker is up. The rows on the shared
cluster run one at a time beside them, on their own brokers, once the relay is
past its timing-sensitive rows (:mod:`lab.matrix.lane`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from lab.matrix import brokers as matrix_brokers, lane as matrix_lane, rows as matrix_rows
from lab.matrix.grid import TEMPLATES, Grid, Scenario
from lab.matrix.table import row_from_report, write_table

TEMPLATE = TEMPLATES / "scenario.ipynb"

def run_dir_for(out: Path, s: Scenario) -> Path:
    return out / "runs" / s.key


def run_one(s: Scenario, out: Path, timeout_s: float = 900, started: list | None = None, shared=None) -> dict:
    """Execute the scenario notebook for ``s`` (papermill in its own process group); return its results row.

    On failure the row carries ``verdict = "error"`` and the error, and the
    executed notebook (up to the failing cell) is kept next to it.
    ``started`` collects the papermill process so an interrupt can end it.
    ``shared``: the matrix's brokers (:class:`lab.matrix.brokers.SharedBrokers`), used when the scenario may share one.
    The row's ``html`` is None: the caller exports the executed notebook (:func:`export_html`).
    """
    return finish_row(s, out, start_row(s, out, timeout_s, started, shared))


def start_row(s: Scenario, out: Path, timeout_s: float = 900, started: list | None = None, shared=None,
              ahead: bool = False):
    """Start papermill on the scenario notebook for ``s``; the process (see :func:`run_one` for the arguments).

    ``ahead``: the row's kernel starts and imports now, and its run waits until
    its turn (:func:`_give_turn`, which records the row's broker: a row held reads
    it only after its turn).
    """
    from lab.broker import shared as shared_broker
    from lab.host import processes

    d = run_dir_for(out, s)
    d.mkdir(parents=True, exist_ok=True)
    if shared is not None and not ahead:
        shared.record(d / "lab-runs", s.params)
    else:  # a broker.json left by an earlier matrix names processes long gone
        shared_broker.state_file(d / "lab-runs").unlink(missing_ok=True)
    (d / "report.json").unlink(missing_ok=True)
    matrix_rows.turn_path(d).unlink(missing_ok=True)  # an interrupted matrix's: the row would not wait
    params = dict(PARAMS=s.params, SEED=s.seed, REPORT=str(d / "report.json"), RUNS_DIR=str(d / "lab-runs"),
                  INTERACTIVE=False, TURN=str(matrix_rows.turn_path(d)) if ahead else "")
    (d / "params.json").write_text(json.dumps(params, indent=1))
    # The kernel's connection file and every temporary file of the row go to the row's own directory, removed
    # when papermill has ended: an interrupt ends papermill and its kernel at once, and in the system's temporary
    # directory that file stayed for good.
    tmp = d / "tmp"
    tmp.mkdir(exist_ok=True)
    proc = processes.spawn(
        [sys.executable, "-m", "papermill", TEMPLATE, d / "scenario.ipynb", "-f", d / "params.json", "--cwd", d,
         "-k", "python3", "--execution-timeout", int(timeout_s), "--no-progress-bar"],
        log_path=d / "papermill.log", env={**os.environ, "TMPDIR": str(tmp)},
    )
    proc.row_dir = d  # for an interrupt: a row whose run is over may end its notebook (matrix_rows.stop_rows)
    if started is not None:
        started.append(proc)
    return proc


def _give_turn(out: Path, s: Scenario, shared) -> None:
    """Row ``s``, started ahead, may run: its broker recorded (the shared ones as the rows before left them)."""
    if shared is not None:  # a cluster broker a row restarted is a new JVM; the broker may still be starting
        shared.record(run_dir_for(out, s) / "lab-runs", s.params)
    matrix_rows.give_turn(run_dir_for(out, s))


def run_over(out: Path, s: Scenario, proc) -> bool:
    """Row ``s``'s run has ended: its report is written (its plots may still be drawing) or its papermill ended."""
    return (run_dir_for(out, s) / "report.json").exists() or proc.poll() is not None


def finish_row(s: Scenario, out: Path, proc) -> dict:
    """Wait for row ``s``'s papermill to end; its results row (see :func:`run_one`)."""
    d = run_dir_for(out, s)
    try:
        code = proc.wait()
    finally:
        shutil.rmtree(d / "tmp", ignore_errors=True)
        matrix_rows.turn_path(d).unlink(missing_ok=True)
    report_path, nb_out = d / "report.json", d / "scenario.ipynb"
    if code != 0 or not report_path.exists():
        error = f"papermill exited {code}: " + _last_error(d / "papermill.log")
        return {"key": s.key, "name": s.name, "expect": s.expect, "verdict": "error", "error": error[:400],
                "seed": s.seed, **{k: s.params.get(k) for k in ("pipeline", "sink", "faults")},
                "notebook": str(nb_out), "html": None}
    report = json.loads(report_path.read_text())
    return row_from_report(s, report, nb_out)


def _last_error(log: Path) -> str:
    try:
        lines = [l for l in log.read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return "(no log)"
    errs = [l for l in lines if "Error" in l or "Exception" in l]
    return (errs or lines or ["(empty log)"])[-1].strip()


def export_html(nb_path: Path) -> str | None:
    """Write ``nb_path``'s executed notebook as HTML beside it; its path, or None when it cannot be read or exported."""
    try:
        import nbformat
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter().from_notebook_node(nbformat.read(nb_path, as_version=4))
        out = nb_path.with_suffix(".html")
        out.write_text(body)
        return str(out)
    except Exception:
        return None


def completed(out: Path, s: Scenario) -> dict | None:
    """The row of a scenario that already has a report (for resuming); its HTML exported if an interrupt came first."""
    d = run_dir_for(out, s)
    report = d / "report.json"
    if not report.exists():
        return None
    nb_out, html = d / "scenario.ipynb", d / "scenario.html"
    page = str(html) if html.exists() else export_html(nb_out) if nb_out.exists() else None
    return row_from_report(s, json.loads(report.read_text()), nb_out, page)


def run_matrix(grid: Grid, out: Path | str = "data/results", jobs: int = 1, progress=True) -> pandas.DataFrame:  # noqa: F821
    """Run every scenario of ``grid`` that has no report yet; write and return the results table.

    The table is written after every finished run (``matrix.csv`` and
    ``matrix.parquet`` in ``out``), so an interruption loses at most the runs
    in progress; running again redoes only those.
    """
    from tqdm import tqdm

    relay = jobs <= 1 and matrix_rows.ahead()  # a bad LAB_ROW_AHEAD fails here, before any run
    beside = relay and matrix_lane.beside()  # LAB_CLUSTER_BESIDE too
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, dict] = {}
    todo = []
    for s in grid.scenarios:
        row = completed(out, s)
        if row is not None:
            rows[s.key] = row
        else:
            todo.append(s)
    bar = tqdm(total=len(grid.scenarios), initial=len(rows), desc="matrix", unit="run", disable=not progress,
               file=sys.stderr)
    write_table(out, grid, rows)
    if todo:
        from lab.host.env import env_runs_dir

        with matrix_brokers.shared_brokers(jobs, todo, Path(env_runs_dir()) / "broker-logs",
                                           defer_cluster=beside) as shared:
            _run_todo(todo, out, jobs, shared, rows, grid, bar, relay, beside)
    bar.close()
    return write_table(out, grid, rows)


def _run_todo(todo: list, out: Path, jobs: int, shared, rows: dict, grid: Grid, bar, relay: bool,
              beside: bool = False) -> None:
    """Run ``todo``'s scenarios, filling ``rows`` and rewriting the table after each.

    ``relay``: see :func:`_relay`; ``beside``: with it, the shared cluster's rows run
    on a lane of their own (:mod:`lab.matrix.lane`).
    """
    started: list = []
    lane, start_at, relay_rows = None, 0, todo
    if relay:
        relay_rows, lane_rows, start_at = matrix_lane.split(todo, shared) if beside else (todo, [], 0)
        lane = matrix_lane.Lane(lane_rows, lambda s: run_one(s, out, started=started, shared=shared),
                                before=(lambda: shared.start_cluster(wait=True)) if lane_rows else None)
    # Each finished run's HTML is exported on a thread of its own while the next run starts: 0.5-1.1 s a run
    # that was on the matrix's critical path (measured, 14 rows: 8.2 s of 4.2 min).
    exporter = ThreadPoolExecutor(max_workers=1)
    exports = {}

    def record(s: Scenario, row: dict) -> None:
        rows[s.key] = row
        notebook = row.get("notebook")
        if notebook and Path(notebook).exists():
            exports[exporter.submit(export_html, Path(notebook))] = s.key
        bar.set_postfix_str(f"{s.name[:40]}: {row['verdict']}")
        bar.update(1)
        write_table(out, grid, rows)

    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        if relay:
            _relay(relay_rows, out, shared, started, record, lane, start_at)
        else:
            futures = {pool.submit(run_one, s, out, started=started, shared=shared): s for s in todo}
            for f in as_completed(futures):
                record(futures[f], f.result())
        for f in as_completed(exports):
            rows[exports[f]]["html"] = f.result()
        if exports:
            write_table(out, grid, rows)
    except BaseException:
        # Interrupted: queued runs never start, running ones end (their kernels and runs with them).
        if lane is not None:
            lane.stop()
        pool.shutdown(wait=False, cancel_futures=True)
        matrix_rows.stop_rows(started)
        if lane is not None:
            lane.abandon(lambda: matrix_rows.stop_rows(started))
        for s in todo:
            # Again, now that the kernels are gone too: run_one removes it once papermill has ended, and a kernel
            # still starting rewrites its connection file there (ipykernel does once its sockets are bound), maybe
            # while the directory is being removed (seen once in CI, under load: the file and directory left).
            shutil.rmtree(run_dir_for(out, s) / "tmp", ignore_errors=True)
            matrix_rows.turn_path(run_dir_for(out, s)).unlink(missing_ok=True)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        exporter.shutdown(wait=True, cancel_futures=True)


def _relay(todo: list, out: Path, shared, started: list, record, lane=None, start_at: int = 0) -> None:
    """One run at a time, each row's notebook started while the row before it runs (:mod:`lab.matrix.rows`).

    Row *n+1* starts ahead once row *n*'s run has its first batch done (or
    :data:`lab.matrix.rows.AHEAD_AFTER_S` after its turn), not with row *n*'s
    driver start, which it would compete with for the 2 cores. It gets its
    turn once row *n*'s run is over, and only then is row *n*'s papermill
    waited for (its plots and its notebook's end overlap row *n+1*'s run).
    These runs never overlap: the shared broker and its proxy's faults see one
    at a time (the cluster's rows may run beside them, on their own brokers:
    :mod:`lab.matrix.lane`). Measured on the default grid (bench/README.md, Past experiments):
    536 s to 490 s; the time outside the runs fell from 146 s to 71 s, the
    runs' own sum grew by 28 s (the overlapped work competes with them).
    Started at row *n*'s turn instead: 494 s to 468 s, the runs 32 s slower.
    The first row starts held too, beside the shared broker's start, and gets
    its turn once the broker is up.

    ``lane`` (:class:`lab.matrix.lane.Lane`): the cluster's rows, let go once row
    ``start_at`` has its turn (or the relay is over); this thread records their results.
    """
    lane = lane or matrix_lane.Lane([], None)
    proc = start_row(todo[0], out, started=started, shared=shared, ahead=True) if todo else None
    if todo:
        _give_turn(out, todo[0], shared)
    for i, s in enumerate(todo):
        if i == start_at:
            lane.go()
        nxt = todo[i + 1] if i + 1 < len(todo) else None
        ahead, since, watch = None, time.monotonic(), matrix_rows.BatchWatch(run_dir_for(out, s))
        while not run_over(out, s, proc):
            if nxt and ahead is None and (time.monotonic() - since > matrix_rows.AHEAD_AFTER_S or watch.done()):
                ahead = start_row(nxt, out, started=started, shared=shared, ahead=True)
            lane.hand_over(record)
            time.sleep(0.1)
        if nxt and ahead is None:
            ahead = start_row(nxt, out, started=started, shared=shared)
        elif nxt:
            _give_turn(out, nxt, shared)
        elif shared is not None and not lane.running:  # the last run is over: its notebook's plots need no broker
            try:
                shared.stop()
            except Exception:  # noqa: BLE001 - stopped again when the matrix ends, which raises what fails
                pass
        record(s, finish_row(s, out, proc))
        lane.hand_over(record)
        proc = ahead
    lane.finish(record)
