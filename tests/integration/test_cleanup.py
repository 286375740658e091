"""No process of a run survives it: PySpark's Python daemons and workers included.

PySpark's daemon leaves the driver's process group (``os.setpgid(0, 0)``), so a
``killpg`` of the driver alone misses it and its workers. The supervisor records
each such group in the timeline (``driver-child-group``) and ends it with the
driver; these tests check by those recorded PIDs, never by process name.
"""

import json
import subprocess
from pathlib import Path

import pytest

from lab.config import make_config
from lab.events import read_events
from lab.supervisor import run_scenario
from tests.conftest import clean_env, lab_cmd, still_running
from tests.integration.conftest import assert_all_gone, run_pids

pytestmark = pytest.mark.integration


def daemon_groups(run_dir: Path) -> list[dict]:
    return [e for e in read_events(run_dir) if e["type"] == "driver-child-group"]


def test_crashed_and_final_drivers_take_their_python_daemons_with_them(runs_dir):
    result = run_scenario(make_config(pipeline="structured", events=1200, rate=1000, max_batch_records=300,
                                      faults="driver-crash@batch=2:after-output-before-commit"))
    groups = daemon_groups(result.run_dir)
    drivers = [e["pid"] for e in read_events(result.run_dir) if e["type"] == "driver-start"]
    assert len(drivers) == 2 and result.audit.lost == 0
    # both the crashed driver and the last one had Python daemons of their own
    assert {g["driver_pid"] for g in groups} == set(drivers), groups
    assert all("pyspark.daemon" in g["cmd"] for g in groups)
    assert not still_running([(g["pid"], g["create_time"]) for g in groups])
    assert_all_gone(run_pids(result.run_dir))


def test_lab_run_leaves_no_python_daemon(tmp_path):
    p = subprocess.run(lab_cmd("run", "--pipeline", "direct", "--events", "900", "--rate", "1000", "--json"),
                       capture_output=True, text=True, env=clean_env(LAB_RUNS_DIR=str(tmp_path)), timeout=240)
    assert p.returncode == 0, p.stderr
    run_dir = Path(json.loads(p.stdout.strip().splitlines()[-1])["run_dir"])
    groups = daemon_groups(run_dir)
    assert groups and all("pyspark.daemon" in g["cmd"] for g in groups)
    assert_all_gone(run_pids(run_dir))
