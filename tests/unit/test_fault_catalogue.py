"""One fault catalogue: every check comes from it, before any process starts; event types are defined once."""

import re

import pytest

from lab import events as ev
from lab.config import make_config
from lab.errors import LabError
from lab.faults.catalogue import COMMON_FAULTS, FAULTS, POINTS
from lab.faults.plan import parse_fault_plan
from lab.registry import PIPELINES
from tests.conftest import ROOT


def test_every_pipeline_has_faults_and_points_from_the_catalogue():
    for name, spec in PIPELINES.items():
        assert set(COMMON_FAULTS) <= set(spec.faults) <= set(FAULTS), name
        assert spec.faults == tuple(f for f in FAULTS if f in spec.faults), f"{name}: faults in catalogue order"
        assert spec.points and spec.points == tuple(p for p in POINTS if p in spec.points), name
    assert all(f.by in ("supervisor", "proxy", "producer", "timeline", "driver") for f in FAULTS.values())
    assert all(any(p in spec.points for spec in PIPELINES.values()) for p in POINTS), "a point no pipeline stops at"


@pytest.mark.parametrize("params, words", [
    (dict(pipeline="receiver", wal="off", faults="driver-crash@batch=2:after-wal-before-ack"),
     ["--wal on --ack stored"]),
    (dict(pipeline="receiver", ack="auto", faults="driver-crash@batch=2:after-wal-before-ack"), ["--ack auto"]),
    (dict(pipeline="plain", faults="driver-crash@batch=2:after-offset-log"), ["after-offset-log", "valid points"]),
    (dict(pipeline="plain", faults="task-failure@batch=2"), ["task-failure", "valid for it"]),
    (dict(pipeline="direct", faults="executor-crash@at=1s"), ["local-cluster"]),
])
def test_the_catalogue_refuses_what_a_run_cannot_do(params, words, monkeypatch):
    monkeypatch.delenv("LAB_KAFKA_BOOTSTRAP", raising=False)
    with pytest.raises(LabError) as e:
        make_config(**params)
    assert all(w in str(e.value) for w in words) and "\n" not in str(e.value)


def test_broker_crash_needs_the_embedded_broker(monkeypatch):
    monkeypatch.delenv("LAB_KAFKA_BOOTSTRAP", raising=False)
    with pytest.raises(LabError, match="unset LAB_KAFKA_BOOTSTRAP"):
        make_config(kafka_bootstrap="127.0.0.1:9092", faults="broker-crash@at=3s:for=3s")
    assert make_config(faults="broker-crash@at=3s:for=3s").fault_plan[0].duration_s == 3.0
    with pytest.raises(LabError, match="--transactional on"):
        make_config(faults="txn-abort@at=2s:count=3")
    assert make_config(transactional=True, faults="txn-abort@at=2s:count=3").fault_plan[0].count == 3


def test_proxy_faults_need_the_proxy(monkeypatch):
    monkeypatch.setenv("LAB_KAFKA_BOOTSTRAP", "127.0.0.1:9")
    monkeypatch.delenv("LAB_KAFKA_PROXY", raising=False)
    for kind in ("ack-loss@at=1s:count=2", "broker-outage@at=1s:for=1s"):
        with pytest.raises(LabError, match="LAB_KAFKA_BOOTSTRAP") as e:
            make_config(faults=kind)
        assert "LAB_KAFKA_PROXY" in str(e.value) and "\n" not in str(e.value)


def test_proxy_faults_with_a_kafka_of_ones_own_and_its_proxy(monkeypatch):
    monkeypatch.setenv("LAB_KAFKA_BOOTSTRAP", "kafka-proxy:19092")
    monkeypatch.setenv("LAB_KAFKA_PROXY", "kafka-proxy:19093")
    for kind in ("ack-loss@at=1s:count=2", "broker-outage@at=1s:for=1s"):
        assert make_config(faults=kind).fault_plan[0].kind == kind.partition("@")[0]
    # The proxy does not make the stack's Kafka the lab's to kill.
    with pytest.raises(LabError, match="broker-crash.*unset LAB_KAFKA_BOOTSTRAP"):
        make_config(faults="broker-crash@at=3s:for=3s")
    monkeypatch.delenv("LAB_KAFKA_BOOTSTRAP")
    assert make_config(faults="ack-loss@at=1s:count=2").cluster.kafka_proxy is None  # the embedded broker's own proxy


def test_what_the_catalogue_allows_passes(monkeypatch):
    monkeypatch.delenv("LAB_KAFKA_BOOTSTRAP", raising=False)
    cfg = make_config(pipeline="receiver", faults="driver-crash@batch=2:after-wal-before-ack")
    executors = make_config(pipeline="direct", spark_master="local-cluster[1,1,1024]")
    for fault in parse_fault_plan("executor-crash@batch=2"):
        executors.check_fault(fault)
    assert cfg.fault_plan[0].point == "after-wal-before-ack"


def test_each_event_type_name_is_written_once_in_lab():
    """``grep`` finds each event type's name once in lab/: in lab/events.py (a report's dict key of the same word
    aside)."""
    names = {v for k, v in vars(ev).items() if k.isupper() and isinstance(v, str)
             and k not in ("EVENTS_FILE", "PROGRESS_FILE")}
    assert len(names) > 30
    sources = {p: p.read_text() for p in (ROOT / "lab").rglob("*.py")}
    for name in names:
        where = [(p.name, n) for p, text in sources.items()
                 for n in [len(re.findall(f'"{re.escape(name)}"(?!:)', text))] if n]
        assert where == [("events.py", 1)], f"event type {name!r} is spelled out in {where}"


def test_every_fault_the_supervisor_side_carries_out_has_one_effect():
    from lab.faults.catalogue import FAULTS
    from lab.run.effects import EFFECTS

    # and a driver fault with a button: the press's effect chooses what the driver acts on
    assert set(EFFECTS) == {kind for kind, f in FAULTS.items() if f.by != "driver" or f.button}
