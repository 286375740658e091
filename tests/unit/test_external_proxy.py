"""A Kafka of one's own behind a lab proxy (``LAB_KAFKA_BOOTSTRAP`` + ``LAB_KAFKA_PROXY``): the docker-compose stack.

No broker and no JVM: the bootstrap is a plain listening socket (``check_reachable`` only
connects) and the proxy is ``python -m lab.broker.proxy`` in front of test_proxy's fake broker.
"""

import socket
from types import SimpleNamespace

import pytest

from lab.broker import embedded as broker, external as external_broker, proxy, shared as shared_broker
from lab.config import make_config
from lab.errors import LabError
from lab.host import processes
from lab.run.injector import FaultInjector
from tests.unit.test_injector import Driver, Timeline
from tests.unit.test_proxy import FakeBroker, start_proxy, wait_ready


@pytest.fixture
def stack(tmp_path):
    """``(bootstrap, control address)`` of a running proxy, the way compose names them (host:port)."""
    upstream = FakeBroker()
    p, ready = start_proxy(tmp_path, "--host", "127.0.0.1", "--upstream", f"127.0.0.1:{upstream.port}")
    try:
        info = wait_ready(p, ready)
        yield f"127.0.0.1:{info['listen']}", f"127.0.0.1:{info['control']}"
    finally:
        processes.stop_process(p)
        upstream.sock.close()


def test_broker_for_run_carries_the_proxy_of_an_external_kafka(stack, tmp_path):
    bootstrap, control = stack
    with shared_broker.broker_for_run(bootstrap, tmp_path / "runs", tmp_path / "logs", kafka_proxy=control) as info:
        assert info.external and info.has_proxy and info.product is None
        assert (info.control_host, info.control_port) == ("127.0.0.1", int(control.rpartition(":")[2]))
        assert info.broker_pid is None and info.proxy_pid is None  # the lab starts and stops nothing
        assert broker.BrokerInfo.from_dict(info.to_dict()) == info
    with shared_broker.broker_for_run(bootstrap, tmp_path / "runs", tmp_path / "logs") as info:
        assert info.external and not info.has_proxy


def test_an_unanswering_proxy_is_one_line_naming_lab_kafka_proxy(stack, tmp_path):
    bootstrap, _ = stack
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening: refused
        with pytest.raises(LabError) as e:
            with shared_broker.broker_for_run(bootstrap, tmp_path / "runs", tmp_path / "logs", kafka_proxy=dead):
                pytest.fail("a run must not start without its proxy")
    msg = str(e.value)
    assert f"LAB_KAFKA_PROXY={dead!r}" in msg and "unset LAB_KAFKA_PROXY" in msg and "\n" not in msg
    with pytest.raises(LabError, match="bad LAB_KAFKA_PROXY 'nohost'"):
        external_broker.check_proxy("nohost")


def test_a_listener_that_is_not_a_proxy_is_refused(tmp_path):
    with socket.socket() as other:  # e.g. LAB_KAFKA_PROXY pointed at Kafka itself: it never answers a JSON line
        other.bind(("127.0.0.1", 0))
        other.listen()
        with pytest.raises(LabError, match="does not answer on its control port") as e:
            external_broker.check_proxy(f"127.0.0.1:{other.getsockname()[1]}", timeout_s=0.5)
    assert "\n" not in str(e.value)


def test_proxy_faults_reach_the_named_proxy_and_are_healed_at_the_end(stack, monkeypatch):
    bootstrap, control = stack
    monkeypatch.setenv("LAB_KAFKA_BOOTSTRAP", bootstrap)
    monkeypatch.setenv("LAB_KAFKA_PROXY", control)
    host, port = external_broker.check_proxy(control)
    cfg = make_config(faults="ack-loss@at=1s:count=7")
    timeline, driver = Timeline(), Driver()
    hands = SimpleNamespace(control_host=host, client_controls=(port,), replication_controls=(),
                            kill_driver=driver.kill, driver_up=lambda: driver.up)
    inj = FaultInjector(cfg, timeline, hands, elapsed=lambda: driver.now)
    assert inj.heal_proxy() is None  # no proxy fault fired yet: another run's fault is left alone
    driver.now = 1.5
    inj.tick()
    fired = timeline.of("fault")[0]
    assert fired["kind"] == "ack-loss" and fired["proxy"]["ack_loss_left"] == 7
    assert proxy.control(port, {"cmd": "status"}, host=host)["ack_loss_left"] == 7  # still in effect at the run's end
    assert inj.heal_proxy()["ack_loss_left"] == 0
    assert proxy.control(port, {"cmd": "status"}, host=host)["ack_loss_left"] == 0
    assert inj.heal_proxy() is None  # once per run
    cut = inj.inject("broker-outage", duration_s=0.2)
    assert cut["proxy"]["cut_for_s"] > 0


def test_a_kafka_that_accepts_but_never_answers_fails_the_start_within_10_s(tmp_path, runs_dir, monkeypatch):
    """LAB_KAFKA_BOOTSTRAP at a port that takes connections and says nothing: one line, nothing left running."""
    import time

    from lab.run.supervisor import Run

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # accepted by the kernel, never read, never answered
    bootstrap = f"127.0.0.1:{silent.getsockname()[1]}"
    monkeypatch.setenv("LAB_KAFKA_BOOTSTRAP", bootstrap)
    run = Run(make_config(pipeline="plain", events=10, runs_dir=str(runs_dir)))
    started = time.monotonic()
    try:
        with pytest.raises(LabError) as info:
            run.start()
    finally:
        run.stop()
        silent.close()
    took = time.monotonic() - started
    message = str(info.value)
    assert "\n" not in message and bootstrap in message and "within 8 s" in message, message
    assert took < 10, f"{took:.1f} s"
    from tests.integration.conftest import assert_all_gone, run_pids
    assert_all_gone(run_pids(run.run_dir), within_s=10)
