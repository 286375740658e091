"""Which matrix rows run beside the others (lab.matrix.lane), and the lane's protocol with a fake runner."""

import threading
import time

import pytest

from lab.errors import LabError
from lab.matrix.brokers import SharedBrokers
from lab.matrix.grid import Scenario
from lab.matrix.lane import Lane, beside, split

CLUSTER_ROW = {"pipeline": "plain", "nodes": 3, "faults": "follower-lag@at=1s:for=10s,leader-crash@isr=1:for=2s"}


def row(name, **params):
    return Scenario(name=name, params=params, seed=1, expect="exactly-once")


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("LAB_BROKER_NODES", "LAB_CLUSTER_BESIDE"):
        monkeypatch.delenv(var, raising=False)


def test_cluster_rows_go_beside_once_the_relay_is_past_its_last_receiver_row():
    rows = [row("r1", pipeline="receiver"), row("c1", **CLUSTER_ROW), row("r2", pipeline="receiver"),
            row("s1", pipeline="structured"), row("b", pipeline="plain", faults="broker-crash@at=1s:for=1s"),
            row("c2", **CLUSTER_ROW)]
    relay, lane, start_at = split(rows, SharedBrokers())
    assert [s.name for s in relay] == ["r1", "r2", "s1", "b"] and [s.name for s in lane] == ["c1", "c2"]
    assert start_at == 2  # s1: the first relay row after r2
    assert split(rows[:3], SharedBrokers())[2] == 2  # the relay ends with a receiver row: after it
    assert split([rows[1], rows[3]], SharedBrokers())[2] == 0  # none: at once
    assert split(rows, None) == (rows, [], 0)  # no shared brokers (jobs > 1, an outside broker): no lane


def test_the_switch_is_on_unless_off_and_a_bad_value_names_the_choices():
    assert beside({}) is True and beside({"LAB_CLUSTER_BESIDE": "off"}) is False
    with pytest.raises(LabError, match="unknown LAB_CLUSTER_BESIDE 'sideways'; valid choices: off, on"):
        beside({"LAB_CLUSTER_BESIDE": "sideways"})


def test_the_lane_waits_for_go_runs_its_rows_in_order_and_hands_them_over():
    ran = []
    lane = Lane(["a", "b"], lambda s: ran.append(s) or {"name": s})
    time.sleep(0.1)
    assert ran == [] and lane.running and lane.done() == []
    lane.go()
    lane.join(5)
    assert ran == ["a", "b"] and not lane.running
    assert lane.done() == [("a", {"name": "a"}), ("b", {"name": "b"})] and lane.done() == []
    assert not Lane([], None).running  # nothing to run: no thread


def test_after_stop_no_row_starts_and_an_error_is_kept_for_the_main_thread():
    gate, ran = threading.Event(), []

    def run(s):
        ran.append(s)
        gate.wait(5)
        return {}

    lane = Lane(["a", "b"], run)
    lane.go()
    time.sleep(0.1)
    lane.stop()  # while "a" runs
    gate.set()
    lane.join(5)
    assert ran == ["a"] and not lane.running
    failing = Lane(["x"], lambda s: 1 / 0)
    failing.go()
    failing.join(5)
    assert isinstance(failing.error, ZeroDivisionError)
    with pytest.raises(ZeroDivisionError):
        failing.hand_over(lambda *row: None)  # at the relay's next look, not after the whole relay
    waiting = Lane(["a"], lambda s: ran.append("never"))
    waiting.stop()  # still waiting for go: it ends
    waiting.join(5)
    assert not waiting.running and "never" not in ran
