"""``kill -9`` of ``lab run`` mid-run leaves no process behind, for every pipeline family.

The control process is killed alone (not its group), as a user's ``kill -9 PID``
does: every process it started must die with it (``PR_SET_PDEATHSIG``), and so must
theirs. Checked by the PIDs and process groups the run recorded (broker, proxies,
each driver and its children's groups; a cluster's nodes), and by any process whose
command line names the run directory (a Flink job's Python and its JVM do).
"""

import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from lab.events import read_events
from lab.host import processes
from tests.conftest import clean_env
from tests.integration.conftest import run_pids

pytestmark = pytest.mark.integration

FAMILIES = {
    "no Spark": ["--pipeline", "plain"],
    "Spark": ["--pipeline", "structured"],
    "Flink": ["--pipeline", "flink"],
    "three-broker cluster": ["--pipeline", "plain", "--nodes", "3"],
}


def cluster_pids(run_dir: Path) -> list[int]:
    info = json.loads((run_dir / "broker.json").read_text())
    return [p for p in [info.get("controller_pid"), *(n.get(k) for n in info.get("nodes") or ()
                                                     for k in ("broker_pid", "proxy_pid", "replication_proxy_pid"))]
            if p]


#: Seconds every process of the run gets to die after the control process's ``kill -9``.
WITHIN_S = 30.0


def remaining(pids: list[int], run_dir: Path) -> list[str]:
    """What of the run still runs: a recorded PID, a member of a recorded group, a process naming the run directory."""
    left = [f"pid {p}" for p in pids if processes.pid_alive(p)]
    left += [f"group {p}" for p in pids if processes.group_alive(p)]
    return left + naming(run_dir)


def naming(run_dir: Path) -> list[str]:
    """Processes whose command line names the run directory."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(str(run_dir) in part for part in p.info["cmdline"] or ()):
                found.append(f"{p.info['pid']}: {' '.join(p.info['cmdline'])[:200]}")
        except psutil.Error:
            continue
    return found


@pytest.mark.parametrize("family", FAMILIES)
def test_kill_9_of_lab_run_mid_run_leaves_no_process(family, tmp_path):
    if family == "Flink":
        from lab.flink.env import env_problem

        if env_problem():
            pytest.skip(env_problem())
    proc = processes.spawn([sys.executable, "-m", "lab", "run", *FAMILIES[family], "--events", "100000", "--rate",
                            "500"],
                           log_path=tmp_path / "run.log", env=clean_env(LAB_RUNS_DIR=str(tmp_path / "runs")))
    log = tmp_path / "run.log"
    run_dir = None
    deadline = time.monotonic() + 150
    try:
        while time.monotonic() < deadline:  # mid-run: the driver has finished a batch
            dirs = [d for d in (tmp_path / "runs").glob("*") if (d / "events.jsonl").is_file()]
            if dirs and any(e["type"] == "batch-done" for e in read_events(dirs[0])):
                run_dir = dirs[0]
                break
            assert proc.poll() is None, log.read_text()[-2000:]
            time.sleep(0.2)
        assert run_dir, f"no batch done in 150 s: {log.read_text()[-2000:]}"
        pids = run_pids(run_dir) + cluster_pids(run_dir)
        assert pids and all(processes.pid_alive(p) for p in pids[:1])
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    # A chain of deaths: the driver with the control process, its JVM with the driver, PySpark's daemon with the JVM.
    deadline = time.monotonic() + WITHIN_S
    left = remaining(pids, run_dir)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = remaining(pids, run_dir)
    assert not left, f"{WITHIN_S:g} s after kill -9 of lab run: {left}"
