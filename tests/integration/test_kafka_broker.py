"""Apache Kafka 4.4.0 as the embedded broker, behind the lab's proxy, with real clients and a real kill.

One broker serves the whole module (a JVM start is 3-5 s on 2 cores); the
tests run in file order and share it: produce and read, groups, transactions,
the proxy's cut, then SIGKILL and restart on the same data, then the stop.
Its jars come from :func:`lab.host.jars.ensure` (the cache; fetched once when
missing). Timings and memory are printed (``-s``) and bounded loosely.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from lab.broker import apache as kafka_broker, embedded as broker, proxy
from lab.errors import LabError
from lab.host import jars, processes
from lab.kafka import tools as kafka_tools
from tests.integration.conftest import aborted_then_committed, assert_all_gone

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300), pytest.mark.own_broker,
              # Its module-scoped runs are made once: its tests stay on one xdist worker.
              pytest.mark.xdist_group("test_kafka_broker")]

MEASURED: dict[str, float] = {}


class Running:
    """The module's broker; ``info`` changes when it is restarted, ``pids`` keeps every JVM started."""

    def __init__(self, info: broker.BrokerInfo) -> None:
        self.info = info
        self.pids = [info.broker_pid]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    jars.ensure(kafka_broker.KAFKA_JARS)  # fetched once per machine; timed apart from the broker's start
    log_dir = tmp_path_factory.mktemp("kafka") / "logs"
    t = time.monotonic()
    info = broker.start_embedded(log_dir)
    MEASURED["start_s"] = time.monotonic() - t
    running = Running(info)
    try:
        yield running
    finally:
        broker.stop_embedded(running.info)  # a no-op when the last test stopped it
        assert_all_gone([*running.pids, info.proxy_pid], within_s=30)
        print("\nkafka broker measured:", json.dumps({k: round(v, 2) for k, v in MEASURED.items()}))


def _rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 1e6


def _produce(bootstrap: str, topic: str, values, **settings) -> list:
    """Send ``values`` and return each one's RecordMetadata (acknowledged: acks=all, idempotent)."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5, **settings)
    futures = [p.send(topic, value=v, key=v) for v in values]
    p.flush(timeout=30)
    p.close()
    return [f.get(timeout=1) for f in futures]


def _read_all(bootstrap: str, topic: str, partitions: int, **settings) -> dict[tuple[int, int], bytes]:
    """``{(partition, offset): value}`` of every record up to the end offsets, read through the proxy."""
    from kafka import TopicPartition

    ends = kafka_tools.end_offsets(bootstrap, topic, partitions, timeout_s=60)  # also just after a restart
    c = kafka_tools.consumer(bootstrap, **settings)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = {}
    deadline = time.monotonic() + 30
    while any(c.position(tp) < ends[tp.partition] for tp in tps) and time.monotonic() < deadline:
        for tp, records in c.poll(timeout_ms=200).items():
            got.update({(tp.partition, r.offset): r.value for r in records})
    c.close()
    return got


def test_kafka_starts_behind_the_proxy(kafka):
    info = kafka.info
    assert info.product == "apache-kafka" and info.version == "4.4.0" and not info.external
    assert info.bootstrap == f"127.0.0.1:{info.proxy_port}"
    # three listeners of its own (clients, inter-broker, controller), each on a port the JVM bound
    listening = processes.listening_ports(info.broker_pid)
    assert len(listening) == 3 and info.broker_port in listening
    assert proxy.control(info.control_port, {"cmd": "status"})["upstream"] == f"127.0.0.1:{info.broker_port}"
    props = (Path(info.log_dir) / "server.properties").read_text()
    assert f"advertised.listeners=PLAINTEXT://127.0.0.1:{info.proxy_port}," in props
    assert (Path(info.log_dir) / "kafka-data" / "meta.properties").exists()
    MEASURED["rss_after_start_mb"] = _rss_mb(info.broker_pid)
    assert MEASURED["start_s"] < 30, f"start took {MEASURED['start_s']:.1f} s"


def test_its_data_directory_is_the_formatted_template_with_a_cluster_id_of_its_own(kafka):
    from lab.broker import template as kafka_template

    data = Path(kafka.info.log_dir) / "kafka-data"
    template = kafka_template.template_dir(jars.jar_set(kafka_broker.KAFKA_JARS).version,
                                           kafka_broker.properties(Path("<data>"), 0))
    assert "Formatting" not in (Path(kafka.info.log_dir) / "kafka.log").read_text()  # no StorageTool JVM of its own
    meta, template_meta = (d / "meta.properties" for d in (data, template))
    ids = dict(line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line)
    template_ids = dict(line.split("=", 1) for line in template_meta.read_text().splitlines() if "=" in line)
    assert ids["cluster.id"] != template_ids["cluster.id"] and ids["directory.id"] == template_ids["directory.id"]
    voters = "__cluster_metadata-0/00000000000000000000-0000000000.checkpoint"
    assert (data / voters).read_bytes() == (template / voters).read_bytes()


def test_lab_kafka_format_each_formats_with_kafka_s_storage_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_KAFKA_FORMAT", "each")
    info = broker.start_embedded(tmp_path / "logs")
    try:
        assert "Formatting dynamic metadata voter directory" in (tmp_path / "logs" / "kafka.log").read_text()
        kafka_tools.create_topic(info.bootstrap, "formatted.each", 2)
        assert kafka_tools.partition_count(info.bootstrap, "formatted.each") == 2
    finally:
        broker.stop_embedded(info)
    assert_all_gone([info.broker_pid, info.proxy_pid])


def test_idempotent_produce_and_consume_through_the_proxy(kafka):
    bootstrap = kafka.info.bootstrap
    kafka_tools.create_topic(bootstrap, "events", 3)
    values = [f"e-{i}".encode() for i in range(3000)]
    t = time.monotonic()
    acked = _produce(bootstrap, "events", values)
    MEASURED["produce_3000_s"] = time.monotonic() - t
    assert all(md.offset >= 0 for md in acked)  # Kafka answers every acknowledgement with its offset
    got = _read_all(bootstrap, "events", 3)
    assert sorted(got.values()) == sorted(values)
    assert {(md.partition, md.offset) for md in acked} == set(got)
    # ListOffsets(latest) is the log end
    assert sum(kafka_tools.end_offsets(bootstrap, "events", 3).values()) == 3000
    assert proxy.control(kafka.info.control_port, {"cmd": "status"})["accepted"] >= 3  # clients went through it


def test_a_consumer_group_joins_and_commits(kafka):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    bootstrap = kafka.info.bootstrap
    t = time.monotonic()
    c = KafkaConsumer("events", bootstrap_servers=bootstrap, group_id="lab-test-group", enable_auto_commit=False,
                      auto_offset_reset="earliest", request_timeout_ms=15000, session_timeout_ms=6000,
                      heartbeat_interval_ms=1000)
    got = 0
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        got += sum(len(v) for v in c.poll(timeout_ms=200).values())
    MEASURED["group_join_s"] = time.monotonic() - t
    assert c.assignment() == {TopicPartition("events", p) for p in range(3)}
    c.commit({TopicPartition("events", p): OffsetAndMetadata(100 + p, "", -1) for p in range(3)})
    c.close()
    assert MEASURED["group_join_s"] < 15
    reader = kafka_tools.consumer(bootstrap, group_id="lab-test-group")  # reads the group's offsets, joins nothing
    try:
        assert {p: reader.committed(TopicPartition("events", p)) for p in range(3)} == {0: 100, 1: 101, 2: 102}
    finally:
        reader.close()


def test_read_committed_hides_an_aborted_transaction(kafka):
    """``read_committed`` drops the aborted half; ``read_uncommitted`` reads it too."""
    read = aborted_then_committed(kafka.info.bootstrap)
    assert len(read["read_uncommitted"]) == 20
    assert read["read_committed"] == [f"True-{i}" for i in range(10)]


def test_the_proxy_cut_is_an_outage_kafka_clients_recover_from(kafka):
    from kafka import KafkaProducer

    bootstrap, control = kafka.info.bootstrap, kafka.info.control_port
    kafka_tools.create_topic(bootstrap, "cut", 1)
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=0,
                      reconnect_backoff_ms=100, reconnect_backoff_max_ms=500, request_timeout_ms=10000)
    p.send("cut", b"before").get(timeout=10)
    before = proxy.control(control, {"cmd": "status"})
    assert proxy.control(control, {"cmd": "cut", "seconds": 3})["cut_for_s"] > 2
    t = time.monotonic()
    md = p.send("cut", b"during").get(timeout=30)
    waited = time.monotonic() - t
    p.close()
    after = proxy.control(control, {"cmd": "status"})
    assert waited >= 2.0, f"the send completed {waited:.2f} s into a 3 s cut"
    assert after["refused"] > before["refused"]  # reconnects were refused while cut
    assert md.offset == 1
    got = _read_all(bootstrap, "cut", 1)
    assert list(got.values()) == [b"before", b"during"]  # the broker kept its data, nothing written twice


def test_ack_loss_makes_a_producer_without_idempotence_write_twice(kafka):
    from kafka import KafkaProducer, TopicPartition

    bootstrap, control = kafka.info.bootstrap, kafka.info.control_port
    kafka_tools.create_topic(bootstrap, "dup", 1)
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=5, enable_idempotence=False,
                      request_timeout_ms=1000, max_in_flight_requests_per_connection=1, linger_ms=0)
    p.send("dup", b"warm-up").get(timeout=10)
    dropped = proxy.control(control, {"cmd": "status"})["dropped_responses"]
    proxy.control(control, {"cmd": "ack_loss", "count": 1})
    md = p.send("dup", b"once").get(timeout=30)
    p.close()
    c = kafka_tools.consumer(bootstrap)
    tp = TopicPartition("dup", 0)
    c.assign([tp])
    values = []
    end = kafka_tools.end_offsets(bootstrap, "dup", 1)[0]
    deadline = time.monotonic() + 10
    while c.position(tp) < end and time.monotonic() < deadline:
        values += [r.value for r in c.poll(timeout_ms=200).get(tp, [])]
    c.close()
    assert proxy.control(control, {"cmd": "status"})["dropped_responses"] == dropped + 1
    assert values.count(b"once") == 2  # stored by the broker, response dropped, retried, stored again
    assert md.offset == 2  # the acknowledged copy is the second one


def test_sigkill_and_restart_keep_every_acknowledged_record(kafka):
    from kafka import KafkaProducer

    info = kafka.info
    bootstrap = info.bootstrap
    data = Path(info.log_dir) / "kafka-data"
    cluster_id = (data / "meta.properties").read_text()
    kafka_tools.create_topic(bootstrap, "crash", 3)
    values = [f"c-{i}".encode() for i in range(2000)]
    acked = _produce(bootstrap, "crash", values)
    MEASURED["rss_loaded_mb"] = _rss_mb(info.broker_pid)
    # a producer connected before the crash keeps its bootstrap: the proxy's port does not change
    survivor = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=0,
                             reconnect_backoff_ms=100, reconnect_backoff_max_ms=500, request_timeout_ms=10000)
    survivor.send("crash", b"before-crash", partition=0).get(timeout=10)

    os.killpg(info.broker_pid, signal.SIGKILL)
    assert_all_gone([info.broker_pid])
    t = time.monotonic()
    kafka.info = restarted = broker.restart_embedded_broker(info)
    MEASURED["restart_after_sigkill_s"] = time.monotonic() - t
    kafka.pids.append(restarted.broker_pid)

    assert restarted.bootstrap == bootstrap and restarted.proxy_pid == info.proxy_pid
    assert (restarted.broker_pid != info.broker_pid
            and restarted.broker_port in processes.listening_ports(restarted.broker_pid))
    assert proxy.control(info.control_port, {"cmd": "status"})["upstream"] == f"127.0.0.1:{restarted.broker_port}"
    assert (data / "meta.properties").read_text() == cluster_id  # the same data, never formatted again
    t = time.monotonic()
    md = survivor.send("crash", b"after-restart", partition=0).get(timeout=30)
    MEASURED["first_send_after_restart_s"] = time.monotonic() - t
    survivor.close()

    got = _read_all(bootstrap, "crash", 3)
    missing = [m for m, v in zip(acked, values) if got.get((m.partition, m.offset)) != v]
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[0]}"
    assert got[(md.partition, md.offset)] == b"after-restart"
    assert sorted(got.values()).count(b"before-crash") == 1
    # what the earlier tests wrote survived too: records, committed group offsets, the transaction's outcome
    assert len(_read_all(bootstrap, "events", 3)) == 3000
    assert len(_read_all(bootstrap, "tx", 1, isolation_level="read_committed")) == 10
    from kafka import TopicPartition

    reader = kafka_tools.consumer(bootstrap, group_id="lab-test-group")
    try:
        assert [reader.committed(TopicPartition("events", p)) for p in range(3)] == [100, 101, 102]
    finally:
        reader.close()
    assert MEASURED["restart_after_sigkill_s"] < 45


def test_restart_is_refused_for_an_external_kafka():
    info = broker.BrokerInfo(bootstrap="kafka:9092", external=True, product=None)
    with pytest.raises(LabError, match=r"only the embedded Apache Kafka broker can be restarted"):
        broker.restart_embedded_broker(info)


def test_stop_ends_the_broker_gracefully_and_leaves_no_process(kafka):
    info = kafka.info
    log = Path(info.log_dir) / "kafka.log"
    MEASURED["rss_at_stop_mb"] = _rss_mb(info.broker_pid)
    t = time.monotonic()
    broker.stop_embedded(info)
    MEASURED["stop_s"] = time.monotonic() - t
    assert_all_gone([*kafka.pids, info.proxy_pid])
    tail = log.read_text()[-100000:]  # SIGTERM sufficed: Kafka's shutdown hook ran to its end
    assert ("[BrokerServer id=1] shut down completed" in tail
            and "[RaftManager id=1] Graceful shutdown completed" in tail)
    assert MEASURED["stop_s"] < kafka_broker.KAFKA_STOP_GRACE_S


def test_a_broker_that_cannot_start_is_one_line_naming_its_log_and_leaves_nothing(tmp_path):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / "kafka-data").write_text("not a directory")  # taken as formatted; Kafka cannot use it
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    t = time.monotonic()
    with pytest.raises(LabError) as e:
        broker.start_embedded(log_dir)
    MEASURED["failed_start_s"] = time.monotonic() - t
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("Apache Kafka exited with status") and str(log_dir / "kafka.log") in msg
    assert "meta.properties" in msg  # Kafka's reason, not the last stack frame
    deadline = time.monotonic() + 10
    while {p.pid for p in psutil.Process().children(recursive=True)} - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not {p.pid for p in psutil.Process().children(recursive=True)} - before  # proxy and JVM gone


def test_old_broker_json_loads():
    old = {"bootstrap": "127.0.0.1:1", "external": False, "broker_port": 2, "proxy_port": 1, "control_port": 3,
           "broker_pid": 4, "proxy_pid": 5, "log_dir": "/x"}
    info = broker.BrokerInfo.from_dict(old)
    assert info.product == "apache-kafka" and info.version is None and info.detached is False
    assert broker.BrokerInfo.from_dict({**old, "future_field": 1}).broker_pid == 4


def test_cluster_ids_are_kafkas_form_and_never_read_as_an_option():
    import base64

    ids = [kafka_broker.cluster_id() for _ in range(3000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 22 and not i.startswith("-") and len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)


def test_listener_ports_are_read_from_the_log_pairs():
    log = """
00:44:40.144 [main] INFO kafka.network.DataPlaneAcceptor - Awaiting socket connections on 127.0.0.1:43277.
00:44:40.178 [main] INFO kafka.network.SocketServer - [SocketServer listenerType=CONTROLLER, nodeId=1] \
Created data-plane acceptor and processors for endpoint : ListenerName(CONTROLLER)
00:44:40.182 [main] INFO org.apache.kafka.metadata.ListenerInfo - CONTROLLER: resolved ephemeral port to 43277
00:44:41.096 [main] INFO kafka.network.DataPlaneAcceptor - Awaiting socket connections on 127.0.0.1:44725.
00:44:41.111 [main] INFO kafka.network.SocketServer - [SocketServer listenerType=BROKER, nodeId=1] \
Created data-plane acceptor and processors for endpoint : ListenerName(PLAINTEXT)
00:44:41.111 [main] INFO kafka.network.DataPlaneAcceptor - Awaiting socket connections on 127.0.0.1:41839.
00:44:41.113 [main] INFO kafka.network.SocketServer - [SocketServer listenerType=BROKER, nodeId=1] \
Created data-plane acceptor and processors for endpoint : ListenerName(BROKER)
"""
    assert kafka_broker.ports_from_log(log) == {"CONTROLLER": 43277, "PLAINTEXT": 44725, "BROKER": 41839}
