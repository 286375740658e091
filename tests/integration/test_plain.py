"""The testbed end to end with the plain pipeline: real broker, real kills, real sink."""

import json
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from lab.audit.auditor import audit_run
from lab.config import make_config
from lab.events import read_events, read_progress
from lab.run.supervisor import run_scenario
from lab.sinks.reader import open_sink
from tests.conftest import clean_env, lab_cmd
from tests.integration.conftest import assert_all_gone, batch_rows, independent_counts, run_pids

pytestmark = pytest.mark.integration

REPORT_KEYS = {"pipeline", "settings", "faults", "acked", "exactly_once", "duplicated", "extra_copies", "lost",
               "unexpected", "unseen", "write_attempts", "run_dir", "timings"}


def test_cli_run_with_a_driver_crash(tmp_path):
    """The issue's acceptance command: counts add up and equal an independent count."""
    env = clean_env(LAB_RUNS_DIR=str(tmp_path))
    p = subprocess.run(
        lab_cmd("run", "--pipeline", "plain", "--events", "3000", "--rate", "1000",
                "--faults", "driver-crash@at=3s", "--json"),
        capture_output=True, text=True, env=env, timeout=180,
    )
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert REPORT_KEYS <= set(report)
    assert report["acked"] == 3000 and report["unseen"] == 0 and report["drained"]
    assert report["acked"] == report["exactly_once"] + report["duplicated"] + report["lost"]
    assert report["restarts"] == 1 and report["faults_fired"][0]["kind"] == "driver-crash"
    run_dir = report["run_dir"]
    from pathlib import Path
    run_dir = Path(run_dir)
    mine = independent_counts(run_dir)
    assert {k: report[k] for k in mine} == mine
    assert_all_gone(run_pids(run_dir))


@pytest.mark.parametrize(
    "commit, point, expect",
    [
        pytest.param("after-output", "after-output-before-commit", "duplicates = batch", marks=pytest.mark.quick),
        ("before-output", "after-commit-before-output", "loss = batch"),
    ],
)
def test_commit_order_decides_loss_or_duplicates(runs_dir, commit, point, expect):
    cfg = make_config(events=1500, rate=1000, commit=commit, faults=f"driver-crash@batch=3:{point}",
                      max_batch_records=100)
    result = run_scenario(cfg)
    a, run_dir = result.audit, result.run_dir
    rows = batch_rows(run_dir, 3)
    assert rows > 0 and a.acked == 1500 and a.unseen == 0
    if expect == "duplicates = batch":
        assert (a.lost, a.duplicated, a.extra_copies) == (0, rows, rows)
    else:
        assert (a.lost, a.duplicated) == (rows, 0)
    assert {k: getattr(a, k) for k in independent_counts(run_dir)} == independent_counts(run_dir)
    # the crash happened exactly at the named point, once
    points = [e for e in read_events(run_dir) if e["type"] == "fault-point"]
    assert [(e["point"], e["batch"]) for e in points] == [(point, 3)]


def test_idempotent_sink_absorbs_the_replay(runs_dir):
    cfg = make_config(events=1500, rate=1000, sink="idempotent", commit="after-output",
                      faults="driver-crash@batch=3:after-output-before-commit", max_batch_records=100)
    a = run_scenario(cfg).audit
    assert (a.exactly_once, a.lost, a.duplicated) == (1500, 0, 0)
    assert a.absorbed_rewrites > 0 and a.write_attempts > a.stored_rows  # written twice, stored once


def test_auditor_reports_exactly_the_tampered_events(runs_dir):
    result = run_scenario(make_config(events=1000, rate=0))
    run_dir = result.run_dir
    assert result.audit.exactly_once == 1000
    db = sqlite3.connect(run_dir / "sink.sqlite")
    ids = [r[0] for r in db.execute("SELECT event_id FROM sink_events ORDER BY seq")]
    deleted, doubled = set(ids[10:15]) | {ids[500]}, set(ids[100:107])
    with db:
        db.executemany("DELETE FROM sink_events WHERE event_id = ?", [(i,) for i in deleted])
        db.executemany("INSERT INTO sink_events SELECT * FROM sink_events WHERE event_id = ?", [(i,) for i in doubled])
        db.execute("INSERT INTO sink_events VALUES ('not-a-sent-event', 3, 0, 0, 'forged', 0)")
    db.close()
    with open_sink(run_dir) as sink:
        a = audit_run(run_dir / "ledger.sqlite", sink, read_progress(run_dir)["positions"])
    t = a.table
    assert set(t[t.status == "lost"].event_id) == deleted
    assert set(t[t.status == "duplicated"].event_id) == doubled
    assert (a.lost, a.duplicated, a.extra_copies, a.unexpected) == (len(deleted), len(doubled), len(doubled), 1)


def test_sigint_mid_run_leaves_no_process(tmp_path):
    env = clean_env(LAB_RUNS_DIR=str(tmp_path))
    proc = subprocess.Popen(lab_cmd("run", "--events", "100000", "--rate", "500"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    run_dir = None
    while time.monotonic() < deadline:
        found = [d for d in tmp_path.iterdir() if d.is_dir() and (d / "events.jsonl").exists()]
        if found and any(e["type"] == "batch-done" for e in read_events(found[0])):
            run_dir = found[0]
            break
        time.sleep(0.2)
    assert run_dir is not None, "the run never got going"
    pids = run_pids(run_dir)
    assert len(pids) >= 3  # broker, proxy, driver
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert_all_gone(pids)


def test_postgresql_sink(runs_dir, postgres_url, monkeypatch):
    """The PostgreSQL backend: one schema per run, every write attempt recorded, an upsert absorbing the replay."""
    import psycopg

    monkeypatch.setenv("LAB_SINK_URL", postgres_url)
    # An event-id upsert makes the outcome independent of how the replay's polls cut the topic
    # (a batch-id sink is not: measured, the first attempt's batch 2 held offsets 200-290, the
    # replay's 200-299, and skipping the replay by batch id lost 9 events).
    result = run_scenario(make_config(events=1200, rate=0, sink="idempotent", commit="after-output",
                                      faults="driver-crash@batch=2:after-output-before-commit", max_batch_records=100))
    a = result.audit
    assert result.config.settings["sink_backend"] == "postgresql" and not (result.run_dir / "sink.sqlite").exists()
    schema = json.loads((result.run_dir / "sink.json").read_text())["schema"]
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(f'SELECT event_id, COUNT(*) FROM "{schema}".sink_events GROUP BY event_id').fetchall()
        attempts = conn.execute(f'SELECT COUNT(*) FROM "{schema}".sink_attempts').fetchone()[0]
    # The crashed driver had written batch 2; the restarted one read it again from the committed
    # offsets and wrote it again: every one of those events written twice, stored once.
    starts = [e for e in read_events(result.run_dir) if e["type"] == "batch-start" and e["batch"] == 2]
    first = starts[0]["rows"]
    assert len(starts) == 2 and first > 0
    assert (a.acked, a.exactly_once, a.duplicated, a.lost, a.unseen) == (1200, 1200, 0, 0, 0)
    assert a.absorbed_rewrites == first and attempts == a.write_attempts == 1200 + first
    assert len(rows) == 1200 and sum(n for _, n in rows) == a.stored_rows == 1200


def test_postgresql_sink_in_a_sql_ascii_database(runs_dir, postgres_url, monkeypatch):
    """A database made without a UTF-8 locale is SQL_ASCII, whose text psycopg hands back as bytes unless the
    connection asks for UTF-8: the sink's rows must still match the ledger's event ids (measured without it:
    every event audited lost)."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS ascii")
        conn.execute("CREATE DATABASE ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    monkeypatch.setenv("LAB_SINK_URL", postgres_url.rsplit("/", 1)[0] + "/ascii")
    a = run_scenario(make_config(events=500, rate=0, sink="idempotent")).audit
    assert (a.acked, a.exactly_once, a.lost, a.unseen) == (500, 500, 0, 0)


def test_second_crash_while_the_driver_restarts_waits_for_the_next_driver(runs_dir):
    """A crash due while no driver runs is deferred to the next driver, never logged against the dead one."""
    # A 1 s restart delay: the second crash falls due while no driver runs.
    result = run_scenario(make_config(events=3000, rate=1000, faults="driver-crash@at=2.2s,driver-crash@at=3.1s",
                                      restart_delay_s=1.0))
    events = read_events(result.run_dir)
    started = [e["pid"] for e in events if e["type"] == "driver-start"]
    killed = [e["pid"] for e in events if e["type"] == "fault"]
    deferred = [e for e in events if e["type"] == "fault-deferred"]
    assert result.restarts == 2 and len(started) == 3
    assert killed == started[:2], "each crash must kill a different, live driver"
    assert [e["index"] for e in deferred] == [1] and result.report["faults_fired"][1]["deferred_s"] > 0
    a = result.audit
    assert (a.acked, a.lost, a.unseen) == (3000, 0, 0) and result.drained
    assert_all_gone(run_pids(result.run_dir))


def test_forced_final_stop_is_recorded_and_counts_in_flight_events_as_unseen(runs_dir, monkeypatch):
    """A run stopped at its deadline whose driver does not stop in time: killed, recorded, nothing called lost."""
    from lab.run import supervisor
    from lab.run.driver_process import DriverProcess

    monkeypatch.setattr(supervisor, "STOP_GRACE_S", 0.0)
    # A hung driver: stopped (SIGSTOP) before its SIGTERM, it cannot stop by itself; a plain driver left running
    # could exit on the SIGTERM before the supervisor first looks, and its stop would be graceful.
    real_stop = DriverProcess.stop

    def stop_hung(self, grace_s, limit_s):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGSTOP)
        return real_stop(self, grace_s, limit_s)

    monkeypatch.setattr(DriverProcess, "stop", stop_hung)
    # The deadline counts from the last progress: this run is taken to make none, so it ends at 3 s.
    monkeypatch.setattr(supervisor.Run, "_progress_state", lambda self, progress: ())
    result = run_scenario(make_config(events=6000, rate=1000, deadline_s=3.0, commit="after-output"))
    final = [e for e in read_events(result.run_dir) if e["type"] == "final-stop"]
    assert ([e["how"] for e in final] == ["killed-after-timeout"]
            and result.report["final_stop"] == "killed-after-timeout")
    a = result.audit
    assert not result.drained and a.unseen > 0 and a.lost == 0, a.counts()
    assert a.acked == a.exactly_once + a.duplicated + a.unseen
    assert_all_gone(run_pids(result.run_dir))


@pytest.mark.parametrize("faults, rate, says", [
    ("driver-crash@at=0.05s", 1000, "came before the first batch was done: this run shows no replay"),
    ("driver-crash@batch=400", 1000, "never fired"),
    ("driver-crash@at=20s", 0, "came after the stream had ended, with nothing left to replay"),
    ("driver-crash@batch=2,ack-loss@at=0.01s", 1_000_000, "events/s of the 1e+06/s asked"),
], ids=["crash-before-output", "batch-never-reached", "stream-ended-first", "producer-behind"])
def test_a_run_that_could_not_show_its_lesson_says_so(tmp_path, faults, rate, says):
    """Each state of lab.audit.shown made for real: the report, `lab run`'s table and the verdict say it."""
    from lab.audit.predictions import Prediction, judge, measured_guarantee

    env = clean_env(LAB_RUNS_DIR=str(tmp_path))
    p = subprocess.run(lab_cmd("run", "--pipeline", "plain", "--events", "600", "--rate", str(rate), "--faults",
                               faults),
                       capture_output=True, text=True, env=env, timeout=180)
    assert p.returncode == 0, p.stderr
    table = p.stdout  # lab run's table, as a user reads it; the report from the run directory it names
    run_dir = re.search(r"^  run directory +(\S+)$", table, re.M).group(1)
    report = json.loads((Path(run_dir) / "report.json").read_text())
    lines = report["could_not_show"] + report["cautions"] + [
        f"the planned {f['kind']} never fired ({f['reason']})" for f in report["faults_not_applied"]]
    assert [line for line in lines if says in line], lines
    row = "fault not applied" if says == "never fired" else says
    assert row in table, table
    v = judge(Prediction("x", "at-least-once", "buttons", 0.0), report, measured_guarantee)
    if report["could_not_show"] or report["faults_not_applied"]:
        assert v.right is None and v.not_judged, v
    else:  # only a caution: judged, the caution beside the counts
        assert v.right is not None and "caution: the producer sent" in v.detail, v


def test_a_sink_that_cannot_be_reached_fails_in_one_line(tmp_path):
    """A PostgreSQL sink at an address that does not answer: one line naming it, within 10 s, nothing left running."""
    url = "postgresql://lab@192.0.2.1:5432/lab"  # TEST-NET-1: nothing answers there
    env = clean_env(LAB_RUNS_DIR=str(tmp_path), LAB_SINK_URL=url)
    started = time.monotonic()
    p = subprocess.run(lab_cmd("run", "--pipeline", "plain", "--events", "300", "--rate", "300"),
                       capture_output=True, text=True, env=env, timeout=120)
    took = time.monotonic() - started
    message = p.stderr.strip()
    assert p.returncode != 0 and "\n" not in message and f"cannot connect to LAB_SINK_URL={url!r}" in message, p.stderr
    assert took < 10, f"{took:.1f} s to say the sink cannot be reached"
    for run_dir in (d for d in tmp_path.iterdir() if (d / "events.jsonl").is_file()):
        assert_all_gone(run_pids(run_dir))
