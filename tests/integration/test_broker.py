"""``lab broker`` and the embedded broker's start, with real clients (Apache Kafka behind the lab's proxy)."""

import json
import subprocess
import time

import pytest

from lab.broker import embedded as broker
from lab.host import processes
from lab.kafka import tools as kafka_tools
from tests.conftest import clean_env, lab_cmd
from tests.integration.conftest import assert_all_gone

# Each test starts its own broker: through the CLI, or start_embedded.
pytestmark = [pytest.mark.integration, pytest.mark.own_broker]


def test_cli_broker_start_status_stop_leaves_nothing(tmp_path):
    env = clean_env(LAB_RUNS_DIR=str(tmp_path))
    out = subprocess.run(lab_cmd("broker", "start"), capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    info = json.loads((tmp_path / "broker.json").read_text())
    assert processes.pid_alive(info["broker_pid"]) and processes.pid_alive(info["proxy_pid"])  # outlives the CLI
    st = subprocess.run(lab_cmd("broker", "status"), capture_output=True, text=True, env=env, timeout=30)
    assert st.returncode == 0 and info["bootstrap"] in st.stdout
    stop = subprocess.run(lab_cmd("broker", "stop"), capture_output=True, text=True, env=env, timeout=30)
    assert stop.returncode == 0 and "stopped" in stop.stdout
    assert_all_gone([info["broker_pid"], info["proxy_pid"]])
    st = subprocess.run(lab_cmd("broker", "status"), capture_output=True, text=True, env=env, timeout=30)
    assert st.returncode == 1 and "no broker" in st.stdout


def test_runs_sharing_a_started_broker_do_not_see_each_other(tmp_path):
    env = clean_env(LAB_RUNS_DIR=str(tmp_path))
    assert subprocess.run(lab_cmd("broker", "start"), env=env, capture_output=True, timeout=30).returncode == 0
    info = json.loads((tmp_path / "broker.json").read_text())
    try:
        reports = []
        for _ in range(2):
            p = subprocess.run(lab_cmd("run", "--events", "500", "--rate", "0", "--json"), env=env,
                               capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, p.stderr
            reports.append(json.loads(p.stdout.strip().splitlines()[-1]))
        for r in reports:
            assert (r["acked"], r["exactly_once"], r["unexpected"], r["topic_records"]) == (500, 500, 0, 500)
        assert processes.pid_alive(info["broker_pid"])  # the runs reused it and left it running
    finally:
        subprocess.run(lab_cmd("broker", "stop"), env=env, capture_output=True, timeout=30)
    assert_all_gone([info["broker_pid"], info["proxy_pid"]])


def _children(needle: str) -> list[int]:
    import psutil

    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if needle in " ".join(p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def _produce_and_consume_one(bootstrap: str, value: bytes) -> None:
    from kafka import KafkaProducer, TopicPartition

    kafka_tools.create_topic(bootstrap, "cycle", 1)
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    md = p.send("cycle", value).get(timeout=10)
    p.close()
    c = kafka_tools.consumer(bootstrap)
    tp = TopicPartition("cycle", 0)
    c.assign([tp])
    c.seek(tp, md.offset)
    got = []
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        got = [r.value for r in c.poll(timeout_ms=200).get(tp, [])]
    c.close()
    assert got == [value]


def test_a_busy_asked_for_port_is_a_clear_error_and_omitting_it_works(tmp_path):
    import socket

    from lab.errors import LabError

    # 9092 is Kafka's default port; when something else already holds it, it is busy all the same.
    held = socket.socket()
    try:
        try:
            held.bind(("127.0.0.1", 9092))
            held.listen()
        except OSError:
            pass
        before = (_children("lab.broker.proxy"), _children("kafka.Kafka"))
        with pytest.raises(LabError) as e:
            broker.start_embedded(tmp_path / "logs", port=9092)
        msg = str(e.value)
        assert "\n" not in msg and "port 9092" in msg and "already in use" in msg
        assert (_children("lab.broker.proxy"), _children("kafka.Kafka")) == before  # nothing left of the failed start
        info = broker.start_embedded(tmp_path / "logs")  # the same busy port around, the OS chooses another
        try:
            assert info.proxy_port != 9092
            _produce_and_consume_one(info.bootstrap, b"busy-9092")
        finally:
            broker.stop_embedded(info)
        assert_all_gone([info.broker_pid, info.proxy_pid])
    finally:
        held.close()
