"""How a broker's processes end: a run's own broker without the clean shutdown only a later start would use.

The broker here is a stand-in process that ignores SIGTERM, as a Kafka JVM
busy with its clean shutdown does for up to its grace; no JVM runs.
"""

from __future__ import annotations

import sys
import time

from lab.broker import apache as kafka_broker, cluster as kafka_cluster, embedded as broker
from lab.host import processes

_IGNORES_SIGTERM = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
                    "time.sleep(120)")


def _stand_in(tmp_path) -> int:
    log = tmp_path / "stand-in.log"
    proc = processes.spawn([sys.executable, "-c", _IGNORES_SIGTERM], log_path=log)
    deadline = time.monotonic() + 10
    while "up" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.02)  # its SIGTERM handler is set only once it says so
    return proc.pid


def test_a_discarded_brokers_jvm_gets_no_grace_and_nothing_is_left(tmp_path):
    pid = _stand_in(tmp_path)
    info = broker.BrokerInfo(bootstrap="127.0.0.1:1", broker_pid=pid, product="apache-kafka", log_dir=str(tmp_path))
    t = time.monotonic()
    broker.stop_embedded(info, discard_data=True)
    # Killed at once: a clean stop would have waited out the grace, the stand-in ignoring SIGTERM.
    assert time.monotonic() - t < kafka_broker.KAFKA_STOP_GRACE_S
    assert not processes.group_alive(pid)


def test_a_discarded_clusters_brokers_and_controller_get_no_grace(tmp_path):
    nodes = [kafka_cluster.NodeInfo(node=n, broker_pid=_stand_in(tmp_path), broker_port=0, replication_port=0,
                                    proxy_pid=0, proxy_port=0, control_port=0, replication_proxy_pid=0,
                                    replication_proxy_port=0, replication_control_port=0) for n in (1, 2)]
    controller = _stand_in(tmp_path)
    info = broker.BrokerInfo(bootstrap="127.0.0.1:1", broker_pid=nodes[0].broker_pid, product="apache-kafka",
                             log_dir=str(tmp_path), nodes=tuple(nodes), controller_pid=controller)
    t = time.monotonic()
    broker.stop_embedded(info, discard_data=True)
    assert time.monotonic() - t < kafka_broker.KAFKA_STOP_GRACE_S
    assert not any(processes.group_alive(p) for p in (controller, *(n.broker_pid for n in nodes)))
