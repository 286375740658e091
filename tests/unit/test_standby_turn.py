"""A standby driver's turn (lab.pipelines.driver.DriverContext.await_turn), without a JVM: it waits, then reads the run
as it is."""

import json
import threading
import time

from lab import events as ev
from lab.config import make_config
from lab.events import EventLog, read_events
from lab.pipelines.driver import DriverContext


def make_run(tmp_path, faults: str):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(make_config(pipeline="structured", events=100, faults=faults).to_json())
    (run_dir / "broker.json").write_text(json.dumps({"bootstrap": "127.0.0.1:1"}))
    return run_dir


def test_a_standby_waits_for_its_file_then_says_ready_with_the_faults_and_broker_of_that_moment(runs_dir, tmp_path,
                                                                                             monkeypatch):
    run_dir = make_run(tmp_path, "driver-crash@batch=1:mid-output,driver-crash@batch=3:mid-output")
    go = run_dir / "driver-2.go"
    monkeypatch.setenv("LAB_DRIVER_STANDBY", str(go))
    monkeypatch.setenv("LAB_DRIVER_ATTEMPT", "2")
    ctx = DriverContext(run_dir)
    assert ctx.pending == [] and ctx.bootstrap is None, "a standby reads the run's state at its turn, not before"
    turn = threading.Thread(target=ctx.await_turn)
    turn.start()
    time.sleep(0.3)
    assert turn.is_alive(), "a standby went on before its turn"
    # While it waited, the driver it replaces reached the first crash, and the broker moved.
    EventLog(run_dir, "driver").write(ev.FAULT_POINT, index=0, kind="driver-crash", point="mid-output", batch=1)
    (run_dir / "broker.json").write_text(json.dumps({"bootstrap": "127.0.0.1:2"}))
    assert not [e for e in read_events(run_dir) if e["type"] == ev.DRIVER_READY]
    go.touch()
    turn.join(5)
    assert not turn.is_alive()
    assert [f.batch for f in ctx.pending] == [3], "a crash the previous driver reached would be planned again"
    assert ctx.bootstrap == "127.0.0.1:2"
    timeline = read_events(run_dir)
    assert [e["attempt"] for e in timeline if e["type"] == ev.DRIVER_READY] == [2]
    assert [e["phase"] for e in timeline if e["type"] == ev.DRIVER_PHASE] == ["standby", "turn"]


def test_a_driver_started_now_does_not_wait(runs_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_DRIVER_STANDBY", raising=False)
    ctx = DriverContext(make_run(tmp_path, "driver-crash@batch=1:mid-output"))
    assert [f.batch for f in ctx.pending] == [1] and ctx.bootstrap == "127.0.0.1:1"
    began = time.monotonic()
    ctx.await_turn()
    assert time.monotonic() - began < 0.1
    assert not read_events(ctx.run_dir)
