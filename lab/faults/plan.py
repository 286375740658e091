"""Fault plans: which real failure to inject, and when; a plan checked against :mod:`lab.faults.catalogue`.

Syntax, several faults separated by commas::

    KIND@TRIGGER[:POINT][:OPTION=VALUE...]

``TRIGGER`` is ``at=<seconds>s`` (time since the run's producer started: the run's start, except for
the pipelines whose producer waits for their job to run, flink, storm and samza),
``batch=<n>`` (when the pipeline reaches batch ``n``), for ``driver-crash`` and ``driver-pause`` of a run that writes
an output topic ``output=<n>`` (once that topic's log holds ``n`` records: where the output stands, whenever the
driver's query got there), for ``poison`` only ``key=<n>`` (the first
record of event key ``k<nn>`` is poison; ``count=N``: its first N; ``nth=I``: from its I-th on) or, for
``leader-crash`` only, ``isr=<n>`` (once partition 0's in-sync replicas are ``n`` or fewer, as
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

import re
from dataclasses import dataclass, replace

from lab import events as ev
from lab.errors import LabError, choices_error
from lab.faults.catalogue import FAULT_KINDS, FAULTS, KEYS, PAUSE_REPLACE_AFTER_S, POINTS, event_keys, on_pause_mode

_TRIGGER = re.compile(r"^(at)=(\d+(?:\.\d+)?)s$|^(batch)=(\d+)$|^(isr)=(\d+)$|^(key)=(\d+)$|^(output)=(\d+)$")
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
    output : int or None
        For a condition trigger: fire once the run's output topic holds this many records.
    key : int or None
        For ``poison``: the event key ``k<nn>`` whose records are poison.
    nth : int or None
        For ``poison``: the first poison record is the key's ``nth`` event (1, the first, when ``None``); the
        replay of a press names its record so.
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
    output: int | None = None
    key: int | None = None
    nth: int | None = None
    index: int = 0

    def to_text(self) -> str:
        """Render the fault in plan syntax (parsing it gives the same fault)."""
        trigger = (f"at={self.at_s:g}s" if self.at_s is not None else f"isr={self.isr}" if self.isr is not None
                   else f"output={self.output}" if self.output is not None
                   else f"key={self.key}" if self.key is not None else f"batch={self.batch}")
        parts = [f"{self.kind}@{trigger}"]
        if self.point:
            parts.append(self.point)
        if "for" in FAULTS[self.kind].options:
            parts.append(f"for={self.duration_s:g}s")
        if self.nth is not None:
            parts.append(f"nth={self.nth}")
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
            f", for {', '.join(k for k, s in FAULTS.items() if s.output_trigger)}, output=<n> (e.g. output=1500)"
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
            raise LabError(f"bad trigger {trigger!r} in fault {item!r}; the producer's keys are k00 to "
                           f"k{KEYS - 1:02d}: write key=<n> with n from 0 to {KEYS - 1}")
        fault = replace(fault, key=int(m.group(8)))
    elif m.group(1):
        fault = replace(fault, at_s=float(m.group(2)))
    elif m.group(5):
        fault = replace(fault, isr=_condition(kind, item, trigger, "isr", int(m.group(6)), " (an ISR always holds "
                                                                                         "its leader)"))
    elif m.group(9):
        fault = replace(fault, output=_condition(kind, item, trigger, "output", int(m.group(10))))
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
        elif key in ("count", "nth"):
            if not value.isdigit() or int(value) < 1:
                raise LabError(f"bad {key} {value!r} in fault {item!r}; write {key}=<n> with n >= 1")
            fault = replace(fault, **{key: int(value)})
        else:
            raise choices_error(f"option in fault {item!r}:", key, ("for", "count", "nth"))
    if fault.point and fault.batch is None:
        raise LabError(f"fault {item!r}: a named point needs a batch trigger, e.g. {kind}@batch=2:{fault.point}")
    if FAULTS[kind].needs_batch and fault.batch is None:
        raise LabError(f"fault {item!r}: {kind} needs a batch trigger, e.g. {kind}@batch=2")
    return fault


def _condition(kind: str, item: str, trigger: str, name: str, n: int, why_one: str = "") -> int:
    """``n`` of a condition trigger ``<name>=<n>`` (``isr``, ``output``), checked: one the fault kind takes
    (its catalogue entry's ``<name>_trigger``), with n >= 1."""
    if not getattr(FAULTS[kind], f"{name}_trigger"):
        ok = ", ".join(k for k, s in FAULTS.items() if getattr(s, f"{name}_trigger"))
        raise LabError(f"fault {item!r}: the {name}=<n> trigger applies to {ok}, not {kind}; "
                       f"write {kind}@at=<seconds>s or {kind}@batch=<n>")
    if n < 1:
        raise LabError(f"bad trigger {trigger!r} in fault {item!r}; write {name}=<n> with n >= 1{why_one}")
    return n


def unmet(name: str, config, requirements: dict) -> str | None:
    """Why ``config``'s run cannot carry out the fault kind or named point ``name``, or ``None``: the catalogue's
    own need (``requires``), then the engines' (``requirements``: name -> ``requires(config)``)."""
    spec = FAULTS.get(name)
    why = spec is not None and spec.requires is not None and spec.requires(config)
    return why or (requirements[name](config) if name in requirements else None)


def check_fault(fault: Fault, config, pipeline, pipelines: dict, requirements: dict) -> None:
    """Raise :class:`LabError` when ``config``'s run cannot carry out ``fault``.

    Checks the catalogue and the run's registry entry ``pipeline`` (``pipelines``: the registry): the fault
    applies to the pipeline, its point exists in it, and the run's settings meet the fault's and the point's
    needs (``requirements``: the engines' own, name -> ``requires(config)``). Needs nothing but the config, so it
    runs before any process starts.
    """
    if fault.kind not in pipeline.faults:
        raise LabError(f"fault {fault.kind!r} does not apply to pipeline {config.pipeline!r}; "
                       f"valid for it: {', '.join(pipeline.faults)}")
    if fault.point:
        if fault.point not in pipeline.points:
            raise LabError(f"point {fault.point!r} does not exist in pipeline {config.pipeline!r}; "
                           f"valid points: {', '.join(pipeline.points)}")
        why = unmet(fault.point, config, requirements)
        if why:
            raise LabError(why)
    why = unmet(fault.kind, config, requirements)
    if why:
        raise LabError(why)
    if fault.kind == "driver-pause" and on_pause_mode(config, pipeline) == "replace" and pipeline.pause_replace is None:
        raise LabError(f"--on-pause replace runs two drivers at once, which pipeline {config.pipeline!r} cannot (they "
                       f"would share its local state); valid pipelines for it: "
                       f"{', '.join(n for n, p in pipelines.items() if p.pause_replace)}; or use --on-pause wait")
    if (fault.kind == "driver-pause" and on_pause_mode(config, pipeline) == "replace"
        and fault.duration_s <= PAUSE_REPLACE_AFTER_S):
        raise LabError(f"fault {fault.to_text()!r}: with --on-pause replace the pause must outlast the "
                       f"{PAUSE_REPLACE_AFTER_S:g} s after which its replacement starts; valid: for=<n>s with n > "
                       f"{PAUSE_REPLACE_AFTER_S:g}")
    if fault.output is not None:
        if config.sink != "topic":
            raise LabError(f"fault {fault.to_text()!r}: output=<n> counts the records of the run's output topic, and "
                           f"--sink {config.sink} writes none; valid: --sink topic")
        if fault.output >= config.events:
            raise LabError(f"fault {fault.to_text()!r}: the output topic would hold {fault.output} records only after "
                           f"every one of the {config.events} events; valid: output=<n> with n < --events")
    nodes = config.cluster.nodes
    if fault.isr is not None and fault.isr >= nodes:
        # Every replica is in sync when the topic is created: the trigger would fire at once.
        raise LabError(f"fault {fault.to_text()!r}: isr={fault.isr} must be below the replica count ({nodes}); "
                       f"valid: isr=1 to isr={nodes - 1}")


def check_plan(faults, config, pipeline, pipelines: dict, requirements: dict) -> None:
    """:func:`check_fault` for every fault of a plan."""
    for fault in faults:
        check_fault(fault, config, pipeline, pipelines, requirements)


def poison_seqs(fault: Fault, seed: int, events: int) -> list[int]:
    """The sequence numbers a ``poison@key=<n>[:nth=<i>][:count=<c>]`` fault makes poison: ``c`` (1) events of key
    ``k<nn>``, from its ``i``-th (the first)."""
    key = f"k{fault.key:02d}"
    first = (fault.nth or 1) - 1
    return [seq for seq, k in enumerate(event_keys(seed, events)) if k == key][first:first + (fault.count or 1)]


def format_fault_plan(faults) -> str:
    """Render faults back to plan syntax."""
    return ",".join(f.to_text() for f in faults)


def plan_from_events(path) -> str:
    """The fault plan that replays the faults recorded in a run's ``events.jsonl``.

    Presses and time triggers replay at the same second of the run; faults
    fired at a named point replay at the same point of the same batch; task
    failures at the same batch; a fault an ISR fired (``isr=N``) once the ISR
    is that small again; one the output fired (``output=N``) once the output
    holds as much again; a poison record's key poisons the same record again.
    ``lab run --faults-from`` uses this.

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
            f = Fault(e["kind"], batch=int(e["batch"]), point=e["point"], duration_s=float(e.get("duration_s") or 3.0))
        elif e["kind"] == "task-failure":
            f = Fault(e["kind"], batch=int(e["batch"]))
        elif FAULTS[e["kind"]].key_trigger:  # a poison: the same record again (a press's: by its place in its key)
            f = Fault(e["kind"], key=int(e["key"]), nth=e.get("nth"), count=e.get("count"))
        elif e.get("isr_at_most") is not None:  # fired by an isr=N trigger: the same trigger again
            f = Fault(e["kind"], isr=int(e["isr_at_most"]), duration_s=float(e.get("duration_s") or 3.0))
        elif e.get("output_at_least") is not None:  # fired by an output=N trigger: the same trigger again
            f = Fault(e["kind"], output=int(e["output_at_least"]), duration_s=float(e.get("duration_s") or 3.0))
        else:
            f = Fault(e["kind"], at_s=round(float(e.get("elapsed_s", 0.0)), 1),
                      duration_s=float(e.get("duration_s") or 3.0), count=e.get("count"))
        faults.append(replace(f, index=len(faults)))
    if not faults:
        raise LabError(f"no faults recorded in {str(path)!r}")
    return format_fault_plan(faults)
