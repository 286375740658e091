"""The cluster's pure parts: properties, partition states, the topic audit, replication settings (no JVM)."""

import pandas as pd
import pytest

from lab.audit.topic import LOST_COLUMNS, topic_audit_core
from lab.broker import cluster as kafka_cluster
from lab.config import make_config
from lab.errors import LabError
from lab.faults.plan import parse_fault_plan
from lab.kafka.replication import changes, partition_states


def props(text: str) -> dict:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_brokers_advertise_their_proxies_and_replicate_through_the_replication_proxy(tmp_path):
    p = props(kafka_cluster.broker_properties(2, tmp_path, 4001, 4002, 4100, 3))
    assert p["node.id"] == "2" and p["process.roles"] == "broker"
    assert p["listeners"] == "PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0"
    assert p["advertised.listeners"] == "PLAINTEXT://127.0.0.1:4001,BROKER://127.0.0.1:4002"
    assert p["inter.broker.listener.name"] == "BROKER"
    assert p["controller.quorum.bootstrap.servers"] == "127.0.0.1:4100"  # straight to the controller, no proxy
    assert p["default.replication.factor"] == p["offsets.topic.replication.factor"] == "3"
    c = props(kafka_cluster.controller_properties(tmp_path))
    assert c["process.roles"] == "controller" and c["unclean.leader.election.interval.ms"] == "1000"


def test_partition_states_and_their_changes():
    described = [{"name": "other", "partitions": []}, {"name": "t", "partitions": [
        {"partition_index": 1, "leader_id": -1, "leader_epoch": 3, "replica_nodes": [3, 1, 2], "isr_nodes": [2]},
        {"partition_index": 0, "leader_id": 2, "leader_epoch": 0, "replica_nodes": [1, 2, 3], "isr_nodes": [3, 2, 1]},
    ]}]
    now = partition_states(described, "t")
    assert now == {0: {"leader": 2, "isr": [1, 2, 3], "replicas": [1, 2, 3], "epoch": 0},
                   1: {"leader": None, "isr": [2], "replicas": [1, 2, 3], "epoch": 3}}
    assert [c["partition"] for c in changes({}, now)] == [0, 1]
    later = {**now, 0: {**now[0], "isr": [2]}}
    assert changes(now, later) == [{"partition": 0, "leader": 2, "isr": [2], "replicas": [1, 2, 3], "epoch": 0}]
    assert changes(later, later) == [] and partition_states(described, "missing") == {}


def sends(rows):
    df = pd.DataFrame(rows, columns=["event_id", "status"])
    df["seq"] = range(len(df))
    for col in LOST_COLUMNS:
        if col not in df:
            df[col] = 0
    return df


def test_topic_audit_classifies_each_send_by_its_copies_in_the_final_read():
    df = sends([("a", "acked"), ("b", "acked"), ("c", "acked"), ("d", "failed"), ("e", "failed"),
                ("f", "unknown"), ("g", "unknown"), ("h", "aborted")])
    audit, lost = topic_audit_core(df, {"a": 1, "b": 2, "e": 1, "g": 3, "z": 1})
    assert (audit.acked, audit.present_once, audit.duplicated, audit.lost) == (3, 1, 1, 1)
    assert (audit.failed_sends, audit.failed_in_topic, audit.unknown_sends, audit.unknown_in_topic) == (2, 1, 2, 1)
    assert audit.unexpected == 1 and audit.read == 8
    assert list(lost["event_id"]) == ["c"] and tuple(lost.columns) == LOST_COLUMNS


@pytest.mark.parametrize("params, says", [
    ({"nodes": 2}, "valid choices: 1, 3"),
    ({"min_insync": 2}, "need --nodes 3"),
    ({"unclean": "on"}, "need --nodes 3"),
    ({"nodes": 3, "min_insync": 4}, "valid: 1 to 3"),
    ({"nodes": 3, "unclean": "maybe"}, "valid choices: off, on"),
    ({"nodes": 3, "kafka_bootstrap": "127.0.0.1:9092"}, "unset LAB_KAFKA_BOOTSTRAP"),
])
def test_bad_replication_settings_are_one_line_errors(params, says, monkeypatch):
    monkeypatch.delenv("LAB_BROKER_NODES", raising=False)
    with pytest.raises(LabError, match=says.replace("(", r"\(")):
        make_config(**params)


def test_cluster_settings_reach_the_topic_and_the_report(monkeypatch):
    monkeypatch.setenv("LAB_BROKER_NODES", "3")
    cfg = make_config(acks="1", idempotence=False, min_insync=2, unclean="on")
    assert (cfg.cluster.nodes == 3
            and cfg.topic_configs == {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"})
    assert cfg.settings["replication_factor"] == 3 and cfg.settings["unclean"] == "on"
    monkeypatch.setenv("LAB_BROKER_NODES", "5")
    with pytest.raises(LabError, match="LAB_BROKER_NODES"):
        make_config()


def test_cluster_faults_need_a_cluster_and_round_trip(monkeypatch):
    monkeypatch.delenv("LAB_BROKER_NODES", raising=False)
    plan = "follower-lag@at=2s:for=8s,leader-crash@at=7s:for=3s"
    assert ",".join(f.to_text() for f in parse_fault_plan(plan)) == plan
    with pytest.raises(LabError, match="--nodes 3"):
        make_config(faults="leader-crash@at=3s")
    with pytest.raises(LabError, match="on a cluster use leader-crash"):
        make_config(nodes=3, faults="broker-crash@at=3s")
    cluster = make_config(nodes=3)
    for fault in parse_fault_plan(plan):
        cluster.check_fault(fault)


def test_an_isr_trigger_names_its_valid_range(monkeypatch):
    monkeypatch.delenv("LAB_BROKER_NODES", raising=False)
    plan = "follower-lag@at=1s:for=10s,leader-crash@isr=1:for=2s"
    assert ",".join(f.to_text() for f in parse_fault_plan(plan)) == plan
    assert make_config(nodes=3, faults=plan).fault_plan[1].isr == 1
    with pytest.raises(LabError, match=r"isr=3 must be below the replica count \(3\); valid: isr=1 to isr=2"):
        make_config(nodes=3, faults="leader-crash@isr=3")
    with pytest.raises(LabError, match="--nodes 3"):
        make_config(faults="leader-crash@isr=1")


def test_a_poll_that_loses_its_broker_is_empty_and_other_errors_still_raise():
    from kafka.errors import KafkaConnectionError, UnsupportedVersionError

    from lab.kafka.tools import poll_records

    class Consumer:
        def __init__(self, error):
            self.error = error

        def poll(self, timeout_ms, max_records):
            raise self.error

    assert poll_records(Consumer(KafkaConnectionError("socket disconnected")), 10) == []
    with pytest.raises(UnsupportedVersionError):
        poll_records(Consumer(UnsupportedVersionError()), 10)
