"""Watching a cluster's partitions: who leads each one and which replicas are in sync.

The supervisor of a run on the three-broker cluster (:mod:`lab.broker.cluster`)
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
#: follower falls out of the ISR 3 s after its fetches stop (lab.broker.cluster.REPLICA_LAG_TIME_MAX_MS).
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

    def start(self) -> ReplicationWatch:
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


# -- reading the timeline back (pure: notebook 07's table and figure) ---------------------------


def replica_intervals(events: list[dict]) -> list[dict]:
    """Each replica's role over time, from a run's ``partition-state`` events.

    Returns one dict per stretch: ``partition``, ``node``, ``role`` (``leader``,
    ``in-sync``: in the ISR, not leading; ``out-of-sync``: a replica outside the
    ISR), ``start``, ``end`` (event times; the last state lasts to the run's last
    event) and ``epoch``. Consecutive stretches with the same role and epoch are
    one. A partition with no leader has no ``leader`` stretch then
    (:func:`leaderless_s`).
    """
    from lab.events import PARTITION_STATE

    if not events:
        return []
    end = max(e["t"] for e in events)
    states: dict[int, list[dict]] = {}
    for e in sorted((e for e in events if e["type"] == PARTITION_STATE), key=lambda e: e["t"]):
        states.setdefault(e["partition"], []).append(e)
    out: list[dict] = []
    for p, seq in sorted(states.items()):
        open_: dict[int, dict] = {}
        for i, s in enumerate(seq):
            until = seq[i + 1]["t"] if i + 1 < len(seq) else end
            for node in s["replicas"]:
                role = "leader" if node == s["leader"] else "in-sync" if node in s["isr"] else "out-of-sync"
                last = open_.get(node)
                if last and last["role"] == role and last["epoch"] == s["epoch"] and last["end"] == s["t"]:
                    last["end"] = until
                    continue
                open_[node] = {"partition": p, "node": node, "role": role, "start": s["t"], "end": until,
                               "epoch": s["epoch"]}
                out.append(open_[node])
    return out


def leaderless_s(events: list[dict]) -> dict[int, float]:
    """Seconds in all each partition had no live leader: unavailable for reads and writes.

    No live leader means Kafka's leader -1 (none elected), or a leader the
    metadata still names while its broker is killed (``leader-crash`` until
    ``node-restart``: the controller notices a dead broker only after a while;
    measured about 1.5 s). From ``partition-state`` events, so to the watch's
    resolution (:data:`POLL_S`).
    """
    from lab.events import PARTITION_STATE

    end = max((e["t"] for e in events), default=0.0)
    down = node_down_intervals(events)
    seq = sorted((e for e in events if e["type"] == PARTITION_STATE), key=lambda e: e["t"])
    out: dict[int, float] = {}
    for i, s in enumerate(seq):
        out.setdefault(s["partition"], 0.0)
        later = [n["t"] for n in seq[i + 1:] if n["partition"] == s["partition"]]
        until = later[0] if later else end
        if s["leader"] is None:
            out[s["partition"]] += until - s["t"]
            continue
        for d in down:
            if d["node"] == s["leader"]:
                out[s["partition"]] += max(0.0, min(until, d["end"]) - max(s["t"], d["start"]))
    return {p: round(s, 2) for p, s in out.items()}


def node_down_intervals(events: list[dict]) -> list[dict]:
    """``{node, start, end}`` from each ``leader-crash`` kill to that node's ``node-restart`` (or the run's end)."""
    from lab.events import FAULT, NODE_RESTART

    end = max((e["t"] for e in events), default=0.0)
    out = []
    for e in events:
        if e["type"] == FAULT and e.get("kind") == "leader-crash" and e.get("node") is not None:
            back = [r["t"] for r in events if r["type"] == NODE_RESTART and r.get("node") == e["node"]
                    and r["t"] > e["t"]]
            out.append({"node": e["node"], "start": e["t"], "end": min(back) if back else end})
    return out
