"""Watching a cluster's partitions: who leads each one and which replicas are in sync.

The supervisor of a run on the three-broker cluster (:mod:`lab.kafka_cluster`)
runs one :class:`ReplicationWatch`: every :data:`POLL_S` it asks the cluster's
metadata for the run topic's partitions and writes a ``partition-state`` event
to the timeline whenever a partition's leader, ISR, replicas or leader epoch
changed (and once for each partition at the start). That is the timeline of a
leader change and of an ISR that shrinks and grows back which notebook 07 draws.

Delivery guarantee: none; it observes. A metadata request that fails (a broker
just died, the cluster is electing) is retried at the next poll with a new
client; what it missed in between is not invented.
"""

from __future__ import annotations

import threading
import time

#: Seconds between two metadata requests. Measured: a describe takes 2-10 ms on a quiet cluster; a
#: follower falls out of the ISR 3 s after its fetches stop (lab.kafka_cluster.REPLICA_LAG_TIME_MAX_MS).
POLL_S = 0.5

#: Timeout of one metadata request: a dead broker must not hold the watch longer than a poll or two.
REQUEST_TIMEOUT_MS = 2000


def partition_states(described: list[dict], topic: str) -> dict[int, dict]:
    """``{partition: {"leader", "isr", "replicas", "epoch"}}`` of ``topic`` from kafka-python's ``describe_topics``.

    A leader of -1 (Kafka's "no leader") is ``None``; ISR and replicas are sorted node ids.
    """
    for t in described:
        if t.get("name") != topic:
            continue
        out = {}
        for p in t.get("partitions") or ():
            leader = p.get("leader_id", p.get("leader"))
            out[int(p.get("partition_index", p.get("partition")))] = {
                "leader": None if leader is None or leader < 0 else int(leader),
                "isr": sorted(int(n) for n in p.get("isr_nodes", p.get("isr")) or ()),
                "replicas": sorted(int(n) for n in p.get("replica_nodes", p.get("replicas")) or ()),
                "epoch": p.get("leader_epoch"),
            }
        return out
    return {}


def changes(before: dict[int, dict], after: dict[int, dict]) -> list[dict]:
    """The partitions whose state differs between two :func:`partition_states`: one dict each, ``partition`` first."""
    return [{"partition": p, **state} for p, state in sorted(after.items()) if before.get(p) != state]


def describe(bootstrap: str, topic: str, admin=None) -> dict[int, dict]:
    """:func:`partition_states` of ``topic`` now (a new admin client unless one is given)."""
    from kafka.admin import KafkaAdminClient

    own = admin is None
    admin = admin or KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    try:
        return partition_states(admin.describe_topics([topic]), topic)
    finally:
        if own:
            admin.close()


class ReplicationWatch:
    """A daemon thread writing ``partition-state`` events for ``topic`` until :meth:`stop`.

    ``write(type, **fields)`` writes one timeline event (an :class:`lab.events.EventLog`'s ``write``).
    """

    def __init__(self, bootstrap: str, topic: str, write) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.write = write
        self.latest: dict[int, dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lab-replication-watch", daemon=True)

    def start(self) -> "ReplicationWatch":
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        from lab.events import PARTITION_STATE

        admin = None
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                if admin is None:
                    from kafka.admin import KafkaAdminClient

                    admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
                now = describe(self.bootstrap, self.topic, admin)
                for change in changes(self.latest, now):
                    self.write(PARTITION_STATE, **change)
                self.latest = {**self.latest, **now}
            except Exception:  # a broker died under the request: a new client next time
                if admin is not None:
                    try:
                        admin.close()
                    except Exception:
                        pass
                admin = None
            self._stop.wait(max(0.0, POLL_S - (time.monotonic() - began)))
        if admin is not None:
            try:
                admin.close()
            except Exception:
                pass
