"""Which shared broker a matrix row gets (lab.matrix.brokers), without starting one."""

import json

from lab.broker.embedded import BrokerInfo
from lab.matrix.brokers import SharedBrokers, row_nodes

SINGLE = BrokerInfo(bootstrap="127.0.0.1:1", product="apache-kafka", broker_pid=11, proxy_pid=12)
CLUSTER = BrokerInfo(bootstrap="127.0.0.1:2,127.0.0.1:3", product="apache-kafka", detached=True, controller_pid=21)


def test_a_row_gets_the_broker_of_its_node_count_unless_it_kills_it(monkeypatch):
    monkeypatch.delenv("LAB_BROKER_NODES", raising=False)
    shared = SharedBrokers(single=SINGLE, cluster=CLUSTER)
    assert shared.for_row({"pipeline": "plain"}) is SINGLE
    assert shared.for_row({"nodes": 3, "faults": "leader-crash@at=7s:for=3s"}) is CLUSTER
    assert shared.for_row({"faults": "broker-crash@at=2s:for=2s"}) is None
    assert SharedBrokers(single=SINGLE).for_row({"nodes": 3}) is None


def test_the_node_count_comes_from_the_row_else_the_environment(monkeypatch):
    monkeypatch.delenv("LAB_BROKER_NODES", raising=False)
    assert row_nodes({}) == 1 and row_nodes({"nodes": 3}) == 3
    monkeypatch.setenv("LAB_BROKER_NODES", "3")
    assert row_nodes({}) == 3 and row_nodes({"nodes": 1}) == 1


def test_recording_writes_the_rows_broker_or_removes_an_older_record(tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_BROKER_NODES", raising=False)
    shared = SharedBrokers(single=SINGLE, cluster=None)
    runs = tmp_path / "lab-runs"
    shared.record(runs, {"pipeline": "direct"})
    assert json.loads((runs / "broker.json").read_text())["broker_pid"] == 11
    shared.record(runs, {"faults": "broker-crash@at=2s:for=2s"})  # its own broker: an old record would mislead it
    assert not (runs / "broker.json").exists()


def test_a_broker_still_starting_is_waited_for_and_one_that_failed_stops_the_matrix_with_its_reason(tmp_path,
                                                                                                  monkeypatch):
    import threading

    import pytest

    from lab.errors import LabError
    from lab.matrix.brokers import _BrokerStart

    monkeypatch.delenv("LAB_BROKER_NODES", raising=False)
    starting = _BrokerStart(tmp_path, 1)  # never started: its outcome is set by hand, as run() would
    threading.Timer(0.1, lambda: (setattr(starting, "info", SINGLE), starting.ready.set())).start()
    assert SharedBrokers(starting_single=starting).for_row({"pipeline": "direct"}) is SINGLE

    failed = _BrokerStart(tmp_path, 1)
    failed.error = LabError("the broker did not start: port in use (see broker-logs/matrix/kafka.log)")
    failed.ready.set()
    with pytest.raises(LabError, match="port in use"):
        SharedBrokers(starting_single=failed).for_row({"pipeline": "direct"})


def test_a_deferred_cluster_starts_once_and_only_when_a_row_needs_it(tmp_path, monkeypatch):
    """start_cluster() starts the planned cluster's thread once (the lane calls it when it starts)."""
    from lab.matrix import brokers as matrix_brokers

    started = []

    class Start:
        def __init__(self, log_dir, nodes):
            self.args, self.error, self.info = (log_dir, nodes), None, CLUSTER

        def start(self):
            started.append(self.args)

    monkeypatch.setattr(matrix_brokers, "_BrokerStart", Start)
    shared = SharedBrokers(cluster_plan=(tmp_path, 3))
    shared.start_cluster()
    shared.start_cluster()
    assert started == [(tmp_path, 3)]
    SharedBrokers().start_cluster()  # no cluster row: nothing to start
    assert len(started) == 1
