"""Kafka's replication guarantees on the lab's three-broker cluster (``--nodes 3``), no Spark.

One cluster for the module (``lab broker start --nodes 3``, each run its own
topic); each test is one run of the plain pipeline with a leader crash. The
topic audit (the final read) is checked against counts taken here with a
consumer of this file's own, not through the lab's reader.
"""

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from lab.broker import shared as shared_broker
from lab.config import make_config
from lab.events import read_events
from lab.host import processes
from lab.run.supervisor import run_scenario
from tests.integration.conftest import assert_all_gone, module_cluster

pytestmark = [pytest.mark.integration, pytest.mark.own_broker,
              # Its module-scoped runs are made once: its tests stay on one xdist worker.
              pytest.mark.xdist_group("test_replication")]

#: Followers held from 2 s to 10 s; the leader of partition 0 killed once its followers are out of the ISR
#: (they leave it 3 s after their fetches stop: notebook 07's plan, lab.lessons.exercises.CLUSTER_FAULTS) and
#: restarted 3 s later.
FAULTS = "follower-lag@at=2s:for=8s,leader-crash@isr=1:for=3s"


@pytest.fixture(scope="module")
def cluster_runs(tmp_path_factory):
    with module_cluster(tmp_path_factory) as path:
        yield path


def final_read(bootstrap: str, topic: str, partitions: int) -> dict[str, int]:
    """Each event id's copies in ``topic``, read here with a plain consumer from the beginning to the end."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                      isolation_level="read_uncommitted")
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    ends = c.end_offsets(tps)
    copies: dict[str, int] = {}
    deadline = time.monotonic() + 60
    while any(c.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=500).values():
            for r in records:
                eid = json.loads(r.value)["id"]
                copies[eid] = copies.get(eid, 0) + 1
    c.close()
    return copies


def acked_ids(run_dir) -> set[str]:
    db = sqlite3.connect(run_dir / "ledger.sqlite")
    return {eid for (eid,) in db.execute("SELECT event_id FROM sends WHERE status = 'acked'")}


def run_on_cluster(cluster_runs, **params):
    result = run_scenario(make_config(nodes=3, events=3000, rate=500, faults=FAULTS, runs_dir=str(cluster_runs),
                                      **params))
    events = read_events(result.run_dir)
    crash = [e for e in events if e["type"] == "fault" and e["kind"] == "leader-crash"]
    assert len(crash) == 1 and crash[0]["pid"] and 0 in crash[0]["leads"], crash
    leaders = [e["leader"] for e in events if e["type"] == "partition-state" and e["partition"] == 0]
    assert leaders[0] == crash[0]["node"] and leaders[-1] not in (None, crash[0]["node"]), \
        f"partition 0 failed over: {leaders}"
    assert any(e["type"] == "node-restart" and e["node"] == crash[0]["node"] for e in events)
    assert not processes.pid_alive(crash[0]["pid"])
    return result


def test_acks_1_with_unclean_election_loses_acknowledged_writes_counted_by_a_final_read(cluster_runs):
    result = run_on_cluster(cluster_runs, acks="1", idempotence=False, unclean="on")
    topic, cfg = result.report["topic"], result.config
    info = shared_broker.load_running(cluster_runs)
    missing = acked_ids(result.run_dir) - set(final_read(info.bootstrap, cfg.topic, cfg.partitions))
    assert topic["lost"] > 0 and topic["lost"] == len(missing), topic
    with open(result.run_dir / "topic_lost.csv") as f:
        assert {row["event_id"] for row in csv.DictReader(f)} == missing
    # Only the partitions the killed broker led lost anything: the others kept every acknowledged write.
    lead = set(
        next(e for e in read_events(result.run_dir) if e["type"] == "fault" and e["kind"] == "leader-crash")["leads"])
    db = sqlite3.connect(result.run_dir / "ledger.sqlite")
    partitions = {p for (p,) in db.execute(
        f"SELECT DISTINCT partition FROM sends WHERE event_id IN ({','.join('?' * len(missing))})", sorted(missing))}
    assert partitions <= lead


def test_no_broker_jvm_survives_an_interrupted_run_on_its_own_cluster(tmp_path):
    """SIGINT to ``lab run --nodes 3`` mid-run: the cluster it started (4 JVMs, 6 proxies) is gone."""
    proc = processes.spawn([sys.executable, "-m", "lab", "run", "--nodes", "3", "--events", "100000", "--rate", "500"],
                           log_path=tmp_path / "run.log", env={**os.environ, "LAB_RUNS_DIR": str(tmp_path)})
    deadline = time.monotonic() + 90
    broker_json = None
    while time.monotonic() < deadline and broker_json is None:
        found = [p for p in tmp_path.glob("*/broker.json")]
        if found and json.loads(found[0].read_text()).get("nodes"):
            broker_json = json.loads(found[0].read_text())
        time.sleep(0.2)
    assert broker_json, (tmp_path / "run.log").read_text()[-2000:]
    pids = [broker_json["controller_pid"], *(n[k] for n in broker_json["nodes"]
                                               for k in ("broker_pid", "proxy_pid", "replication_proxy_pid"))]
    assert all(processes.pid_alive(p) for p in pids)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        processes.stop_process(proc, 5)
        raise
    assert_all_gone(pids, within_s=20)
