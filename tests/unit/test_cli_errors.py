"""Bad input: one line naming the value and the choices, non-zero exit, within 10 s."""

import socket
import subprocess
import time

import pytest

from tests.conftest import clean_env, lab_cmd


def run_lab(*args, env=None, timeout=10):
    t = time.monotonic()
    p = subprocess.run(lab_cmd(*args), capture_output=True, text=True, timeout=timeout, env=env or clean_env())
    return p, time.monotonic() - t


@pytest.mark.parametrize(
    "args, words",
    [
        (["run", "--pipeline", "heron"], ["'heron'", "plain", "storm"]),
        (["run", "--sink", "upsert"], ["'upsert'", "append", "idempotent", "transactional"]),
        (["run", "--faults", "driver-crush@at=1s"], ["'driver-crush'", "driver-crash"]),
        (["run", "--faults", "driver-crash@sometime"], ["'sometime'", "at=<seconds>s"]),
        (["run", "--faults", "driver-crash@batch=2:middle"], ["'middle'", "mid-output"]),
        (["run", "--acks", "2"], ["'2'", "all"]),
        # a point the run's settings make unreachable: refused before anything starts, never restarted
        (["run", "--pipeline", "receiver", "--faults", "driver-crash@batch=2:after-wal-before-ack", "--wal", "off"],
         ["after-wal-before-ack", "--wal on --ack stored", "--wal off"]),
        (["run", "--pipeline", "direct", "--faults", "executor-crash@at=2s"],
         ["executor-crash", "local[2]", "local-cluster"]),
        (["run", "--master", "spark://nowhere:7077", "--pipeline", "direct"],
         ["spark://nowhere:7077", "lab cluster start"]),
        (["run", "--master", "local[0]"], ["local[0]", "local[N]"]),
    ],
)
def test_bad_values(args, words, tmp_path):
    p, took = run_lab(*args, env=clean_env(LAB_RUNS_DIR=str(tmp_path)))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    for w in words:
        assert w in lines[0]
    assert took < 10
    assert not (tmp_path / "broker.json").exists()
    assert not list(tmp_path.iterdir()), "nothing may start (no run directory) for bad input"


def test_unwritable_runs_dir(tmp_path):
    p, took = run_lab("run", env=clean_env(LAB_RUNS_DIR="/proc/forbidden"))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and took < 10 and len(lines) == 1, p.stderr
    assert "/proc/forbidden" in lines[0] and "LAB_RUNS_DIR" in lines[0]


def test_unreachable_kafka_bootstrap(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    p, took = run_lab("run", env=clean_env(LAB_RUNS_DIR=str(tmp_path), LAB_KAFKA_BOOTSTRAP=f"127.0.0.1:{port}"))
    assert p.returncode == 2 and took < 10
    assert f"LAB_KAFKA_BOOTSTRAP='127.0.0.1:{port}'" in p.stderr and "unset LAB_KAFKA_BOOTSTRAP" in p.stderr


def test_occupied_port(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p, took = run_lab("broker", "start", "--port", str(port), env=clean_env(LAB_RUNS_DIR=str(tmp_path)))
    assert p.returncode == 2 and took < 10
    assert f"port {port}" in p.stderr and "already in use" in p.stderr


def test_missing_java_is_reported_with_the_install_command(tmp_path):
    p, took = run_lab("doctor", env=clean_env(LAB_RUNS_DIR=str(tmp_path), LAB_JAVA_HOME=str(tmp_path / "no-jdk")),
                      timeout=30)
    assert p.returncode == 1
    java_line = next(l for l in p.stdout.splitlines() if " java " in l)
    assert java_line.startswith("FAIL") and "no-jdk" in java_line
    assert "fix:" in p.stdout and ("openjdk" in p.stdout or "java" in p.stdout.split("fix:")[1])
