"""Fault plans: which real failure to inject, and when.

Syntax, several faults separated by commas::

    KIND@TRIGGER[:POINT][:OPTION=VALUE...]

``TRIGGER`` is ``at=<seconds>s`` (time since the run's producer started: the run's start, except for
the pipelines whose producer waits for their job to run, flink, storm and samza),
``batch=<n>`` (when the pipeline reaches batch ``n``), for ``poison`` only ``key=<n>`` (the first
record of event key ``k<nn>`` is poison; ``count=N``: its first N) or, for ``leader-crash``
only, ``isr=<n>`` (once partition 0's in-sync replicas are ``n`` or fewer, as
the run's replication watch sees them: ``isr=1`` is "the leader alone").
``POINT`` names the place inside a batch where a driver crash happens; it
makes a run reproducible because the crash waits for the pipeline to reach
that exact place. Options: ``for=<seconds>s`` (how long a broker outage, an ack loss or a
follower lag lasts; how long a crashed broker or leader stays down),
``count=<n>`` (how many produce responses an ack loss drops; how many
transactions a txn-abort aborts; how many tuples a bolt-fail fails; how many records a poison poisons).

A ``driver-pause`` (``for=`` how long it is stopped) is continued where it stopped, or, with
``--on-pause replace``, replaced meanwhile and continued as a zombie.

Examples: ``driver-crash@at=5s``, ``driver-pause@at=3s:for=20s``,
``driver-crash@batch=3:after-output-before-commit``,
``broker-outage@at=4s:for=3s``, ``ack-loss@at=1s:count=5``,
``follower-lag@at=1s:for=10s,leader-crash@isr=1:for=2s``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Callable

from lab import events as ev
from lab.errors import LabError, choices_error

# -- the catalogue ----------------------------------------------------------------
# One place says which faults and named points exist, who carries each out,
# which pipelines support it and what else it needs. Configuration checks a plan
# against it before any process starts (:func:`check_plan`); the supervisor's
# injector (:mod:`lab.run.injector`) carries out the control-plane faults; the panel
# draws its buttons from it. Adding a fault or a point means an entry here and
# its implementation (the injector, or the pipeline that stops at the point).

SPARK_PIPELINES = ("structured", "direct", "receiver")
#: The producer's event keys, ``k00`` to ``k63`` (:mod:`lab.run.producer`); ``poison@key=<n>`` names one.
KEYS = 64


def event_keys(seed: int, count: int) -> list[str]:
    """The keys of a run's events in sequence order, as the producer draws them (same seed, same keys)."""
    rng = random.Random(seed + 1)
    return [f"k{rng.randrange(KEYS):02d}" for _ in range(count)]


def poison_seqs(fault: "Fault", seed: int, events: int) -> list[int]:
    """The sequence numbers a ``poison@key=<n>[:count=<c>]`` fault makes poison: the first ``c`` (1) events of key ``k<nn>``."""
    key = f"k{fault.key:02d}"
    return [seq for seq, k in enumerate(event_keys(seed, events)) if k == key][:fault.count or 1]
ALL_PIPELINES = ("plain", "kafka-eos", *SPARK_PIPELINES, "flink", "storm", "samza", "share")


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
        responses), ``producer`` (the ledgered producer, e.g. aborting transactions), ``timeline`` (the supervisor writes the ``fault`` event and the
        pipeline's driver, watching the timeline, acts on it), ``driver`` (the
        pipeline itself at its trigger, e.g. a task raising; it reports the event).
    pipelines : tuple of str
        The pipelines it applies to.
    points : bool
        Whether a named point may follow the trigger.
    needs_batch : bool
        Whether only a ``batch=N`` trigger makes sense.
    options : tuple of str
        The plan options it takes (``for``, ``count``).
    isr_trigger : bool
        Whether an ``isr=<n>`` trigger (partition 0's ISR shrunk to ``n``) applies.
    key_trigger : bool
        Whether its trigger is ``key=<n>`` (records of event key ``k<nn>``), and only that.
    requires : callable, optional
        ``requires(config) -> str | None``: why this run's settings cannot
        carry it out, or ``None`` when they can.
    button : tuple of str, optional
        ``(label, tooltip)`` of the panel's button; ``None``: no button.
    panel_options : dict
        What a button press passes to :meth:`lab.run.supervisor.Run.inject`.
    confirmed_by : str, optional
        For a ``timeline`` fault the pipeline may find nothing to act on: the event type (with the fault's
        ``index``) that says it did. Until then the run is not drained; never, and it ends ``fault-not-applied``.
    """

    name: str
    summary: str
    by: str
    pipelines: tuple[str, ...]
    points: bool = False
    needs_batch: bool = False
    options: tuple[str, ...] = ()
    isr_trigger: bool = False
    key_trigger: bool = False
    requires: Callable | None = None
    button: tuple[str, str] | None = None
    panel_options: tuple = ()
    confirmed_by: str | None = None


@dataclass(frozen=True)
class PointSpec:
    """One named place inside a batch where a driver crash (or task failure) can be made to happen.

    ``requires(config) -> str | None`` says why a run's settings make the point
    unreachable (e.g. a write-ahead log point without the log).
    """

    name: str
    summary: str
    pipelines: tuple[str, ...]
    requires: Callable | None = None


def _needs_executors(cfg) -> str | None:
    if cfg.spark_master.startswith(("local-cluster", "spark://")):
        return None
    return (f"executor-crash needs executors in their own JVMs; master {cfg.spark_master!r} has none. "
            "Valid masters for it: local-cluster[W,C,M], spark://host:port")


def _needs_proxy(kind: str):
    def check(cfg) -> str | None:
        # The embedded broker always has the lab's proxy; a Kafka of one's own has one only when named.
        if not cfg.kafka_bootstrap or cfg.kafka_proxy:
            return None
        return (f"fault {kind!r} needs the lab's proxy in front of the broker; unset LAB_KAFKA_BOOTSTRAP to use "
                "the embedded broker's, or set LAB_KAFKA_PROXY to the control address (host:port) of a lab proxy "
                "in front of LAB_KAFKA_BOOTSTRAP")
    return check


def _needs_durable_broker(cfg) -> str | None:
    if cfg.kafka_bootstrap:
        return "fault 'broker-crash' kills the embedded broker's JVM; unset LAB_KAFKA_BOOTSTRAP to use it"
    if cfg.broker != "kafka":
        return ("fault 'broker-crash' needs a broker that keeps its data: Tansu stores it in memory, so a "
                f"restart would be an empty broker (this run: --broker {cfg.broker}); use --broker kafka")
    return None


def _needs_transactions(cfg) -> str | None:
    if cfg.producer.transactional:
        return None
    return "fault 'txn-abort' aborts the producer's transactions: it needs --transactional on"


def _needs_cluster(kind: str):
    def check(cfg) -> str | None:
        if getattr(cfg, "nodes", 1) > 1:
            return None
        return (f"fault {kind!r} needs replicas to fail over to: run on the three-broker cluster (--nodes 3, "
                "or LAB_BROKER_NODES=3)")
    return check


def _needs_one_node(cfg) -> str | None:
    if getattr(cfg, "nodes", 1) > 1:
        return "fault 'broker-crash' kills the one broker of a single-node Kafka; on a cluster use leader-crash"
    return _needs_durable_broker(cfg)


#: Seconds a paused driver is stopped before ``--on-pause replace`` starts its replacement: the lab's
#: supervisor gives up on a driver that has been silent this long (ON_PAUSE says it in words).
PAUSE_REPLACE_AFTER_S = 2.0
#: Pipelines whose paused driver is replaced by default (``--on-pause auto``): their drivers keep nothing on
#: local disk, so two of them run at once as two consumers of one group would.
PAUSE_REPLACE_BY_DEFAULT = ("plain", "kafka-eos", "share")
#: Pipelines whose paused driver may be replaced (``--on-pause replace``): those, and Structured Streaming, whose
#: two drivers then share one checkpoint, as two drivers do when a cluster manager gives up on one. Measured:
#: the second to write a batch's entry in the checkpoint's logs fails (Spark's CONCURRENT_STREAM_LOG_UPDATE,
#: "Multiple streaming jobs detected", or, when both write the entry at once, "Multiple streaming queries are
#: concurrently using") and its query dies: the zombie, or, when its replacement was still
#: starting as it woke (a loaded machine), the replacement. The direct and receiver drivers keep logs of their own.
PAUSE_REPLACE_PIPELINES = (*PAUSE_REPLACE_BY_DEFAULT, "structured")
#: What the supervisor does while a driver is paused (``--on-pause``).
ON_PAUSE = {
    "auto": "replace for " + ", ".join(PAUSE_REPLACE_BY_DEFAULT) + ", else wait",
    "wait": "nothing: the driver is continued where it stopped, as after a long GC",
    "replace": "start a replacement once the driver has been stopped 2 s, as a cluster manager that gave up on it "
               "would; the paused one comes back as a zombie",
}
#: Seconds a continued zombie runs before the supervisor kills it (a cluster manager that reaches it again),
#: unless it ends on its own first.
ZOMBIE_LIFETIME_S = 8.0


def on_pause_mode(cfg) -> str:
    """``--on-pause`` resolved: ``auto`` is ``replace`` for :data:`PAUSE_REPLACE_BY_DEFAULT`, else ``wait``."""
    if cfg.on_pause != "auto":
        return cfg.on_pause
    return "replace" if cfg.pipeline in PAUSE_REPLACE_BY_DEFAULT else "wait"


def _pause_can_be_handled(cfg) -> str | None:
    if on_pause_mode(cfg) == "replace" and cfg.pipeline not in PAUSE_REPLACE_PIPELINES:
        return (f"--on-pause replace runs two drivers at once, which pipeline {cfg.pipeline!r} cannot (they would "
                f"share its local state); valid pipelines for it: {', '.join(PAUSE_REPLACE_PIPELINES)}; "
                "or use --on-pause wait")
    return None


def _needs_acked_storm(cfg) -> str | None:
    # Only the acker replays a failed tuple: without it (unacked) fail() does nothing, and Trident replays
    # whole batches, never a tuple.
    if cfg.storm_mode == "acked":
        return None
    return f"fault 'bolt-fail' fails tuples to the acker: it needs --storm-mode acked (this run: {cfg.storm_mode})"


def _needs_commit_before_output(cfg) -> str | None:
    # Only that commit order has a moment between the commit and the output; with another, a plan
    # naming it would wait out the deadline and end with the fault not applied.
    if cfg.commit == "before-output":
        return None
    return (f"point after-commit-before-output exists only with --commit before-output "
            f"(this run: --commit {cfg.commit})")


def _needs_wal_and_stored_acks(cfg) -> str | None:
    if cfg.wal == "on" and cfg.ack == "stored":
        return None
    return (f"point after-wal-before-ack exists only with --wal on --ack stored "
            f"(this run: --wal {cfg.wal} --ack {cfg.ack})")


FAULTS: dict[str, FaultSpec] = {f.name: f for f in (
    FaultSpec("driver-crash", "SIGKILL to the pipeline driver's process group (Python and JVM); the supervisor restarts it",
              by="supervisor", pipelines=ALL_PIPELINES, points=True,
              button=("Crash driver", "SIGKILL the driver's process group (Python and JVM); it restarts from its checkpoint")),
    FaultSpec("driver-pause", "SIGSTOP to the driver's process group, SIGCONT after for=Ns; with --on-pause replace "
              "a new driver takes over meanwhile and the paused one comes back as a zombie",
              by="supervisor", pipelines=ALL_PIPELINES, options=("for",), requires=_pause_can_be_handled,
              button=("Pause driver 15 s", "SIGSTOP the driver's process group for 15 s; with --on-pause replace a new "
                      "driver takes over and the paused one comes back as a zombie"),
              panel_options=(("duration_s", 15.0),)),
    FaultSpec("executor-crash", "SIGKILL to one executor JVM (local-cluster or a cluster)",
              by="supervisor", pipelines=("direct", "receiver"), requires=_needs_executors,
              button=("Kill executor", "SIGKILL one executor JVM")),
    FaultSpec("task-failure", "one Spark task raises once after writing part of its rows; Spark retries it",
              by="driver", pipelines=("structured", "direct"), points=True, needs_batch=True),
    FaultSpec("bolt-fail", "Storm's sink bolt fails count=K tuples of a batch (all by default) after writing them; "
              "the acker fails their trees and the spout replays them",
              by="driver", pipelines=("storm",), needs_batch=True, options=("count",), requires=_needs_acked_storm),
    FaultSpec("consumer-crash", "SIGKILL to one share consumer holding acquired records, before it writes them; "
              "its driver starts another",
              by="timeline", pipelines=("share",), confirmed_by=ev.CONSUMER_KILLED,
              button=("Kill a consumer", "SIGKILL the share consumer that next gets records, before it writes them")),
    FaultSpec("poison", "the first record (count=N: the first N) of event key k<nn> kills the share consumer that "
              "processes it, each time it is delivered (SIGKILL once the rows before it are written)",
              by="driver", pipelines=("share",), key_trigger=True, options=("count",)),
    FaultSpec("receiver-restart", "the receiver's connection drops",
              by="timeline", pipelines=("receiver",),
              button=("Drop receiver", "cut the receiver's connection; its consumer forgets uncommitted progress")),
    FaultSpec("broker-outage", "the lab's proxy refuses and cuts client connections for a while",
              by="proxy", pipelines=ALL_PIPELINES, options=("for",), requires=_needs_proxy("broker-outage"),
              button=("Cut broker 3 s", "the proxy cuts and refuses every client connection for 3 s"),
              panel_options=(("duration_s", 3.0),)),
    FaultSpec("ack-loss", "the lab's proxy forwards produce requests and drops their responses",
              by="proxy", pipelines=ALL_PIPELINES, options=("for", "count"), requires=_needs_proxy("ack-loss"),
              button=("Lose 5 acks", "the proxy drops the responses to the next 5 produce requests"),
              panel_options=(("count", 5),)),
    FaultSpec("broker-crash", "SIGKILL to the embedded Apache Kafka broker's JVM; restarted on its data after for=Ns",
              by="supervisor", pipelines=ALL_PIPELINES, options=("for",), requires=_needs_one_node,
              button=("Crash broker 3 s", "SIGKILL the broker JVM; it restarts on its data 3 s later"),
              panel_options=(("duration_s", 3.0),)),
    FaultSpec("leader-crash", "SIGKILL to the broker leading the run topic's partition 0 (a cluster's broker JVM); "
              "restarted on its data after for=Ns",
              by="supervisor", pipelines=ALL_PIPELINES, options=("for",), isr_trigger=True,
              requires=_needs_cluster("leader-crash"),
              button=("Crash leader 5 s", "SIGKILL the broker that leads partition 0; it restarts on its data 5 s later"),
              panel_options=(("duration_s", 5.0),)),
    FaultSpec("follower-lag", "the replication proxies hold every follower fetch for=Ns: followers fall behind "
              "while leaders keep acknowledging",
              by="proxy", pipelines=ALL_PIPELINES, options=("for",), requires=_needs_cluster("follower-lag"),
              button=("Hold followers 8 s", "the replication proxies hold every follower fetch for 8 s"),
              panel_options=(("duration_s", 8.0),)),
    FaultSpec("txn-abort", "the transactional producer aborts its next count=K transactions instead of committing",
              by="producer", pipelines=ALL_PIPELINES, options=("count",), requires=_needs_transactions,
              button=("Abort a transaction", "the producer aborts its open transaction instead of committing it"),
              panel_options=(("count", 1),)),
)}

POINTS: dict[str, PointSpec] = {p.name: p for p in (
    PointSpec("after-offset-log", "the batch is planned and its offsets logged; output has not started",
              ("structured", "direct")),
    PointSpec("mid-output", "part of the batch's rows are written (flink: half a checkpoint interval after the "
              "checkpoint before the batch completed)", tuple(p for p in ALL_PIPELINES if p != "samza")),
    PointSpec("after-output-before-commit", "the sink returned; the batch is not yet marked done",
              tuple(p for p in ALL_PIPELINES if p != "flink")),
    PointSpec("after-commit-before-output", "offsets are committed; output has not started", ("plain", "share"),
              requires=_needs_commit_before_output),
    PointSpec("after-wal-before-ack",
              "the receiver's block is in the write-ahead log; the source is not yet acknowledged",
              ("receiver",), requires=_needs_wal_and_stored_acks),
)}

#: Every fault kind with what really happens (the plan's vocabulary).
FAULT_KINDS = {name: spec.summary for name, spec in FAULTS.items()}


def faults_for(pipeline: str) -> tuple[str, ...]:
    """The fault kinds that apply to ``pipeline``, in catalogue order."""
    return tuple(name for name, spec in FAULTS.items() if pipeline in spec.pipelines)


def points_for(pipeline: str) -> tuple[str, ...]:
    """The named points ``pipeline`` stops at, in catalogue order."""
    return tuple(name for name, spec in POINTS.items() if pipeline in spec.pipelines)


def check_fault(fault: "Fault", config) -> None:
    """Raise :class:`LabError` when ``config``'s run cannot carry out ``fault``.

    Checks the catalogue: the fault applies to the pipeline, its point exists
    in it, and the run's settings meet the fault's and the point's needs.
    Needs nothing but the config, so it runs before any process starts.
    """
    spec = FAULTS[fault.kind]
    if config.pipeline not in spec.pipelines:
        raise LabError(f"fault {fault.kind!r} does not apply to pipeline {config.pipeline!r}; "
                       f"valid for it: {', '.join(faults_for(config.pipeline))}")
    if fault.point:
        if config.pipeline not in POINTS[fault.point].pipelines:
            raise LabError(f"point {fault.point!r} does not exist in pipeline {config.pipeline!r}; "
                           f"valid points: {', '.join(points_for(config.pipeline))}")
        why = POINTS[fault.point].requires and POINTS[fault.point].requires(config)
        if why:
            raise LabError(why)
    why = spec.requires and spec.requires(config)
    if why:
        raise LabError(why)
    if fault.kind == "driver-pause" and on_pause_mode(config) == "replace" and fault.duration_s <= PAUSE_REPLACE_AFTER_S:
        raise LabError(f"fault {fault.to_text()!r}: with --on-pause replace the pause must outlast the "
                       f"{PAUSE_REPLACE_AFTER_S:g} s after which its replacement starts; valid: for=<n>s with n > "
                       f"{PAUSE_REPLACE_AFTER_S:g}")
    nodes = getattr(config, "nodes", 1)
    if fault.isr is not None and fault.isr >= nodes:
        # Every replica is in sync when the topic is created: the trigger would fire at once.
        raise LabError(f"fault {fault.to_text()!r}: isr={fault.isr} must be below the replica count ({nodes}); "
                       f"valid: isr=1 to isr={nodes - 1}")


def check_plan(faults, config) -> None:
    """:func:`check_fault` for every fault of a plan."""
    for fault in faults:
        check_fault(fault, config)


# -- plan syntax ------------------------------------------------------------------

_TRIGGER = re.compile(r"^(at)=(\d+(?:\.\d+)?)s$|^(batch)=(\d+)$|^(isr)=(\d+)$|^(key)=(\d+)$")
_SECONDS = re.compile(r"^(\d+(?:\.\d+)?)s$")


@dataclass(frozen=True)
class Fault:
    """One planned fault.

    Attributes
    ----------
    kind : str
        One of :data:`FAULT_KINDS`.
    at_s : float or None
        Seconds after the run's producer started, for a time trigger.
    batch : int or None
        Batch number, for a progress trigger.
    point : str or None
        Named point inside the batch (see :data:`POINTS`).
    duration_s : float
        How long an outage or an ack loss lasts.
    count : int or None
        How many produce responses an ack loss drops (``None``: all within ``duration_s``), transactions a
        txn-abort aborts, or tuples a bolt-fail fails (``None``: the whole batch).
    isr : int or None
        For a condition trigger: fire once partition 0's ISR has this many replicas or fewer.
    key : int or None
        For ``poison``: the event key ``k<nn>`` whose records are poison.
    index : int
        Position in the plan; identifies the fault in the run's events.
    """

    kind: str
    at_s: float | None = None
    batch: int | None = None
    point: str | None = None
    duration_s: float = 3.0
    count: int | None = None
    isr: int | None = None
    key: int | None = None
    index: int = 0

    def to_text(self) -> str:
        """Render the fault in plan syntax (parsing it gives the same fault)."""
        trigger = (f"at={self.at_s:g}s" if self.at_s is not None else f"isr={self.isr}" if self.isr is not None
                   else f"key={self.key}" if self.key is not None else f"batch={self.batch}")
        parts = [f"{self.kind}@{trigger}"]
        if self.point:
            parts.append(self.point)
        if "for" in FAULTS[self.kind].options:
            parts.append(f"for={self.duration_s:g}s")
        if self.count is not None:
            parts.append(f"count={self.count}")
        return ":".join(parts)


def parse_fault_plan(text: str | None) -> tuple[Fault, ...]:
    """Parse a fault plan.

    Parameters
    ----------
    text : str or None
        The plan, e.g. ``"driver-crash@batch=3:after-output-before-commit"``.
        Empty or ``None`` means no faults.

    Returns
    -------
    tuple of Fault

    Raises
    ------
    LabError
        On any malformed item, naming the item and what was expected.
    """
    if text is None or not str(text).strip():
        return ()
    faults = []
    for index, item in enumerate(p.strip() for p in str(text).split(",")):
        if not item:
            raise LabError(f"empty item in fault plan {text!r}; separate faults with single commas")
        faults.append(_parse_one(item, index))
    return tuple(faults)


def _parse_one(item: str, index: int) -> Fault:
    kind, sep, rest = item.partition("@")
    if kind not in FAULT_KINDS:
        raise choices_error("fault kind", kind, FAULT_KINDS)
    if not sep or not rest:
        isr = f", {kind}@isr=<n>" if FAULTS[kind].isr_trigger else ""
        raise LabError(f"fault {item!r} has no trigger; write {kind}@at=<seconds>s{isr} or {kind}@batch=<n>")
    trigger, *extras = rest.split(":")
    m = _TRIGGER.match(trigger)
    if not m:
        raise LabError(
            f"bad trigger {trigger!r} in fault {item!r}; valid: at=<seconds>s (e.g. at=5s), batch=<n> (e.g. batch=3)"
            f", for {', '.join(k for k, s in FAULTS.items() if s.isr_trigger)}, isr=<n> (e.g. isr=1)"
            f" or, for {', '.join(k for k, s in FAULTS.items() if s.key_trigger)}, key=<n> (e.g. key=7)"
        )
    fault = Fault(kind=kind, index=index)
    if FAULTS[kind].key_trigger != bool(m.group(7)):
        if m.group(7):
            raise LabError(f"fault {item!r}: the key=<n> trigger applies to "
                           f"{', '.join(k for k, s in FAULTS.items() if s.key_trigger)}, not {kind}")
        raise LabError(f"fault {item!r}: {kind} is triggered by an event key; write {kind}@key=<n> with n from 0 to "
                       f"{KEYS - 1} (records of key k<nn>)")
    if m.group(7):
        if int(m.group(8)) >= KEYS:
            raise LabError(f"bad trigger {trigger!r} in fault {item!r}; the producer's keys are k00 to k{KEYS - 1:02d}: "
                           f"write key=<n> with n from 0 to {KEYS - 1}")
        fault = replace(fault, key=int(m.group(8)))
    elif m.group(1):
        fault = replace(fault, at_s=float(m.group(2)))
    elif m.group(5):
        if not FAULTS[kind].isr_trigger:
            isr_ok = ", ".join(k for k, s in FAULTS.items() if s.isr_trigger)
            raise LabError(f"fault {item!r}: the isr=<n> trigger applies to {isr_ok}, not {kind}; "
                           f"write {kind}@at=<seconds>s or {kind}@batch=<n>")
        if int(m.group(6)) < 1:
            raise LabError(f"bad trigger {trigger!r} in fault {item!r}; write isr=<n> with n >= 1 (an ISR always "
                           "holds its leader)")
        fault = replace(fault, isr=int(m.group(6)))
    else:
        fault = replace(fault, batch=int(m.group(4)))
    for extra in extras:
        key, eq, value = extra.partition("=")
        if not eq:
            if extra not in POINTS:
                raise choices_error(f"point in fault {item!r}:", extra, POINTS)
            if not FAULTS[kind].points:
                points_ok = ", ".join(k for k, s in FAULTS.items() if s.points)
                raise LabError(f"fault {item!r}: named points apply to {points_ok}, not {kind}")
            fault = replace(fault, point=extra)
        elif key not in FAULTS[kind].options:
            raise choices_error(f"option in fault {item!r}:", key, FAULTS[kind].options or ("(none)",))
        elif key == "for":
            s = _SECONDS.match(value)
            if not s:
                raise LabError(f"bad duration {value!r} in fault {item!r}; write for=<seconds>s, e.g. for=3s")
            fault = replace(fault, duration_s=float(s.group(1)))
        elif key == "count":
            if not value.isdigit() or int(value) < 1:
                raise LabError(f"bad count {value!r} in fault {item!r}; write count=<n> with n >= 1")
            fault = replace(fault, count=int(value))
        else:
            raise choices_error(f"option in fault {item!r}:", key, ("for", "count"))
    if fault.point and fault.batch is None:
        raise LabError(f"fault {item!r}: a named point needs a batch trigger, e.g. {kind}@batch=2:{fault.point}")
    if FAULTS[kind].needs_batch and fault.batch is None:
        raise LabError(f"fault {item!r}: {kind} needs a batch trigger, e.g. {kind}@batch=2")
    return fault


def format_fault_plan(faults) -> str:
    """Render faults back to plan syntax."""
    return ",".join(f.to_text() for f in faults)


def plan_from_events(path) -> str:
    """The fault plan that replays the faults recorded in a run's ``events.jsonl``.

    Presses and time triggers replay at the same second of the run; faults
    fired at a named point replay at the same point of the same batch; task
    failures at the same batch; a fault an ISR fired (``isr=N``) once the ISR
    is that small again; a poison record's key poisons the same record again. ``lab run --faults-from`` uses this.

    Raises
    ------
    LabError
        When the file cannot be read or holds no fault.
    """
    import json
    from pathlib import Path

    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise LabError(f"cannot read fault log {str(path)!r}: {e.strerror}") from None
    faults = []
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            raise LabError(f"{str(path)!r} is not a run's events.jsonl (a line is not JSON)") from None
        if e.get("type") != ev.FAULT or e.get("kind") not in FAULT_KINDS:
            continue
        if e.get("point") and e.get("batch") is not None:
            f = Fault(e["kind"], batch=int(e["batch"]), point=e["point"])
        elif e["kind"] == "task-failure":
            f = Fault(e["kind"], batch=int(e["batch"]))
        elif FAULTS[e["kind"]].key_trigger:  # a poison: the same key again
            f = Fault(e["kind"], key=int(e["key"]), count=e.get("count"))
        elif e.get("isr_at_most") is not None:  # fired by an isr=N trigger: the same trigger again
            f = Fault(e["kind"], isr=int(e["isr_at_most"]), duration_s=float(e.get("duration_s") or 3.0))
        else:
            f = Fault(e["kind"], at_s=round(float(e.get("elapsed_s", 0.0)), 1),
                      duration_s=float(e.get("duration_s") or 3.0), count=e.get("count"))
        faults.append(replace(f, index=len(faults)))
    if not faults:
        raise LabError(f"no faults recorded in {str(path)!r}")
    return format_fault_plan(faults)
