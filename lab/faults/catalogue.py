"""The fault catalogue: which real failures and named points exist, who carries each out, where, and what each needs.

A plan's syntax, and its check against this catalogue before any process starts, are in
:mod:`lab.faults.plan`. Also the producer's event keys, which ``poison@key=<n>`` names.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from lab import events as ev

# -- the catalogue ----------------------------------------------------------------
# One place says which faults and named points exist, who carries each out,
# what else it needs (each pipeline's registry entry lists the faults and points it accepts). Configuration checks a
# plan against it before any process starts (:func:`lab.faults.plan.check_plan`); the supervisor's
# injector (:mod:`lab.run.injector`) carries out the control-plane faults; the panel
# draws its buttons from it. Adding a fault or a point means an entry here and
# its implementation (the injector, or the pipeline that stops at the point).

#: The producer's event keys, ``k00`` to ``k63`` (:mod:`lab.run.producer`); ``poison@key=<n>`` names one.
KEYS = 64


def event_keys(seed: int, count: int) -> list[str]:
    """The keys of a run's events in sequence order, as the producer draws them (same seed, same keys)."""
    rng = random.Random(seed + 1)
    return [f"k{rng.randrange(KEYS):02d}" for _ in range(count)]


@dataclass(frozen=True)
class FaultSpec:
    """One kind of fault.

    Attributes
    ----------
    name : str
        The plan's ``KIND``.
    summary : str
        What really happens.
    by : str
        Who carries it out: ``supervisor`` (a kill), ``proxy`` (a cut or dropped
        responses), ``producer`` (the ledgered producer, e.g. aborting transactions), ``timeline`` (the supervisor
        writes the ``fault`` event and the pipeline's driver, watching the timeline, acts on it), ``driver`` (the
        pipeline itself at its trigger, e.g. a task raising; it reports the event).
    points : bool
        Whether a named point may follow the trigger.
    needs_batch : bool
        Whether only a ``batch=N`` trigger makes sense.
    options : tuple of str
        The plan options it takes (``for``, ``count``).
    isr_trigger : bool
        Whether an ``isr=<n>`` trigger (partition 0's ISR shrunk to ``n``) applies.
    output_trigger : bool
        Whether an ``output=<n>`` trigger (the run's output topic holds ``n`` records) applies.
    key_trigger : bool
        Whether its trigger is ``key=<n>`` (records of event key ``k<nn>``), and only that.
    requires : callable, optional
        ``requires(config) -> str | None``: why this run's settings cannot
        carry it out, or ``None`` when they can (an engine's own setting: that engine's
        ``requirements``, :mod:`lab.engines`).
    button : tuple of str, optional
        ``(label, tooltip)`` of the panel's button; ``None``: no button. A ``driver`` fault with a button is
        pressed through its effect (:mod:`lab.run.effects`), which names in the ``fault`` event what the driver
        acts on (``poison``: an event not yet sent).
    panel_options : dict
        What a button press passes to :meth:`lab.run.supervisor.Run.inject`.
    confirmed_by : str, optional
        For a ``timeline`` fault, or a pressed ``driver`` one, the pipeline may find nothing to act on: the event
        type (with the fault's ``index``) that says it did. Until then the run is not drained; never, and it ends
        ``fault-not-applied``.
    """

    name: str
    summary: str
    by: str
    points: bool = False
    needs_batch: bool = False
    options: tuple[str, ...] = ()
    isr_trigger: bool = False
    output_trigger: bool = False
    key_trigger: bool = False
    requires: Callable | None = None
    button: tuple[str, str] | None = None
    panel_options: tuple = ()
    confirmed_by: str | None = None


@dataclass(frozen=True)
class PointSpec:
    """One named place inside a batch where a driver crash (or task failure) can be made to happen.

    Why a run's settings make a point unreachable (a write-ahead log point without the log) is its engine's
    ``requirements`` (:mod:`lab.engines`).
    """

    name: str
    summary: str




def _needs_proxy(kind: str):
    def check(cfg) -> str | None:
        # The embedded broker always has the lab's proxy; a Kafka of one's own has one only when named.
        if not cfg.cluster.kafka_bootstrap or cfg.cluster.kafka_proxy:
            return None
        return (f"fault {kind!r} needs the lab's proxy in front of the broker; unset LAB_KAFKA_BOOTSTRAP to use "
                "the embedded broker's, or set LAB_KAFKA_PROXY to the control address (host:port) of a lab proxy "
                "in front of LAB_KAFKA_BOOTSTRAP")
    return check


def _needs_durable_broker(cfg) -> str | None:
    if cfg.cluster.kafka_bootstrap:
        return "fault 'broker-crash' kills the embedded broker's JVM; unset LAB_KAFKA_BOOTSTRAP to use it"
    return None


def _needs_transactions(cfg) -> str | None:
    if cfg.producer.transactional:
        return None
    return "fault 'txn-abort' aborts the producer's transactions: it needs --transactional on"


def _needs_cluster(kind: str, needs: str = "replicas to fail over to"):
    def check(cfg) -> str | None:
        if cfg.cluster.nodes > 1:
            return None
        return (f"fault {kind!r} needs {needs}: run on the three-broker cluster (--nodes 3, "
                "or LAB_BROKER_NODES=3)")
    return check


def _needs_one_node(cfg) -> str | None:
    if cfg.cluster.nodes > 1:
        return "fault 'broker-crash' kills the one broker of a single-node Kafka; on a cluster use leader-crash"
    return _needs_durable_broker(cfg)


#: Seconds a paused driver is stopped before ``--on-pause replace`` starts its replacement: the lab's
#: supervisor gives up on a driver that has been silent this long (ON_PAUSE says it in words).
PAUSE_REPLACE_AFTER_S = 2.0
#: Which pipelines' paused drivers are replaced is each one's registry entry (``pause_replace``): by default
#: those whose drivers keep nothing on local disk, so two of them run at once as two consumers of one group
#: would; on request also Structured Streaming, whose two drivers then share one checkpoint, as two drivers do
#: when a cluster manager gives up on one. Measured: the second to write a batch's entry in the checkpoint's
#: logs fails (Spark's CONCURRENT_STREAM_LOG_UPDATE, "Multiple streaming jobs detected", or, when both write the
#: entry at once, "Multiple streaming queries are concurrently using") and its query dies: the zombie, or, when
#: its replacement was still starting as it woke (a loaded machine), the replacement. The direct and receiver
#: drivers keep logs of their own.
#: What the supervisor does while a driver is paused (``--on-pause``).
ON_PAUSE = {
    "auto": "replace for a pipeline whose drivers keep nothing on local disk, else wait",
    "wait": "nothing: the driver is continued where it stopped, as after a long GC",
    "replace": "start a replacement once the driver has been stopped 2 s, as a cluster manager that gave up on it "
               "would; the paused one comes back as a zombie",
}
#: Seconds a continued zombie runs before the supervisor kills it (a cluster manager that reaches it again),
#: unless it ends on its own first.
ZOMBIE_LIFETIME_S = 8.0


def on_pause_mode(cfg, spec) -> str:
    """``--on-pause`` resolved for a run of the pipeline ``spec``: ``auto`` is ``replace`` where its registry
    entry's ``pause_replace`` is ``default``, else ``wait``."""
    if cfg.on_pause != "auto":
        return cfg.on_pause
    return "replace" if spec.pause_replace == "default" else "wait"








FAULTS: dict[str, FaultSpec] = {f.name: f for f in (
    FaultSpec("driver-crash", "SIGKILL to the pipeline driver's process group (Python and JVM); the supervisor "
                              "restarts it",
              by="supervisor", points=True, output_trigger=True,
              button=("Crash driver", "SIGKILL the driver's process group (Python and JVM); it restarts from its "
                                      "checkpoint")),
    FaultSpec("driver-pause", "SIGSTOP to the driver's process group, SIGCONT after for=Ns; with --on-pause replace "
              "a new driver takes over meanwhile and the paused one comes back as a zombie",
              by="supervisor", options=("for",), output_trigger=True,
              button=("Pause driver 15 s", "SIGSTOP the driver's process group for 15 s; with --on-pause replace a new "
                      "driver takes over and the paused one comes back as a zombie"),
              panel_options=(("duration_s", 15.0),)),
    FaultSpec("executor-crash", "SIGKILL to one executor JVM (local-cluster or a cluster)",
              by="supervisor",
              button=("Kill executor", "SIGKILL one executor JVM")),
    FaultSpec("task-failure", "one Spark task raises once after writing part of its rows; Spark retries it",
              by="driver", points=True, needs_batch=True),
    FaultSpec("bolt-fail", "Storm's sink bolt fails count=K tuples of a batch (all by default) after writing them; "
              "the acker fails their trees and the spout replays them",
              by="driver", needs_batch=True, options=("count",)),
    FaultSpec("consumer-crash", "SIGKILL to one share consumer holding acquired records, before it writes them; "
              "its driver starts another",
              by="timeline", confirmed_by=ev.CONSUMER_KILLED,
              button=("Kill a consumer", "SIGKILL the share consumer that next gets records, before it writes them")),
    FaultSpec("poison", "the first record (count=N: the first N) of event key k<nn> kills the share consumer that "
              "processes it, each time it is delivered (SIGKILL before anything of its batch is written)",
              by="driver", key_trigger=True, options=("count", "nth"), confirmed_by=ev.POISON_KILLED,
              button=("Poison a record", "an event the producer has not sent yet kills each share consumer it "
                                         "reaches, until the group archives it or moves it to its dead-letter topic")),
    FaultSpec("receiver-restart", "the receiver's connection drops",
              by="timeline",
              button=("Drop receiver", "cut the receiver's connection; its consumer forgets uncommitted progress")),
    FaultSpec("broker-outage", "the lab's proxy refuses and cuts client connections for a while",
              by="proxy", options=("for",), requires=_needs_proxy("broker-outage"),
              button=("Cut broker 3 s", "the proxy cuts and refuses every client connection for 3 s"),
              panel_options=(("duration_s", 3.0),)),
    FaultSpec("ack-loss", "the lab's proxy forwards produce requests and drops their responses",
              by="proxy", options=("for", "count"), requires=_needs_proxy("ack-loss"),
              button=("Lose 5 acks", "the proxy drops the responses to the next 5 produce requests"),
              panel_options=(("count", 5),)),
    FaultSpec("leader-unreachable", "the lab's proxy cuts the pipeline's producer off from one broker for=Ns: one "
              "that leads a partition of the output topic and coordinates nothing (a cluster's); the sends to its "
              "partitions wait unsent and fail when the producer's delivery timeout passes, while the transaction "
              "stays open and its coordinators reachable",
              by="proxy", points=True, options=("for",),
              requires=_needs_cluster("leader-unreachable", "a broker other than the transaction coordinator")),
    FaultSpec("broker-crash", "SIGKILL to the embedded Apache Kafka broker's JVM; restarted on its data after for=Ns",
              by="supervisor", options=("for",), requires=_needs_one_node,
              button=("Crash broker 3 s", "SIGKILL the broker JVM; it restarts on its data 3 s later"),
              panel_options=(("duration_s", 3.0),)),
    FaultSpec("leader-crash", "SIGKILL to the broker leading the run topic's partition 0 (a cluster's broker JVM); "
              "restarted on its data after for=Ns",
              by="supervisor", options=("for",), isr_trigger=True,
              requires=_needs_cluster("leader-crash"),
              button=("Crash leader 5 s", "SIGKILL the broker that leads partition 0; it restarts on its data 5 s "
                                          "later"),
              panel_options=(("duration_s", 5.0),)),
    FaultSpec("follower-lag", "the replication proxies hold every follower fetch for=Ns: followers fall behind "
              "while leaders keep acknowledging",
              by="proxy", options=("for",), requires=_needs_cluster("follower-lag"),
              button=("Hold followers 8 s", "the replication proxies hold every follower fetch for 8 s"),
              panel_options=(("duration_s", 8.0),)),
    FaultSpec("txn-abort", "the transactional producer aborts its next count=K transactions instead of committing",
              by="producer", options=("count",), requires=_needs_transactions,
              button=("Abort a transaction", "the producer aborts its open transaction instead of committing it"),
              panel_options=(("count", 1),)),
)}

POINTS: dict[str, PointSpec] = {p.name: p for p in (
    PointSpec("after-offset-log", "the batch is planned and its offsets logged; output has not started"),
    PointSpec("mid-output", "part of the batch's rows are written (flink: half a checkpoint interval after the "
              "checkpoint before the batch completed)"),
    PointSpec("after-output-before-commit", "the sink returned; the batch is not yet marked done"),
    PointSpec("after-commit-before-output", "offsets are committed; output has not started"),
    PointSpec("after-wal-before-ack",
              "the receiver's block is in the write-ahead log; the source is not yet acknowledged"),
)}

#: Every fault kind with what really happens (the plan's vocabulary).
FAULT_KINDS = {name: spec.summary for name, spec in FAULTS.items()}


#: The faults every pipeline accepts: kills, pauses and the broker's faults.
COMMON_FAULTS = ("driver-crash", "driver-pause", "broker-outage", "ack-loss", "broker-crash", "leader-crash",
                 "follower-lag", "txn-abort")


def faults_in_order(*own: str) -> tuple[str, ...]:
    """:data:`COMMON_FAULTS` and a pipeline's ``own`` fault kinds, in catalogue order (a registry entry's
    ``faults``)."""
    unknown = set(own) - set(FAULTS)
    if unknown:
        raise ValueError(f"not in the catalogue: {sorted(unknown)}")
    return tuple(name for name in FAULTS if name in COMMON_FAULTS or name in own)


def points_in_order(*names: str) -> tuple[str, ...]:
    """Named points in catalogue order (a registry entry's ``points``)."""
    unknown = set(names) - set(POINTS)
    if unknown:
        raise ValueError(f"not in the catalogue: {sorted(unknown)}")
    return tuple(name for name in POINTS if name in names)
