"""`lab matrix`: interrupted, then run again, it completes only the missing runs, one run at a time."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from lab.events import read_events
from tests.conftest import clean_env, lab_cmd

pytestmark = pytest.mark.integration

GRID = """
defaults: {events: 800, rate: 0, max_batch_records: 100}
scenarios:
  - name: commit after output
    params: {pipeline: plain, commit: after-output, faults: "driver-crash@batch=2:after-output-before-commit"}
    expect: at-least-once
  - name: commit before output
    params: {pipeline: plain, commit: before-output, faults: "driver-crash@batch=2:after-commit-before-output"}
    expect: loss
  - name: idempotent sink
    params: {pipeline: plain, commit: after-output, sink: idempotent, \
faults: "driver-crash@batch=2:after-output-before-commit"}
    expect: exactly-once
"""


def test_interrupted_matrix_resumes_with_only_the_missing_runs(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    out = tmp_path / "results"
    env = clean_env(LAB_RUNS_DIR=str(tmp_path / "runs"))
    proc = subprocess.Popen(lab_cmd("matrix", "--grid", str(grid), "--out", str(out)), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not list(out.glob("runs/*/report.json")):
        time.sleep(0.2)
    first = list(out.glob("runs/*/report.json"))
    assert first, "no run finished"
    import psutil
    kernel_files = []  # the running row's kernel's connection file (`-f FILE`), which the interrupt must not leave
    while time.monotonic() < deadline and not kernel_files:
        kernel_files = [f for p in psutil.process_iter(["cmdline"]) if (c := p.info["cmdline"])
                        and "ipykernel_launcher" in " ".join(c) and "-f" in c
                        and str(out) in (f := c[c.index("-f") + 1])
                        and not (Path(f).parents[1] / "report.json").exists()]  # a finished row's kernel may linger
        time.sleep(0.2)
    assert kernel_files, "no kernel of the matrix's second row with its connection file in the row's directory"
    # read once the next row runs: when it first appears, the first row's report may still be being written
    done_before = {p: p.stat().st_mtime for p in first}
    os.kill(proc.pid, signal.SIGINT)
    proc.communicate(timeout=90)
    assert proc.returncode != 0
    # nothing of the interrupted runs survives (papermill, kernels, brokers, drivers), nor their temporary files
    left = [" ".join(p.info["cmdline"]) for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"]
            and any(str(out) in part for part in p.info["cmdline"])]
    assert not left, left
    assert not [f for f in kernel_files if os.path.exists(f)] and not list(out.glob("runs/*/tmp"))
    assert len(pd.read_csv(out / "matrix.csv")) < 3

    again = subprocess.run(lab_cmd("matrix", "--grid", str(grid), "--out", str(out)), env=env,
                           capture_output=True, text=True, timeout=400)
    assert again.returncode == 0, again.stderr[-2000:]
    for p, mtime in done_before.items():
        assert p.stat().st_mtime == mtime, f"{p} was run again"
    table = pd.read_csv(out / "matrix.csv")
    assert len(table) == 3 and set(table["verdict"]) == {"as expected"}
    assert "3 runs, 0 not as expected" in again.stdout
    # every run's executed notebook as HTML, exported beside the next run (or on resuming, after an interrupt)
    pages = [Path(p) for p in table["html"]]
    assert all(p.is_file() and "One scenario of the semantics matrix" in p.read_text() for p in pages), pages
    reports = [json.loads(p.read_text()) for p in out.glob("runs/*/report.json")]
    assert len(reports) == 3
    # scenarios run one at a time share their matrix's broker: one per invocation, not one per run
    # (the interrupted scenario's first run directory is there too)
    brokers = [json.loads(p.read_text())["broker_pid"] for p in out.glob("runs/*/lab-runs/*/broker.json")]
    assert len(brokers) >= 3 and len(set(brokers)) == 2, brokers
    # one at a time: a row's notebook starts while the row before runs, its run only once that one is over
    spans = sorted((next(x["t"] for x in e if x["type"] == "run-start"), e[-1]["t"])
                   for e in (read_events(r["run_dir"]) for r in reports))
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:])), spans
    done = sorted(out.glob("runs/*/report.json"),
                  key=lambda p: read_events(json.loads(p.read_text())["run_dir"])[0]["t"])
    ahead = [b.parent for a, b in zip(done, done[1:]) if (b.parent / "params.json").stat().st_mtime < a.stat().st_mtime]
    assert ahead, "no row's notebook was started before the row ahead of it had its report"
    assert all(json.loads((d / "params.json").read_text())["TURN"] for d in ahead), "a row started ahead must wait"


CLUSTER_GRID = """
defaults: {pipeline: plain, events: 300, rate: 150, nodes: 3, faults: "leader-crash@at=1s:for=1s"}
seeds: [1, 2]
scenarios:
  - name: leader killed and restarted
    params: {acks: all}
    expect: acked-kept
  - name: one broker, long enough to have the cluster rows beside it
    params: {nodes: 1, faults: "", events: 4000, rate: 200}
    expect: exactly-once
"""


def test_cluster_rows_share_one_cluster_and_follow_a_restarted_broker(tmp_path):
    """Two rows on the three-broker cluster: one cluster, the second row on the broker the first restarted; none left.

    They run beside the single broker's rows (lab.matrix.lane): here, while its 20-second rows run.
    """
    from lab.host import processes
    from tests.integration.conftest import assert_all_gone

    grid = tmp_path / "grid.yaml"
    grid.write_text(CLUSTER_GRID)
    out = tmp_path / "results"
    done = subprocess.run(lab_cmd("matrix", "--grid", str(grid), "--out", str(out)),
                          env=clean_env(LAB_RUNS_DIR=str(tmp_path / "runs")), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 runs, 0 not as expected" in done.stdout, done.stdout
    used_by = {p.parent: json.loads(p.read_text()) for p in out.glob("runs/*/lab-runs/*/broker.json")}
    alone = [d for d, info in used_by.items() if not info.get("nodes")]
    runs = sorted((read_events(d)[0]["t"], d) for d, info in used_by.items() if info.get("nodes"))
    assert len(runs) == 2 and len(alone) == 2, used_by  # two seeds of each row

    def span(d):
        events = read_events(d)
        return next(e["t"] for e in events if e["type"] == "run-start"), events[-1]["t"]

    beside = [(c, a) for _, c in runs for a in alone if span(c)[0] < span(a)[1] and span(a)[0] < span(c)[1]]
    assert beside, "no cluster row ran while a single-broker row ran"
    (_, first), (_, second) = runs
    used = [json.loads((d / "broker.json").read_text()) for d in (first, second)]
    assert used[0]["controller_pid"] == used[1]["controller_pid"], "each row started a cluster of its own"
    # the first row's broker.json names the broker it restarted; the second row's leader-crash killed one of those
    restarted = [e["pid"] for e in read_events(first) if e["type"] == "node-restart"]
    assert len(restarted) == 1 and restarted[0] in [n["broker_pid"] for n in used[0]["nodes"]], (restarted, used[0])
    killed = [e["pid"] for e in read_events(second) if e["type"] == "fault" and e["kind"] == "leader-crash"]
    assert len(killed) == 1 and killed[0] in [n["broker_pid"] for n in used[0]["nodes"]], (killed, used[0])
    pids = {p for info in used for p in (info["controller_pid"], *(n[k] for n in info["nodes"]
                                                                    for k in ("broker_pid", "proxy_pid",
                                                                              "replication_proxy_pid")))}
    pids |= {e["pid"] for d in (first, second) for e in read_events(d) if e["type"] == "node-restart"}
    pids |= {used_by[d][k] for d in alone for k in ("broker_pid", "proxy_pid")}  # the single broker too
    assert_all_gone(sorted(pids), within_s=5)
    assert not [p for p in pids if processes.pid_alive(p)]
