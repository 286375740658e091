"""The receiver pipeline measured for real: Spark's socket receiver and write-ahead log, real kills.

Each test runs one scenario through :func:`lab.run.supervisor.run_scenario` and
checks the report against the run's own timeline, sink and ledger; no
outcome is written into a test. Spark driver starts dominate the time (5-10 s
each on 2 cores): the file takes about 5 minutes on an otherwise idle machine.
Time-triggered crashes (``driver-crash@at=6s``) are measured by hand, not
here: where the crash lands depends on how fast the JVM starts.

The driver crashes mid-output without a WAL (both acks) and with a WAL and
unreliable acks are notebook 01's runs: the checks of those scenarios are
here (``check_*``), and ``tests/notebooks/test_notebooks.py`` (``check_01``)
applies them to the notebook's runs, so each scenario runs once per suite.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict

import pytest

from lab.audit.ledger import LEDGER_FILE, max_acked_offsets
from lab.config import make_config
from lab.errors import LabError
from lab.events import read_events
from lab.run.supervisor import Run, run_scenario
from tests.integration.conftest import assert_all_gone, batch_rows, independent_counts, run_pids

pytestmark = pytest.mark.integration

EVENTS = 3000
CLUSTER = "local-cluster[2,1,1024]"


def receiver_run(**params):
    """One receiver scenario; checks what every run must satisfy and returns the result."""
    result = run_scenario(make_config(pipeline="receiver", events=EVENTS, rate=1000, **params))
    check_receiver_run(result.report, result.run_dir, EVENTS)
    return result


def check_receiver_run(report: dict, run_dir, events: int) -> None:
    """What every receiver run must satisfy: drained, every event accounted for, every process gone."""
    assert report["drained"] and report["acked"] == events and report["unseen"] == 0 and report["unexpected"] == 0
    assert {k: report[k] for k in independent_counts(run_dir)} == independent_counts(run_dir)
    assert_all_gone(run_pids(run_dir))


def by_attempt(run_dir) -> list[tuple[int, dict]]:
    """The timeline with the driver attempt each event happened in."""
    attempt, out = 0, []
    for e in read_events(run_dir):
        if e["type"] == "driver-start":
            attempt += 1
        out.append((attempt, e))
    return out


def lost_offsets(run_dir) -> list[tuple[int, int]]:
    """(partition, offset) of every lost event, from the run's audit table (``audit.csv``)."""
    import pandas as pd

    t = pd.read_csv(run_dir / "audit.csv")
    lost = t[t.status == "lost"]
    return list(zip(lost.partition.tolist(), lost.kafka_offset.tolist()))


def sink_rows_of_batch(run_dir, batch: int) -> int:
    db = sqlite3.connect(run_dir / "sink.sqlite")
    try:
        return db.execute("SELECT COUNT(*) FROM sink_events WHERE batch_key LIKE "
                          "?", (f"batch-{batch}-time-%",)).fetchone()[0]
    finally:
        db.close()


def resumed_from(timeline, attempt: int) -> dict[int, int]:
    """Where the receiver's consumer of ``attempt`` resumed (its first connection).

    A run may drain before that receiver is fed (with acks on receipt the first receiver may have
    committed every event before the crash): once the driver is stopping, the feeder feeds no new
    connection. It holds one that comes after the stop began; one accepted in the same tick as the stop
    (``held`` false, measured once in CI on a loaded machine) is left unfed as well. Either way it was
    handed nothing, and its position is the group's committed offsets, which its disconnect records.
    """
    events = [e for n, e in timeline if n == attempt]
    feed = next((e for e in events if e["type"] == "receiver-feed"), None)
    if feed is not None:
        return {int(p): o for p, o in feed["resume_from"].items()}
    connect = next(e for e in events if e["type"] == "receiver-connect")
    disconnect = next(e for e in events if e["type"] == "receiver-disconnect" and e["epoch"] == connect["epoch"])
    assert disconnect["handed_over"] == 0, "a receiver that was handed records was fed: its feed event is missing"
    return {int(p): o for p, o in disconnect["committed"].items()}


def check_without_wal_a_driver_crash_loses_what_spark_held(report: dict, run_dir, ack: str) -> None:
    """No WAL, ``driver-crash@batch=3:mid-output``: the blocks of the crashed batch die with the driver; the
    restart reports it and goes on."""
    timeline = by_attempt(run_dir)
    assert report["restarts"] == 1
    rows3 = batch_rows(run_dir, 3)
    # Batch 3 was acknowledged to the source before it ran (on receipt, or when Spark allocated it): what the sink
    # had not stored of it is gone, and mid-output left some of it unstored.
    assert report["lost"] >= rows3 - sink_rows_of_batch(run_dir, 3) > 0, (rows3, report["lost"])
    # The recovered batch 3 is empty, and the timeline says so.
    lost3 = [e for n, e in timeline if n == 2 and e["type"] == "batch-lost" and e["batch"] == 3]
    assert len(lost3) == 1 and lost3[0]["expected_rows"] == rows3 and lost3[0]["rows"] == 0
    # The pipeline went on after it: the restarted driver's receiver connected again (resumed_from finds
    # where), and whenever the topic held records past where it resumed, later batches carried them.
    # With acks on receipt (auto) and the producer done before the crash (2,500 events sent in 5.5 s, the
    # receiver up at 9.1 s, the crash at 12.1 s on a loaded machine), the first receiver had received and
    # committed all of them: the run may then drain right after the lost batch, with no later batch at all
    # (measured on 2026-11-28: drained 0.4 s after the recovered batch 3).
    later = [e for n, e in timeline if n == 2 and e["type"] == "batch-done" and e["batch"] > 3]
    assert any(e["type"] == "receiver-connect" for n, e in timeline if n == 2)
    resume = resumed_from(timeline, 2)
    left = any(o >= resume.get(p, 0) for p, o in max_acked_offsets(run_dir / LEDGER_FILE).items())
    assert any(e["rows"] for e in later) or not left, (resume, later)
    # Lost means committed: the restarted receiver resumed past every lost event.
    assert all(o < resume[p] for p, o in lost_offsets(run_dir))


@pytest.mark.quick
def test_wal_holds_what_the_source_was_not_told(runs_dir):
    """Crash after the batch is in the WAL, before its offsets are committed: both replay it."""
    result = receiver_run(wal="on", ack="stored", faults="driver-crash@batch=3:after-wal-before-ack")
    a, run_dir = result.audit, result.run_dir
    timeline = by_attempt(run_dir)
    assert result.restarts == 1 and a.lost == 0
    points = [e for _, e in timeline if e["type"] == "fault-point"]
    assert [(e["point"], e["batch"]) for e in points] == [("after-wal-before-ack", 3)]
    # Batch 3 never reached the sink before the crash, then came twice: recovered from the
    # WAL and sent again by the receiver's consumer from the uncommitted offsets.
    rows3 = batch_rows(run_dir, 3)
    assert any(n == 2 and e["type"] == "batch-done" and e["batch"] == 3 and e["rows"] == rows3 for n, e in timeline)
    assert a.duplicated >= rows3
    # The second driver was started ahead (LAB_STANDBY), and recovered from the checkpoint only at its turn,
    # after the crash had killed the first: its StreamingContext came after the fault.
    events = read_events(run_dir)
    drivers = [e for e in events if e["type"] == "driver-start"]
    assert [e["pid"] for e in events if e["type"] == "standby-start"] == [e["pid"] for e in drivers]
    assert len(drivers) == 2 and drivers[1]["started_ahead_s"] > 0
    crash = next(e["t"] for e in events if e["type"] == "fault" and e["kind"] == "driver-crash")
    recovered = [e for e in events if e["type"] == "receiver-context" and e["attempt"] == 2]
    assert recovered and recovered[0]["recovered"] and recovered[0]["t"] > crash


def check_with_wal_and_auto_acks_the_loss_is_the_receivers_buffer(report: dict, run_dir) -> None:
    """Unreliable acks + WAL: batch 3 is recovered and written again; whatever is lost was the receiver's buffer.

    The kill finds records in the receiver's buffer (handed over and committed
    on receipt, not yet in a stored block) unless it comes just as a block was
    stored. Measured 8 times on 2 cores: lost 133-202, each time a contiguous
    run of offsets per partition ending just below where the restarted
    receiver resumed; duplicated 120-180 (with a 0.2 s commit timer, 3 of 8
    runs lost nothing). Both outcomes are asserted for what the design makes them.
    """
    counts = {k: report[k] for k in ("acked", "exactly_once", "duplicated", "lost", "unseen")}
    timeline = by_attempt(run_dir)
    assert report["restarts"] == 1
    assert report["acked"] == report["lost"] + report["exactly_once"] + report["duplicated"] + report["unseen"], counts
    # The write-ahead log kept every block Spark had reported: no batch lost; batch 3 recovered whole.
    assert not [e for _, e in timeline if e["type"] == "batch-lost"]
    rows3 = batch_rows(run_dir, 3)
    redone = [e["rows"] for n, e in timeline if n == 2 and e["type"] == "batch-done" and e["batch"] == 3]
    assert redone == [rows3], (redone, rows3)
    # The half written before the crash is in the sink twice: duplicates in every run.
    written_before = sink_rows_of_batch(run_dir, 3) - rows3
    assert 0 < written_before <= report["duplicated"], (written_before, counts)
    # Loss, when there is any: per partition the last records handed over before the kill, i.e. a contiguous
    # run of offsets ending just below the committed offset the restarted receiver resumed from, and above
    # everything the first driver's (WAL-recovered) batches wrote.
    resume = resumed_from(timeline, 2)
    first_attempt = {e["batch"] for n, e in timeline if n == 1 and e["type"] == "batch-submitted"}
    db = sqlite3.connect(run_dir / "sink.sqlite")
    keys = db.execute("SELECT batch_key, partition, MAX(kafka_offset) FROM sink_events GROUP BY batch_key, partition")
    wal_top: dict[int, int] = {}
    for key, partition, top in keys.fetchall():
        if int(key.split("-")[1]) in first_attempt:
            wal_top[partition] = max(wal_top.get(partition, -1), top)
    db.close()
    lost = defaultdict(list)
    for p, o in lost_offsets(run_dir):
        lost[p].append(o)
    assert sum(map(len, lost.values())) == report["lost"], counts
    tails = {p: list(range(resume[p] - len(offsets), resume[p])) for p, offsets in lost.items()}
    buffer_lost = all(sorted(lost[p]) == tails[p] and wal_top.get(p, -1) < tails[p][0] for p in lost)
    assert report["lost"] == 0 or buffer_lost, (
        f"lost {report['lost']} events, not the receiver's buffer: lost offsets {dict(lost)}, resumed from {resume}, "
        f"WAL-recovered batches wrote up to {wal_top}; {counts}")


@pytest.mark.parametrize("replication", [2, 1])
def test_executor_crash_and_block_replication(runs_dir, replication):
    """The receiver's executor is killed before batch 2 is read: a replica saves it, or it is lost."""
    result = receiver_run(wal="off", ack="stored", replication=replication, spark_master=CLUSTER,
                          faults="executor-crash@batch=2")
    a, run_dir = result.audit, result.run_dir
    events = read_events(run_dir)
    kill = next(f for f in result.faults_fired if f["kind"] == "executor-crash")
    targets = [e["pid"] for e in events if e["type"] == "executor-target" and e["t"] < next(
        x["t"] for x in events if x["type"] == "fault" and x["kind"] == "executor-crash")]
    assert kill["pid"] is not None and kill["pid"] == targets[-1]  # the receiver's executor died
    assert result.restarts == 0
    lost_batches = [e for e in events if e["type"] == "batch-lost"]
    if replication == 2:
        assert a.lost == 0 and not lost_batches
    else:
        assert a.lost >= batch_rows(run_dir, 2) and lost_batches[0]["batch"] == 2
        # Acknowledged when allocated, gone with the executor: exactly the rows the timeline reports missing.
        assert a.lost == sum(e["missing"] for e in lost_batches)


def test_receiver_restart_resumes_from_the_committed_offsets(runs_dir):
    """The connection drops; the consumer forgets, and the stored-acks receiver loses and repeats nothing."""
    result = receiver_run(wal="on", ack="stored", faults="receiver-restart@batch=2")
    a, run_dir = result.audit, result.run_dir
    events = read_events(run_dir)
    assert result.restarts == 0 and a.lost == 0 and a.duplicated == 0
    drop = [e for e in events if e["type"] == "receiver-disconnect" and e["reason"].startswith("receiver-restart")]
    assert len(drop) == 1 and drop[0]["graceful"]
    feeds = [e for e in events if e["type"] == "receiver-feed"]
    # A second connection is owed when events were left to read at the drop. On a busy machine the driver may come
    # up after the producer ended and hand everything over before batch 2: the run then drains before the receiver
    # connects again (measured once: 3,000 of 3,000 handed over at the drop, one feed).
    assert len(feeds) == (2 if drop[0]["handed_over"] < a.acked else len(feeds)) and len(feeds) in (1, 2)
    if len(feeds) == 2:
        assert feeds[1]["epoch"] == drop[0]["epoch"] + 1
        # Every line the first connection carried was stored and committed before the second began.
        assert sum(feeds[1]["resume_from"].values()) == drop[0]["handed_over"]


def test_a_point_that_does_not_exist_with_these_settings_is_refused_before_start(runs_dir):
    # The configuration refuses it; the driver's own guard (a DriverConfigError, so the supervisor does
    # not restart it) is tested in tests/unit/test_pipeline_tasks.py.
    with pytest.raises(LabError, match="after-wal-before-ack exists only with --wal on --ack stored"):
        make_config(pipeline="receiver", events=100, wal="off", faults="driver-crash@batch=1:after-wal-before-ack")


def test_a_receiver_that_cannot_reach_its_feeder_fails_in_one_line(runs_dir, monkeypatch):
    """Executors told to reach the driver at an address that never answers (192.0.2.1: RFC 5737's TEST-NET-1,
    never routed): the run ends with one line naming it, within 10 s of Spark starting the receiver, and leaves
    nothing running; before, it waited for its deadline (4 min in the compose stack)."""
    monkeypatch.setenv("LAB_SPARK_DRIVER_HOST", "192.0.2.1")
    run = Run(make_config(pipeline="receiver", events=500, rate=1000))
    with pytest.raises(LabError) as info:
        run.start().wait(180)
    message = str(info.value)
    assert "\n" not in message and re.search(r"cannot reach its feeder at 192\.0\.2\.1:\d+", message), message
    events = read_events(run.run_dir)
    started = next(e["t"] for e in events if e["type"] == "receiver-started")
    ended = next(e["t"] for e in events if e["type"] == "run-error")
    assert ended - started < 10, f"{ended - started:.1f} s from the receiver's start to the run's end"
    assert [e["type"] for e in events].count("driver-start") == 1  # not restarted: a restart is refused the same way
    assert_all_gone(run_pids(run.run_dir), within_s=30)
