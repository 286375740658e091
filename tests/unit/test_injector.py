"""The fault injector's protocol with fake callbacks: triggers, deferral, driver-side faults."""

from types import SimpleNamespace

import pytest

from lab.config import make_config
from lab.errors import LabError
from lab.run.injector import FaultInjector


class Timeline:
    def __init__(self):
        self.lines = []

    def write(self, type_, **fields):
        self.lines.append({"type": type_, **fields})
        return self.lines[-1]

    def of(self, type_):
        return [e for e in self.lines if e["type"] == type_]


class Driver:
    """A stand-in for the supervisor's side: a driver that is up or not, and kills counted."""

    def __init__(self):
        self.up, self.pid, self.kills, self.now = True, 100, [], 0.0

    def kill(self):
        self.kills.append(self.pid)
        self.up = False
        return self.pid


def make(faults, pipeline="plain", **extra):
    cfg = make_config(pipeline=pipeline, faults=faults, **extra)
    timeline, driver = Timeline(), Driver()
    inj = FaultInjector(cfg, timeline, controls(kill_driver=driver.kill, driver_up=lambda: driver.up),
                        elapsed=lambda: driver.now)
    return inj, timeline, driver


def controls(**hands):
    """A stand-in for the supervisor's :class:`lab.run.controls.RunControls`: no proxy, and the hands given."""
    return SimpleNamespace(**{"control_host": "127.0.0.1", "client_controls": (), "replication_controls": (),
                              "driver_up": lambda: True, "kill_driver": lambda: None, **hands})


def test_a_crash_due_while_no_driver_is_up_waits_for_the_next_ready_driver(monkeypatch):
    monkeypatch.delenv("LAB_KAFKA_BOOTSTRAP", raising=False)
    inj, timeline, driver = make("driver-crash@at=2.2s,driver-crash@at=3.1s")
    driver.now = 2.3
    inj.tick()
    assert driver.kills == [100] and inj.busy
    driver.now = 3.2
    inj.tick()  # the restarted driver is not ready yet
    assert driver.kills == [100] and [e["index"] for e in timeline.of("fault-deferred")] == [1]
    driver.up, driver.pid = True, 101
    inj.on_event({"type": "driver-ready", "attempt": 2})
    assert driver.kills == [100, 101] and not inj.busy
    fired = timeline.of("fault")
    assert [e["pid"] for e in fired] == [100, 101] and "deferred_s" in fired[1]


def test_batch_and_point_triggers(monkeypatch):
    monkeypatch.delenv("LAB_KAFKA_BOOTSTRAP", raising=False)
    inj, timeline, driver = make("driver-crash@batch=2,driver-crash@batch=4:mid-output", commit="after-output")
    inj.on_event({"type": "batch-start", "batch": 1})
    assert driver.kills == []
    inj.on_event({"type": "batch-start", "batch": 2})
    assert driver.kills == [100]
    driver.up = True
    inj.on_event({"type": "batch-start", "batch": 4})  # a point fault waits for its point, not the batch start
    assert driver.kills == [100]
    inj.on_event({"type": "fault-point", "index": 1, "batch": 4})
    assert driver.kills == [100, 100] and not inj.busy


def test_an_isr_trigger_fires_on_partition_0_once_its_isr_has_shrunk(monkeypatch):
    monkeypatch.delenv("LAB_BROKER_NODES", raising=False)
    cfg = make_config(pipeline="plain", nodes=3, faults="leader-crash@isr=1:for=2s")
    timeline, kills = Timeline(), []
    inj = FaultInjector(cfg, timeline, controls(kill_leader=lambda: kills.append(2)
                                                or {"node": 2, "pid": 900, "leads": [0]}),
                        elapsed=lambda: 4.2)
    state = {"type": "partition-state", "partition": 0, "leader": 2, "replicas": [1, 2, 3], "epoch": 0}
    inj.tick()
    inj.on_event({**state, "isr": [1, 2, 3]})
    inj.on_event({**state, "isr": [2, 3]})
    inj.on_event({**state, "partition": 1, "isr": [2]})  # another partition's ISR
    inj.on_event({**state, "leader": None, "isr": [2]})  # no leader to kill
    inj.on_event({**state, "isr": []})  # no ISR reported
    assert kills == [] and inj.busy
    inj.on_event({**state, "isr": [2]})
    fired = timeline.of("fault")
    assert kills == [2] and fired[0]["isr"] == [2] and fired[0]["isr_at_most"] == 1 and fired[0]["pid"] == 900
    assert fired[0]["elapsed_s"] == 4.2
    assert 2 in inj.node_restarts  # restarted for=2s later
    inj.on_event({**state, "isr": [1]})
    assert kills == [2]  # once


def test_an_output_trigger_fires_once_the_output_topic_holds_its_records(monkeypatch):
    monkeypatch.delenv("LAB_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.setattr("lab.run.injector.OUTPUT_POLL_S", 0.0)
    cfg = make_config(pipeline="structured", sink="topic", events=3000, faults="driver-crash@output=1200")
    timeline, driver, records = Timeline(), Driver(), [0]
    inj = FaultInjector(cfg, timeline, controls(kill_driver=driver.kill, output_records=lambda: records[0]),
                        elapsed=lambda: 9.5)
    for n in (0, 400, 1199):  # a slow start: no output for long, then some
        records[0] = n
        inj.tick()
    assert driver.kills == [] and inj.busy
    records[0] = 1250
    inj.tick()
    fired = timeline.of("fault")
    assert driver.kills == [100] and not inj.busy
    assert (fired[0]["output_records"], fired[0]["output_at_least"]) == (1250, 1200)


@pytest.mark.parametrize("params, says", [
    (dict(pipeline="structured", sink="append", faults="driver-crash@output=100"), "--sink append writes none"),
    (dict(pipeline="structured", sink="topic", events=3000, faults="driver-crash@output=3000"), "n < --events"),
    (dict(pipeline="structured", sink="topic", faults="broker-outage@output=10"), "applies to driver-crash"),
])
def test_an_output_trigger_the_run_cannot_reach_is_refused_before_it_starts(params, says):
    with pytest.raises(LabError, match=says):
        make_config(**params)


def test_a_fault_the_driver_carries_out_stops_being_pending(monkeypatch):
    monkeypatch.delenv("LAB_KAFKA_BOOTSTRAP", raising=False)
    inj, timeline, driver = make("task-failure@batch=2", pipeline="structured")
    inj.on_event({"type": "batch-start", "batch": 2})
    assert inj.busy and driver.kills == []  # the supervisor never carries out a driver's fault
    inj.on_event({"type": "fault", "source": "driver", "index": 0, "kind": "task-failure"})
    assert not inj.busy


def test_a_press_is_checked_against_the_catalogue(monkeypatch):
    monkeypatch.delenv("LAB_KAFKA_BOOTSTRAP", raising=False)
    inj, timeline, driver = make("")
    with pytest.raises(LabError, match="executor-crash"):
        inj.inject("executor-crash")
    with pytest.raises(LabError, match="unknown fault kind 'meteor'"):
        inj.inject("meteor")
    assert inj.inject("driver-crash")["pid"] == 100 and timeline.of("fault")[0]["by"] == "ui"


def test_a_consumer_crash_keeps_the_run_busy_until_a_consumer_carries_it_out(monkeypatch):
    monkeypatch.delenv("LAB_KAFKA_BOOTSTRAP", raising=False)
    inj, timeline, driver = make("consumer-crash@at=3s", pipeline="share")
    driver.now = 3.0
    inj.tick()
    assert timeline.of("fault") and inj.awaiting and inj.busy  # written at 3 s; no consumer had records yet
    inj.on_event({"type": "consumer-killed", "index": 7})  # another fault's kill (a press) settles nothing here
    assert inj.busy
    inj.on_event({"type": "consumer-killed", "index": 0, "held": [[0, 1, 1]]})
    assert not inj.awaiting and not inj.busy and driver.kills == []


def test_a_fault_the_output_fired_replays_as_the_same_trigger(tmp_path):
    import json

    from lab.faults.plan import parse_fault_plan, plan_from_events

    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps({"type": "fault", "kind": "driver-crash", "elapsed_s": 21.7, "output_records": 1250,
                               "output_at_least": 1200}) + "\n")
    assert plan_from_events(log) == "driver-crash@output=1200"
    assert parse_fault_plan("driver-crash@output=1200")[0].to_text() == "driver-crash@output=1200"
