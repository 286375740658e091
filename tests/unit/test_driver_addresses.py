"""Where the driver's servers listen and what executors are told: loopback on one machine, the container's name
in the compose stack (``LAB_SPARK_DRIVER_HOST``), for Spark's RPC and the receiver's feeder alike.

(The stack itself, a receiver in a worker container fed by the driver in ``jupyter``: ``make test-stack``.)
"""

import socket

from lab.pipelines.receiver.feed import Feeder
from lab.spark.session import driver_addresses, session_conf


def _listening_feeder(host: str) -> tuple[Feeder, int]:
    feeder = Feeder("127.0.0.1:9", "t", 1, "g", 0, "stored", events=None, on_commit=lambda c: None, host=host)
    return feeder, feeder.start_listening()


def _can_connect(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=2).close()
        return True
    except OSError:
        return False


def test_on_one_machine_everything_stays_on_loopback(monkeypatch, tmp_path):
    monkeypatch.delenv("LAB_SPARK_DRIVER_HOST", raising=False)
    assert driver_addresses() == ("127.0.0.1", "127.0.0.1")
    conf = session_conf("local[2]", tmp_path, "x")
    assert (conf["spark.driver.bindAddress"], conf["spark.driver.host"]) == ("127.0.0.1", "127.0.0.1")


def test_in_a_container_executors_elsewhere_reach_the_driver_by_its_name(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_SPARK_DRIVER_HOST", "jupyter")
    assert driver_addresses() == ("0.0.0.0", "jupyter")
    conf = session_conf("spark://spark-master:7077", tmp_path, "x")
    assert (conf["spark.driver.bindAddress"], conf["spark.driver.host"]) == ("0.0.0.0", "jupyter")


def test_the_feeder_listens_on_the_address_it_is_given():
    # Two loopback addresses stand for "this container only" and "where the receiver connects from".
    feeder, port = _listening_feeder("127.0.0.2")
    try:
        assert _can_connect("127.0.0.2", port) and not _can_connect("127.0.0.1", port)
    finally:
        feeder._server.close()
