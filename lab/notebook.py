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
from lab.supervisor import Run, RunResult


def setup() -> None:
    """Prepare the notebook: plotly figures render live in JupyterLab *and* in executed/HTML copies.

    ``plotly_mimetype`` is what JupyterLab draws; ``notebook`` embeds plotly.js
    in the output, so a papermill run exported to HTML shows the same figures
    with no network.
    """
    import plotly.io as pio

    pio.renderers.default = "plotly_mimetype+notebook"


def config(**params) -> RunConfig:
    """:func:`lab.config.make_config` with parameter names as notebooks write them (UPPER_CASE allowed)."""
    return make_config(**{k.lower(): v for k, v in params.items()})


def run(cfg: RunConfig, quiet: bool = False) -> RunResult:
    """Run one scenario to the end, with a progress bar, and return its result.

    Delivery guarantee: none of its own; it measures the pipeline's. On
    interrupt (the stop button), every process of the run is ended first.
    """
    import ipywidgets as w
    from IPython.display import display

    r = Run(cfg)
    r.start()
    bar = w.IntProgress(value=0, min=0, max=max(1, cfg.events), description="read:", bar_style="info")
    label = w.Label(f"run {r.run_dir.name}")
    if not quiet:
        display(w.HBox([bar, label]))
    try:
        while not r.status().finished:
            st = r.status()
            total = sum(st.end_offsets.values()) or st.acked or 1
            bar.max = max(1, total)
            bar.value = min(sum(st.positions.values()), bar.max)
            label.value = f"batch {st.batches} · restarts {st.restarts} · {st.elapsed_s:.0f}s"
            time.sleep(0.5)
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


def state_store(run_dir: Path | str):
    """The state store on disk: one row per state file (operator, partition, version, kind, bytes).

    HDFS-backed provider: ``N.delta`` (a batch's changes) and ``N.snapshot``
    (the whole state, written every few versions); RocksDB: ``N.zip`` and the
    shared SST files it names.
    """
    import pandas as pd

    root = Path(run_dir) / "checkpoint" / "state"
    rows = []
    for f in sorted(root.rglob("*")) if root.is_dir() else []:
        if not f.is_file() or f.name.startswith(".") or f.suffix == ".crc":
            continue
        rel = f.relative_to(root).parts
        stem, kind = (f.name.split(".", 1) + [""])[:2]
        rows.append({"operator": rel[0], "partition": rel[1] if len(rel) > 2 else "", "version":
                     int(stem) if stem.isdigit() else None, "kind": kind or f.name, "bytes": f.stat().st_size,
                     "file": "/".join(rel)})
    return pd.DataFrame(rows, columns=["operator", "partition", "version", "kind", "bytes", "file"]).astype({"version": "Int64"})


def recovery_s(result: RunResult) -> float | None:
    """Seconds from the crash to the restarted driver's first completed batch (``None`` without a crash)."""
    from lab.events import read_events

    events = read_events(result.run_dir)
    crash = next((e["t"] for e in events if e["type"] == ev.FAULT and e.get("kind") == "driver-crash"), None)
    if crash is None:
        return None
    done = [e["t"] for e in events if e["type"] == ev.BATCH_DONE and e["t"] > crash]
    return round(done[0] - crash, 2) if done else None



#: The brokers this kernel started: runs directory -> its :class:`lab.broker.BrokerInfo`.
_started: dict = {}


def start_broker():
    """Start an embedded broker for this notebook; runs reuse it and it stays up between them.

    It dies with the kernel (and :func:`stop_broker` ends it earlier), so a
    notebook can look into Kafka after a run, e.g. at a consumer group's offsets.
    A broker already running for the runs directory (``lab broker start``, a
    workshop's, a test session's) is used as it is, and never stopped from here.
    """
    from lab import broker

    runs = Path(make_config().runs_dir)
    return broker.load_running(runs) or _start(runs)


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

    from lab import broker

    runs = Path(make_config().runs_dir)
    running = broker.load_running(runs)
    if running and running.node_count == 3:
        return runs
    own = runs / "cluster"
    broker.start_detached(own, nodes=3)  # an already running one is checked (3 nodes) and reused
    if not _started:
        atexit.register(stop_broker)
    _started[own] = None  # detached: stopped through its record, which a node restart keeps current
    return own


def _start(runs: Path):
    """Start an embedded broker as a child of the kernel, recorded for ``runs``."""
    import atexit

    from lab import broker

    info = broker.start_embedded(runs / "broker-logs")  # a child of the kernel: gone when the kernel is
    broker.save_state(runs, info)
    if not _started:
        atexit.register(stop_broker)
    _started[runs] = info
    return info


def stop_broker() -> None:
    """Stop every broker :func:`start_broker` or :func:`start_cluster` started in this kernel (nothing if none)."""
    from lab import broker

    while _started:
        runs, info = _started.popitem()
        if info is None:
            broker.stop_detached(runs)
            continue
        running = broker.load_running(runs)
        if running and running.proxy_pid == info.proxy_pid:  # still the record of ours (a broker-crash may renew the JVM)
            broker.state_file(runs).unlink(missing_ok=True)
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


def files_under(path: Path | str, max_files: int = 60) -> str:
    """A tree listing of ``path`` (checkpoints, WAL) with sizes, for showing what is on disk."""
    root = Path(path)
    if not root.exists():
        return f"{root} (does not exist)"
    lines = [str(root)]
    # Hadoop's .crc side files would double the listing without telling anything.
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    for p in files[:max_files]:
        lines.append(f"  {p.relative_to(root)}  ({p.stat().st_size} B)")
    if len(files) > max_files:
        lines.append(f"  ... {len(files) - max_files} more files")
    return "\n".join(lines)


def checkpoint_log(run_dir: Path | str, log: str = "offsets"):
    """Structured Streaming's offset or commit log as a table, with each entry placed against the crash.

    One row per batch id: when the entry was written (seconds since the run
    started), whether that was before or after the first driver crash, and
    for the offset log the planned end offsets per partition.
    """
    import pandas as pd

    from lab.events import read_events

    run_dir = Path(run_dir)
    events = read_events(run_dir)
    t0 = next((e["t"] for e in events if e["type"] == ev.RUN_START), 0.0)
    crash = next((e["t"] for e in events if e["type"] == ev.FAULT and e.get("kind") == "driver-crash"), None)
    rows = []
    for f in sorted((run_dir / "checkpoint" / log).glob("[0-9]*"), key=lambda p: int(p.name)):
        lines = f.read_text().splitlines()
        row = {"batch id": int(f.name), "written at (s)": round(f.stat().st_mtime - t0, 2)}
        if crash is not None:
            row["written"] = "before the crash" if f.stat().st_mtime < crash else "after the restart"
        if log == "offsets" and len(lines) >= 3:
            row["end offsets (the source's own format)"] = lines[2]
        rows.append(row)
    return pd.DataFrame(rows).set_index("batch id") if rows else pd.DataFrame()


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


def read_json(path: Path | str):
    """Read a JSON file (a checkpoint entry, a report)."""
    return json.loads(Path(path).read_text())


def offset_log_entry(run_dir: Path | str, batch: int) -> dict:
    """Structured Streaming's offset-log entry of ``batch``, raw and split into its lines.

    Parameters
    ----------
    run_dir : path
        A structured run's directory (its query's checkpoint is ``checkpoint/``).
    batch : int
        The batch id (the entry is the file ``checkpoint/offsets/<batch>``).

    Returns
    -------
    dict
        ``path``; ``raw`` (the file as Spark wrote it); ``version`` (line 1, e.g.
        ``v1``); ``metadata`` (line 2 parsed: ``batchWatermarkMs``,
        ``batchTimestampMs``, ``conf``); ``sources`` (each further line parsed:
        one per source, in the source's own offset format); ``end_offsets``
        (``{partition: offset}``, read by the pipeline's own rule,
        :meth:`lab.pipelines.structured.Checkpoint.end_offsets`).

    Raises
    ------
    FileNotFoundError
        When the batch was never logged.
    """
    from lab.pipelines.structured import Checkpoint

    checkpoint = Checkpoint(Path(run_dir) / "checkpoint")
    path = checkpoint.path / "offsets" / str(batch)
    raw = path.read_text()
    lines = [line for line in raw.splitlines() if line.strip()]
    return {"path": path, "raw": raw, "version": lines[0], "metadata": json.loads(lines[1]),
            "sources": [json.loads(line) for line in lines[2:]], "end_offsets": checkpoint.end_offsets(batch)}


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

