"""The structured pipeline measured for real: Spark Structured Streaming, the embedded broker, real kills.

Every expected number is taken from the run's own timeline (``events.jsonl``:
the ``batch-start`` / ``batch-done`` events the driver wrote) and compared
with the audit; nothing is hard-coded. Each Spark driver start costs about
15 s on two cores, so the scenarios are few and, where the faults hit
different batches and their effects can be told apart, combined in one run.
The append sink under a task failure is notebook 03's run: its check is here
(:func:`check_task_failure_with_append`) and ``tests/notebooks`` applies it to
that run (``check_03``), so the scenario runs once per suite.
"""

from __future__ import annotations

import pytest

from lab.config import make_config
from lab.events import read_events
from lab.run.supervisor import run_scenario
from lab.sinks.reader import open_sink
from tests.integration.conftest import assert_all_gone, child_groups, independent_counts, module_runs_dir, run_pids

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900),
              # Its module-scoped runs are made once: its tests stay on one xdist worker.
              pytest.mark.xdist_group("test_structured")]

#: Small runs: all events are in the topic before the first micro-batch (the JVM
#: takes longer to start than the producer to finish), so batches are full.
COMMON = dict(pipeline="structured", events=1500, rate=1000, max_batch_records=250, batch_interval_s=0.5,
              seed=5, deadline_s=240)
CRASH_AFTER_OUTPUT = "driver-crash@batch=2:after-output-before-commit"


@pytest.fixture(scope="module")
def lab_env(tmp_path_factory, session_broker):
    """One runs directory for the module, with the session's broker."""
    with module_runs_dir(tmp_path_factory, session_broker, "structured") as path:
        yield path


@pytest.fixture(scope="module")
def crash_runs(lab_env):
    """The same named-point scenario twice with the same seed (append sink)."""
    return [run_scenario(make_config(**COMMON, sink="append", faults=CRASH_AFTER_OUTPUT)) for _ in range(2)]


# -- reading a run's own timeline --------------------------------------------
def batch_events(run_dir, kind: str, batch: int) -> list[dict]:
    return [e for e in read_events(run_dir) if e["type"] == kind and e.get("batch") == batch]


def replayed_batch(run_dir, batch: int) -> dict:
    """The ``batch-start`` of a batch that ran twice (crash, then recovery), checked to be the same batch."""
    starts = batch_events(run_dir, "batch-start", batch)
    assert len(starts) == 2, f"batch {batch} should have started once per driver attempt: {starts}"
    first, rerun = starts
    # Recovery from the offset log: the same offsets, hence the same rows, under the same batch id.
    assert first["ranges"] == rerun["ranges"] and first["rows"] == rerun["rows"] > 0
    assert rerun["attempt"] == first["attempt"] + 1
    done = batch_events(run_dir, "batch-done", batch)
    assert [d["attempt"] for d in done] == [rerun["attempt"]] and done[0]["rows"] == rerun["rows"]
    return rerun


def in_ranges(table, ranges: dict):
    """Audit-table rows whose (partition, offset) lies in a batch's ``{"p": [from, until)}`` ranges."""
    mask = table["partition"] < 0
    for p, (start, until) in ranges.items():
        mask |= (table["partition"] == int(p)) & (table["kafka_offset"] >= start) & (table["kafka_offset"] < until)
    return mask


# -- append: at-least-once, duplicates exactly where the replay happened -----
def test_append_crash_after_output_duplicates_exactly_the_rerun_batch(crash_runs):
    for result in crash_runs:
        a, run_dir = result.audit, result.run_dir
        rerun = replayed_batch(run_dir, 2)
        assert result.drained and result.restarts == 1
        assert [(f["kind"], f["point"], f["batch"]) for f in result.faults_fired] == [
            ("driver-crash", "after-output-before-commit", 2)]
        assert a.acked == COMMON["events"] and a.unseen == 0 and a.unexpected == 0
        assert a.lost == 0
        assert a.extra_copies == rerun["rows"]
        # ...and every duplicate is an event of batch 2: nothing else was written twice.
        dup = a.table[a.table["delivered"] > 1]
        assert len(dup) == rerun["rows"] and in_ranges(dup, rerun["ranges"]).all()
        assert (dup["delivered"] == 2).all()
        # The same counts straight from the sink file, not through the auditor.
        mine = independent_counts(run_dir)
        assert {k: getattr(a, k) for k in mine} == mine
        # Spark's own offset log: the connector writes {"topic": {"partition": offset}} entries
        offsets = (run_dir / "checkpoint" / "offsets" / "2").read_text().splitlines()
        assert any(result.config.topic in line for line in offsets)
    # PySpark's Python daemons leave the driver's process group: the crashed driver's and the last
    # driver's were both recorded (driver-child-group) and ended with them, found by those PIDs; any other
    # group recorded (child_groups says which) belongs to one of those drivers too.
    run_dir = crash_runs[-1].run_dir
    groups = child_groups(run_dir)
    drivers = [e["pid"] for e in read_events(run_dir) if e["type"] == "driver-start"]
    assert {g["driver_pid"] for g in child_groups(run_dir, daemons_only=True)} == set(drivers), groups
    assert {g["driver_pid"] for g in groups} == set(drivers), groups
    assert_all_gone(run_pids(run_dir))
    # Both drivers were started ahead (LAB_STANDBY): the first while the broker was made ready, the second as
    # soon as the first had its turn. The second had its own only after the crash had killed the first.
    timeline = read_events(run_dir)
    assert [e["pid"] for e in timeline if e["type"] == "standby-start"] == drivers
    starts = [e for e in timeline if e["type"] == "driver-start"]
    assert all(e["started_ahead_s"] > 0 for e in starts)
    crash = next(e for e in timeline if e["type"] == "fault" and e["kind"] == "driver-crash")
    ready = next(e for e in timeline if e["type"] == "driver-ready" and e["attempt"] == 2)
    first_read = next(e for e in timeline if e["type"] == "batch-start" and e["attempt"] == 2)
    assert crash["t"] < starts[1]["t"] <= ready["t"] <= first_read["t"]


def test_named_point_runs_reproduce_their_classification(crash_runs):
    seen = [(r.config.seed, r.config.faults, r.audit.guarantee) for r in crash_runs]
    assert len(set(seen)) == 1, seen
    assert seen[0][2] == "at-least-once"
    # "auto" on Apache Kafka with the connector `lab fetch` cached: Spark's own reader, as reported.
    assert {(r.report["settings"]["kafka_reader"], r.report["settings"]["kafka_reader_asked"])
            for r in crash_runs} == {("spark", "auto")}


def check_task_failure_with_append(report: dict, run_dir, events: int) -> None:
    """``task-failure@batch=2``, append sink: the failed task's first half is written twice, nothing else."""
    import pandas as pd

    table = pd.read_csv(run_dir / "audit.csv")
    assert report["drained"]
    assert report["acked"] == events and report["unseen"] == report["lost"] == report["unexpected"] == 0, report
    assert report["guarantee"] == "at-least-once"
    # Spark retried the task; the driver was never restarted.
    assert report["restarts"] == 0
    fired = batch_events(run_dir, "fault", 2)
    assert [f["kind"] for f in fired] == ["task-failure"]
    (start,) = batch_events(run_dir, "batch-start", 2)
    # The failing task is Spark partition 0: one Kafka partition's range. Which one is the reader's
    # order, and Spark's connector does not order a batch's partitions by number (measured: Kafka
    # partition 1 in one run, 0 in others).
    # It committed the first half of its rows before failing, and its retry wrote them all.
    dup = table[table["delivered"] > 1]
    (failed,) = {str(p) for p in dup["partition"]}
    task = {failed: start["ranges"][failed]}
    task_rows = int(in_ranges(table, task).sum())
    assert report["extra_copies"] == task_rows // 2 == len(dup) == report["duplicated"] > 0
    assert in_ranges(dup, task).all()
    mine = independent_counts(run_dir)
    assert {k: report[k] for k in mine} == mine


# -- idempotent, transactional, files: exactly once under crashes ------------
@pytest.mark.parametrize("sink, faults", [
    ("idempotent", "driver-crash@batch=1:mid-output,driver-crash@batch=3:after-output-before-commit,"
                   "driver-crash@batch=4:after-offset-log"),
    pytest.param("transactional", "driver-crash@batch=1:mid-output,driver-crash@batch=3:after-output-before-commit",
                 marks=pytest.mark.quick),
    ("files", "driver-crash@batch=1:mid-output,driver-crash@batch=3:after-output-before-commit"),
])
def test_exactly_once_sinks_under_crashes_at_named_points(lab_env, sink, faults):
    # The crashes hit different batches and each leaves its own trace (checked below),
    # so one run per sink covers both points; any loss or duplicate from either shows in the audit.
    result = run_scenario(make_config(**COMMON, sink=sink, faults=faults))
    a, run_dir = result.audit, result.run_dir
    planned = [f.split("@batch=")[1].split(":") for f in faults.split(",")]
    assert [(f["point"], f["batch"]) for f in result.faults_fired] == [(p, int(b)) for b, p in planned]
    assert result.drained and result.restarts == len(planned)
    assert a.acked == COMMON["events"] and a.unseen == 0
    assert a.guarantee == "exactly-once", a.counts()
    assert a.exactly_once == a.acked and a.lost == 0 and a.duplicated == 0 and a.unexpected == 0
    for batch, _ in planned:
        replayed_batch(run_dir, int(batch))
    # Each restart's time in the report: from its kill to the end of the batch the crash cut short, replayed
    # by the next driver as its first work (the crash plan names that batch; replayed_batch checked the replay).
    kills = [e for e in read_events(run_dir) if e["type"] == "fault" and e["kind"] == "driver-crash"]
    replays = [batch_events(run_dir, "batch-done", k["batch"])[0] for k in kills]
    assert [d["attempt"] for d in replays] == list(range(2, len(kills) + 2))
    assert result.report["restart_s"] == [round(d["t"] - k["t"], 3) for k, d in zip(kills, replays)]
    rerun = replayed_batch(run_dir, 3)
    if sink in ("idempotent", "transactional"):
        # Batch 3 was written in full before the crash and written again after it:
        # the sink absorbed (upsert) or skipped (committed batch key) the second copy.
        assert a.write_attempts - a.stored_rows >= rerun["rows"]
        assert in_ranges(a.table[a.table["attempts"] > 1], rerun["ranges"]).sum() == rerun["rows"]
    else:
        with open_sink(run_dir) as s:
            totals = s.totals()
        # Batch 3's files were committed in the sink's metadata log before the crash, so the
        # re-run skipped it: its events were written once. The batch-1 task killed at
        # mid-output left its file behind, uncommitted, and the audit does not count it.
        assert in_ranges(a.table[a.table["attempts"] > 1], rerun["ranges"]).sum() == 0
        assert totals["uncommitted_files"] >= 1 and totals["stored_rows"] == a.acked


# -- the source's planning (pure functions, no broker) -------------------------
def test_admission_control_spreads_the_cap_and_plans_the_same_ranges_again():
    from lab.spark.kafka_source import cap_offsets, plan_ranges

    start, latest = {0: 10, 1: 0, 2: 5}, {0: 110, 1: 300, 2: 5}
    capped = cap_offsets(start, latest, 250)
    taken = {p: capped[p] - start[p] for p in latest}
    assert sum(taken.values()) == 250
    assert all(0 <= taken[p] <= latest[p] - start[p] for p in latest) and taken[2] == 0
    assert cap_offsets(start, latest, 250) == capped
    assert cap_offsets(start, latest, 10_000) == latest
    ranges = plan_ranges("t", start, capped)
    assert [(r.partition, r.start, r.end) for r in ranges] == [(p, start[p], capped[p]) for p in (0, 1)]
