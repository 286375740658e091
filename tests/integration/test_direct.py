"""The direct pipeline measured for real: Spark RDDs reading planned offset ranges, real kills, a real sink.

Every expected number comes from the run's own records: batch sizes from the
checkpoint's offset log (``checkpoint/offsets/<batch>.json``, read here as
plain JSON files), replays and retries from ``events.jsonl``, counts from the
auditor and, independently, from plain SQL on the ledger and the sink.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from lab.config import make_config
from lab.errors import LabError
from lab.events import read_events
from lab.pipelines.direct_offsets import OffsetLog, OffsetRange, plan_ranges, recovery_ranges
from lab.pipelines.shared.tasks import FAULT_PARTITION
from lab.run.supervisor import run_scenario
from tests.integration.conftest import assert_all_gone, independent_counts, run_pids
from tests.integration.executor_checks import check_executor_crash

pytestmark = pytest.mark.integration

#: Small batches (per partition per batch) so a few thousand events make several batches.
SMALL = dict(pipeline="direct", max_batch_records=100, batch_interval_s=0.5)


# -- reading a run's records ------------------------------------------------------
def logged_plans(run_dir: Path) -> list[dict]:
    """The offset log as files on disk, in batch order."""
    files = sorted((run_dir / "checkpoint" / "offsets").glob("*.json"), key=lambda f: int(f.stem))
    return [json.loads(f.read_text()) for f in files]


def plan_ranges_of(plan: dict) -> dict[int, tuple[int, int]]:
    return {r["partition"]: (r["fromOffset"], r["untilOffset"]) for r in plan["ranges"]}


def ledger_ends(run_dir: Path) -> dict[int, int]:
    """Per partition, one past the highest offset the producer had acknowledged."""
    db = sqlite3.connect(run_dir / "ledger.sqlite")
    try:
        return {p: o + 1 for p, o in db.execute(
            "SELECT partition, MAX(kafka_offset) FROM sends WHERE status = 'acked' GROUP BY partition")}
    finally:
        db.close()


def assert_offset_log_contiguous(run_dir: Path, partitions: int) -> list[dict]:
    """Across restarts, each partition's logged ranges chain from 0 to the log end, without gap or overlap."""
    plans = logged_plans(run_dir)
    assert plans, "no batch in the offset log"
    assert [p["batch"] for p in plans] == list(range(len(plans))), "batch numbers skip or repeat"
    done = run_dir / "checkpoint" / "done"
    assert all((done / str(p["batch"])).exists() for p in plans), "a logged batch was never marked done"
    position = {p: 0 for p in range(partitions)}
    for plan in plans:
        ranges = plan_ranges_of(plan)
        assert set(ranges) == set(range(partitions)), f"batch {plan['batch']} does not list every partition"
        for p, (start, until) in ranges.items():
            assert start == position[p], f"batch {plan['batch']} partition {p} starts at {start}, not {position[p]}"
            assert until >= start
            position[p] = until
    ends = ledger_ends(run_dir)
    assert {p: position[p] for p in ends} == ends, "the logged ranges do not reach the end of the topic"
    return plans


def replays(run_dir: Path, plans: list[dict], exact: bool) -> dict[int, list[dict]]:
    """Batches started more than once, checked against the offset log.

    The first start of a batch reads its logged ranges. A replay reads them
    again (``exact``, offsets in the checkpoint) or, when the offsets live in
    the sink or the consumer group, the part the store does not have yet:
    from the stored offset up to the same logged end.
    """
    by_batch = defaultdict(list)
    for e in read_events(run_dir):
        if e["type"] == "batch-start":
            by_batch[e["batch"]].append(e)
    logged = {p["batch"]: plan_ranges_of(p) for p in plans}
    for batch, starts in by_batch.items():
        first = {int(p): tuple(r) for p, r in starts[0]["ranges"].items()}
        assert first == logged[batch] and not starts[0]["replay"]
        for again in starts[1:]:
            assert again["replay"] and again["attempt"] > starts[0]["attempt"]
            ranges = {int(p): tuple(r) for p, r in again["ranges"].items()}
            if exact:
                assert ranges == logged[batch], f"batch {batch} was replayed with other ranges"
            else:
                for p, (start, until) in ranges.items():
                    assert until == logged[batch][p][1] and logged[batch][p][0] <= start <= until
    return {b: s for b, s in by_batch.items() if len(s) > 1}


def fired(run_dir: Path) -> list[dict]:
    return [e for e in read_events(run_dir) if e["type"] == "fault"]


def batch_done(run_dir: Path, batch: int) -> dict:
    return [e for e in read_events(run_dir) if e["type"] == "batch-done" and e["batch"] == batch][-1]


def first_task_range(plan: dict) -> tuple[int, int]:
    """The range Spark partition FAULT_PARTITION read: the planned non-empty ranges in partition order."""
    active = [r for r in sorted(plan["ranges"], key=lambda r: r["partition"]) if r["untilOffset"] > r["fromOffset"]]
    r = active[FAULT_PARTITION]
    return r["partition"], r["untilOffset"] - r["fromOffset"]


def sink_offsets(run_dir: Path) -> dict[int, int]:
    db = sqlite3.connect(run_dir / "sink.sqlite")
    try:
        return dict(db.execute("SELECT partition, next_offset FROM sink_offsets"))
    finally:
        db.close()


# -- planning and recovery rules (no Spark) -----------------------------------------
def test_planning_caps_each_partition_and_recovery_follows_the_store(tmp_path):
    ranges = plan_ranges("t", {0: 10, 1: 0}, {0: 500, 1: 40, 2: 0}, 100)
    assert [(r.partition, r.fromOffset, r.untilOffset) for r in ranges] == [(0, 10, 110), (1, 0, 40), (2, 0, 0)]
    log = OffsetLog(tmp_path)
    log.write_plan(0, ranges, "sink")
    with pytest.raises(LabError):
        log.write_plan(0, ranges, "sink")  # a batch's ranges never change
    assert log.pending() == (0, ranges)
    assert recovery_ranges("checkpoint", ranges, {0: 110}, {}) == ranges
    trimmed = recovery_ranges("sink", ranges, {0: 110}, {0: 0, 1: 0, 2: 0})
    assert [(r.fromOffset, r.untilOffset) for r in trimmed] == [(110, 110), (0, 40), (0, 0)]
    with pytest.raises(LabError, match="outside"):
        recovery_ranges("sink", ranges, {0: 5}, {})  # the sink behind the batch's start: a skipped range
    log.mark_done(0, 140)
    assert log.pending() is None and log.next_positions() == {0: 110, 1: 40, 2: 0}
    assert OffsetRange.from_json(ranges[0].to_json()) == ranges[0]


def test_offsets_in_the_sink_are_exactly_once_under_every_fault(runs_dir):
    plan = ("driver-crash@batch=1:after-offset-log,driver-crash@batch=2:mid-output,"
            "driver-crash@batch=3:after-output-before-commit,task-failure@batch=4,driver-crash@batch=5")
    # Five driver starts: a deadline for correctness, not speed (each start takes 10-30 s on 2 busy cores).
    cfg = make_config(**SMALL, events=2100, offsets="sink", sink="transactional", faults=plan, deadline_s=300)
    result = run_scenario(cfg)
    a, run_dir = result.audit, result.run_dir
    assert sorted(e["index"] for e in fired(run_dir)) == list(range(5)), "not every planned fault happened"
    assert result.restarts == 4 and result.drained
    assert (a.acked, a.exactly_once, a.duplicated, a.lost, a.unseen, a.unexpected) == (2100, 2100, 0, 0, 0, 0)
    assert {k: getattr(a, k) for k in independent_counts(run_dir)} == independent_counts(run_dir)
    plans = assert_offset_log_contiguous(run_dir, cfg.partitions)
    assert set(replays(run_dir, plans, exact=False)) == {1, 2, 3, 5}
    assert batch_done(run_dir, 4)["retried_tasks"] >= 1  # the failed task was retried, not the batch
    # The sink's stored offsets, committed with the rows, end where the topic ends.
    assert sink_offsets(run_dir) == ledger_ends(run_dir)


def test_offsets_in_the_sink_are_exactly_once_under_a_time_triggered_crash(runs_dir):
    # A slow producer keeps the stream live for 25 s, so the crash at 18 s meets a working driver
    # (the JVM takes 5-12 s to start here); wherever it lands, the counts must be exactly once.
    cfg = make_config(**SMALL, events=1500, rate=60, offsets="sink", sink="transactional",
                      faults="driver-crash@at=18s")
    result = run_scenario(cfg)
    a, run_dir = result.audit, result.run_dir
    assert [e["kind"] for e in fired(run_dir)] == ["driver-crash"] and result.restarts == 1 and result.drained
    assert (a.acked, a.exactly_once, a.duplicated, a.lost, a.unseen, a.unexpected) == (1500, 1500, 0, 0, 0, 0)
    assert_offset_log_contiguous(run_dir, cfg.partitions)
    assert sink_offsets(run_dir) == ledger_ends(run_dir)


@pytest.mark.quick
def test_idempotent_sink_absorbs_replays_and_retries(runs_dir):
    # The lab's own range reader (the other tests read with Spark's connector, auto's choice when it is cached).
    cfg = make_config(**SMALL, events=1500, offsets="checkpoint", sink="idempotent", kafka_reader="labkafka",
                      faults="task-failure@batch=1,driver-crash@batch=2:after-output-before-commit")
    result = run_scenario(cfg)
    a, run_dir = result.audit, result.run_dir
    plans = assert_offset_log_contiguous(run_dir, cfg.partitions)
    assert set(replays(run_dir, plans, exact=True)) == {2}
    replayed = sum(u - f for f, u in plan_ranges_of(plans[2]).values())
    _, retried = first_task_range(plans[1])
    assert (a.acked, a.exactly_once, a.duplicated, a.lost, a.unseen) == (1500, 1500, 0, 0, 0)
    # Written twice, stored once: the whole replayed batch, and the half the failed task had committed.
    assert a.absorbed_rewrites == replayed + retried // 2
    assert batch_done(run_dir, 1)["retried_tasks"] >= 1


@pytest.mark.parametrize("offsets, sink", [("checkpoint", "append"), ("sink", "transactional")])
def test_executor_crash_recovers_by_task_retry(runs_dir, offsets, sink):
    cfg = make_config(**SMALL, events=1500, offsets=offsets, sink=sink, spark_master="local-cluster[2,1,1024]",
                      faults="executor-crash@batch=2")
    result = run_scenario(cfg)
    run_dir = result.run_dir
    # The SIGKILL hit the executor whose task was half-way through batch 2's output; the task was rerun.
    check_executor_crash(result.report, read_events(run_dir))
    assert result.audit.acked == 1500 and batch_done(run_dir, 2)["retried_tasks"] >= 1
    plans = assert_offset_log_contiguous(run_dir, cfg.partitions)
    assert not replays(run_dir, plans, exact=True)  # no batch re-run: the task was
    if sink == "append":
        # The sink's own record of the task's writes: the killed attempt's half, then the retry's whole range.
        partition, count = first_task_range(plans[2])
        db = sqlite3.connect(run_dir / "sink.sqlite")
        attempts = db.execute("SELECT COUNT(*) FROM sink_attempts WHERE batch_key = ?",
                              (f"batch-2-part-{partition}",)).fetchone()[0]
        db.close()
        assert attempts == count + count // 2
    assert_all_gone(run_pids(run_dir))
