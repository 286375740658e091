"""No process of a `lab run` survives it: PySpark's Python daemons and workers included.

PySpark's daemon leaves the driver's process group (``os.setpgid(0, 0)``), so a
``killpg`` of the driver alone misses it and its workers. The supervisor records
each such group in the timeline (``driver-child-group``) and ends it with the
driver; this test checks by those recorded PIDs, never by process name. (A crashed
driver's daemons: ``test_structured``'s crash runs; every test's runs: the
session-wide check in ``tests/conftest.py``.)
"""

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import clean_env, lab_cmd
from tests.integration.conftest import assert_all_gone, child_groups, run_pids

pytestmark = pytest.mark.integration


def test_lab_run_leaves_no_python_daemon(tmp_path):
    p = subprocess.run(lab_cmd("run", "--pipeline", "direct", "--events", "900", "--rate", "1000", "--json"),
                       capture_output=True, text=True, env=clean_env(LAB_RUNS_DIR=str(tmp_path)), timeout=240)
    assert p.returncode == 0, p.stderr
    run_dir = Path(json.loads(p.stdout.strip().splitlines()[-1])["run_dir"])
    daemons = child_groups(run_dir, daemons_only=True)
    assert daemons and all("pyspark.worker" in g["cmd"] for g in daemons), child_groups(run_dir)
    assert_all_gone(run_pids(run_dir))
