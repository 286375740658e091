"""Fault plans: which real failure to inject, and when.

Syntax, several faults separated by commas::

    KIND@TRIGGER[:POINT][:OPTION=VALUE...]

``TRIGGER`` is ``at=<seconds>s`` (time since the run started) or
``batch=<n>`` (when the pipeline reaches batch ``n``). ``POINT`` names the
place inside a batch where a driver crash happens; it makes a run
reproducible because the crash waits for the pipeline to reach that exact
place. Options: ``for=<seconds>s`` (how long a broker outage or ack loss
lasts), ``count=<n>`` (how many produce responses an ack loss drops).

Examples: ``driver-crash@at=5s``,
``driver-crash@batch=3:after-output-before-commit``,
``broker-outage@at=4s:for=3s``, ``ack-loss@at=1s:count=5``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from lab import events as ev
from lab.errors import LabError, choices_error

#: Every fault the lab knows, with what really happens.
FAULT_KINDS = {
    "driver-crash": "SIGKILL to the pipeline driver's process group (Python and JVM); the supervisor restarts it",
    "executor-crash": "SIGKILL to one executor JVM (local-cluster or a cluster)",
    "task-failure": "one Spark task raises once after writing part of its rows; Spark retries it",
    "receiver-restart": "the receiver's connection drops",
    "broker-outage": "the lab's proxy refuses and cuts client connections for a while",
    "ack-loss": "the lab's proxy forwards produce requests and drops their responses",
}

#: Named places inside a batch where a driver crash can be made to happen.
POINTS = {
    "after-offset-log": "the batch is planned and its offsets logged; output has not started",
    "mid-output": "part of the batch's rows are written",
    "after-output-before-commit": "the sink returned; the batch is not yet marked done",
    "after-commit-before-output": "offsets are committed; output has not started",
    "after-wal-before-ack": "the receiver's block is in the write-ahead log; the source is not yet acknowledged",
}

#: Faults carried out by the supervisor or the proxy; the others need a pipeline's cooperation.
CONTROL_PLANE_FAULTS = ("driver-crash", "executor-crash", "broker-outage", "ack-loss", "receiver-restart")

_TRIGGER = re.compile(r"^(at)=(\d+(?:\.\d+)?)s$|^(batch)=(\d+)$")
_SECONDS = re.compile(r"^(\d+(?:\.\d+)?)s$")


@dataclass(frozen=True)
class Fault:
    """One planned fault.

    Attributes
    ----------
    kind : str
        One of :data:`FAULT_KINDS`.
    at_s : float or None
        Seconds after the run started, for a time trigger.
    batch : int or None
        Batch number, for a progress trigger.
    point : str or None
        Named point inside the batch (see :data:`POINTS`).
    duration_s : float
        How long an outage or an ack loss lasts.
    count : int or None
        How many produce responses an ack loss drops (``None``: all within ``duration_s``).
    index : int
        Position in the plan; identifies the fault in the run's events.
    """

    kind: str
    at_s: float | None = None
    batch: int | None = None
    point: str | None = None
    duration_s: float = 3.0
    count: int | None = None
    index: int = 0

    def to_text(self) -> str:
        """Render the fault in plan syntax (parsing it gives the same fault)."""
        trigger = f"at={self.at_s:g}s" if self.at_s is not None else f"batch={self.batch}"
        parts = [f"{self.kind}@{trigger}"]
        if self.point:
            parts.append(self.point)
        if self.kind in ("broker-outage", "ack-loss"):
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
        raise choices_error("fault", kind, FAULT_KINDS)
    if not sep or not rest:
        raise LabError(
            f"fault {item!r} has no trigger; write {kind}@at=<seconds>s or {kind}@batch=<n>"
        )
    trigger, *extras = rest.split(":")
    m = _TRIGGER.match(trigger)
    if not m:
        raise LabError(
            f"bad trigger {trigger!r} in fault {item!r}; valid: at=<seconds>s (e.g. at=5s) or batch=<n> (e.g. batch=3)"
        )
    fault = Fault(kind=kind, index=index)
    if m.group(1):
        fault = replace(fault, at_s=float(m.group(2)))
    else:
        fault = replace(fault, batch=int(m.group(4)))
    for extra in extras:
        key, eq, value = extra.partition("=")
        if not eq:
            if extra not in POINTS:
                raise choices_error(f"point in fault {item!r}:", extra, POINTS)
            if kind not in ("driver-crash", "task-failure"):
                raise LabError(f"fault {item!r}: named points apply to driver-crash and task-failure, not {kind}")
            fault = replace(fault, point=extra)
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
    if kind == "task-failure" and fault.batch is None:
        raise LabError(f"fault {item!r}: task-failure needs a batch trigger, e.g. task-failure@batch=2")
    return fault


def format_fault_plan(faults) -> str:
    """Render faults back to plan syntax."""
    return ",".join(f.to_text() for f in faults)


def plan_from_events(path) -> str:
    """The fault plan that replays the faults recorded in a run's ``events.jsonl``.

    Presses and time triggers replay at the same second of the run; faults
    fired at a named point replay at the same point of the same batch; task
    failures at the same batch. ``lab run --faults-from`` uses this.

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
        else:
            f = Fault(e["kind"], at_s=round(float(e.get("elapsed_s", 0.0)), 1),
                      duration_s=float(e.get("duration_s") or 3.0), count=e.get("count"))
        faults.append(replace(f, index=len(faults)))
    if not faults:
        raise LabError(f"no faults recorded in {str(path)!r}")
    return format_fault_plan(faults)
