"""A planned fault whose batch never comes ends the run soon after the last event passed, not at the deadline.

Structured and direct start no batch without new records: a run that fits in
two batches never reaches ``batch=6``. The run stops undrained once every
event has passed and no batch started for :data:`lab.run.end.IDLE_END_S`,
and says which fault waited (``no-more-batches``, ``fault-not-applied``).
"""

import json
import subprocess
from pathlib import Path

import pytest

from lab import events as ev
from lab.events import read_events
from tests.conftest import clean_env, lab_cmd
from tests.integration.conftest import assert_all_gone, run_pids

pytestmark = pytest.mark.integration


def test_a_fault_at_a_batch_that_never_comes_ends_the_run_without_the_deadline(tmp_path):
    plan = "driver-crash@batch=6:mid-output"
    p = subprocess.run(lab_cmd("run", "--pipeline", "structured", "--sink", "idempotent", "--events", "900",
                               "--rate", "0", "--faults", plan, "--deadline", "600", "--json"),
                       capture_output=True, text=True, env=clean_env(LAB_RUNS_DIR=str(tmp_path)), timeout=400)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    run_dir = Path(report["run_dir"])
    events = read_events(run_dir)
    kinds = [e["type"] for e in events]
    assert ev.DEADLINE not in kinds and ev.DRAINED not in kinds
    stop = next(e for e in events if e["type"] == ev.NO_MORE_BATCHES)
    assert stop["waiting"] == [plan] and stop["idle_s"] >= 15
    assert max(e["batch"] for e in events if e["type"] == ev.BATCH_START) < 6
    # the report (and the CLI's summary from it) says which fault waited and why it never came
    not_applied = report["faults_not_applied"]
    assert [e["kind"] for e in not_applied] == ["driver-crash"], not_applied
    assert plan in not_applied[0]["reason"] and "no batch started" in not_applied[0]["reason"]
    # every event delivered once all the same
    assert (report["lost"], report["duplicated"], report["exactly_once"]) == (0, 0, 900), report
    assert_all_gone(run_pids(run_dir))
