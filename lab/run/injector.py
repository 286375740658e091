"""The fault injector: when a run's faults are due (its plan, panel presses), for the supervisor.

What each fault does is :mod:`lab.run.effects`'s, one function per fault kind: the injector decides when
(triggers, deferral while no driver is up, the restarts a kill schedules) and writes what was hit.

Protocol
--------
The supervisor owns the processes; the injector owns the plan. The supervisor
feeds it every timeline event (:meth:`FaultInjector.on_event`) and the clock
(:meth:`FaultInjector.tick`), and gives it one controls object
(:class:`lab.run.controls.RunControls`) for what only the supervisor may do:
kill or pause the driver's process group, say whether a driver is up, kill and
restart brokers, abort the producer's transactions. A fault fires on its trigger:

``at=Ns``          :meth:`tick` once ``N`` seconds of the run have passed;
``batch=N``        a ``batch-start`` event of batch ``N`` (faults without a point);
``batch=N:POINT``  a ``fault-point`` event: the driver waits at the point for its kill;
``isr=N``          a ``partition-state`` event of partition 0 with a leader and at most ``N``
                   replicas in sync (the run's :class:`lab.kafka.replication.ReplicationWatch`
                   polls every 0.5 s): the ISR has shrunk, whenever that happens.
``output=N``       :meth:`tick` once the run's output topic holds ``N`` records (its end offsets, looked at every
                   :data:`OUTPUT_POLL_S`): the output has got that far, however long the driver's start took.

Who carries a fault out is the catalogue's ``by`` (:mod:`lab.faults.catalogue`):
``supervisor`` faults are kills (the driver's group through the callback, an
executor JVM found in process trees the lab started, the broker's JVM, which
the supervisor restarts on its data after ``for=Ns``), ``proxy`` faults go to
the proxies' control ports (the controls' ``control_host``: the embedded broker's
proxy on 127.0.0.1, or the one ``LAB_KAFKA_PROXY`` names), ``producer`` faults
to the ledgered producer, ``timeline`` faults are the ``fault`` event itself
(the driver watches for it), ``driver`` faults are done by the pipeline, which
reports them with a ``fault`` event of its own (the injector then stops
waiting for them).

A kill due while no driver is up (after a crash, before the restarted driver
reported ``driver-ready``) is never logged against the dead driver: it is
recorded as ``fault-deferred`` and carried out as soon as the next driver is
ready. Every fault carried out is one ``fault`` event with what it hit (a PID,
the proxy's reply); one that cannot be carried out is a ``fault-not-applied``
event with the reason.

At the run's end the supervisor calls :meth:`FaultInjector.heal_proxy`: a proxy
fault this run started and that is still in effect (an ack loss whose ``count``
was not used up, a cut still running) is ended with ``{"cmd": "heal"}``, because
a proxy the run does not stop (``LAB_KAFKA_PROXY``'s, ``lab broker start``'s)
would otherwise carry it into the next run.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lab import events as ev
from lab.broker import proxy
from lab.errors import LabError, choices_error
from lab.faults.catalogue import FAULTS
from lab.faults.plan import Fault
from lab.run.effects import EFFECTS

#: Seconds between looks at the output topic's end offsets while an ``output=N`` trigger is pending.
OUTPUT_POLL_S = 0.2


class FaultInjector:
    """Fires a run's faults at their triggers.

    Parameters
    ----------
    config : lab.config.RunConfig
    events : lab.events.EventLog
        The supervisor's timeline writer.
    elapsed : callable
        Seconds since the run started.
    stream_elapsed : callable, optional
        Seconds since the run's producer started, or None before: what a time trigger (``at=Ns``) counts.
        The producer starts with the run, except for a pipeline ready when its job runs (the registry's
        ``ready_when_running``: flink, storm, samza), whose job takes seconds to start: a crash ``at=5s`` lands 5 s
        into the stream for every pipeline. Default: ``elapsed``.
    controls : lab.run.controls.RunControls
        What only the supervisor may do, and the proxies' control ports: the injector's hands on the run
        (:mod:`lab.run.controls`; a test gives a stand-in with the same methods).
    """

    def __init__(self, config, events, controls, *, elapsed: Callable[[], float],
                 stream_elapsed: Callable[[], float | None] | None = None) -> None:
        self.config = config
        self.events = events
        self.controls = controls
        self.elapsed = elapsed
        self.stream_elapsed = stream_elapsed or elapsed
        self._healed = False
        self.broker_restart_at: float | None = None  # time.monotonic() when a crashed broker restarts
        self.node_restarts: dict[int, float] = {}  # node -> time.monotonic() when its killed JVM restarts
        self.pending: list[Fault] = list(config.fault_plan)
        self.deferred: list[tuple[Fault, str, dict]] = []
        # Fired, not yet carried out by the pipeline: a consumer-crash waits for a consumer with records.
        self.awaiting: list[Fault] = []
        self._awaited_seq: dict[int, int | None] = {}  # id(fault) -> the record a pressed poison made poison
        self.fired: list[dict] = []
        self._next_output_look = 0.0

    @property
    def busy(self) -> bool:
        """True while a planned fault has not fired yet or the broker is down (a run is not drained then)."""
        return bool(self.pending or self.deferred or self.awaiting or self.broker_restart_at is not None
                    or self.node_restarts)

    def tick(self) -> None:
        """Fire the time-triggered faults that are due; restart a crashed broker when its time has come."""
        if self.broker_restart_at is not None and time.monotonic() >= self.broker_restart_at:
            self.broker_restart_at = None
            self.controls.restart_broker()
        for node, at in sorted(self.node_restarts.items()):
            if time.monotonic() >= at:
                del self.node_restarts[node]
                self.controls.restart_node(node)
        now = self.stream_elapsed()
        for fault in [f for f in self.pending if f.at_s is not None and now is not None and now >= f.at_s]:
            self.pending.remove(fault)
            self.apply(fault, source="plan")
        waiting = [f for f in self.pending if f.output is not None]
        if waiting and time.monotonic() >= self._next_output_look:
            self._next_output_look = time.monotonic() + OUTPUT_POLL_S
            records = self.controls.output_records()
            for fault in [f for f in waiting if records >= f.output]:
                self.pending.remove(fault)
                self.apply(fault, source="plan", output_records=records)

    def on_event(self, event: dict) -> None:
        """React to one timeline event (batch and point triggers, a driver ready, a driver's own fault)."""
        kind = event.get("type")
        if kind == ev.FAULT_POINT:
            fault = next((f for f in self.config.fault_plan if f.index == event.get("index")), None)
            if fault is not None:
                if fault in self.pending:
                    self.pending.remove(fault)
                self.apply(fault, source="plan", batch=event.get("batch"))
        elif kind == ev.BATCH_START:
            for fault in [f for f in self.pending if f.batch == event.get("batch") and f.point is None
                          and FAULTS[f.kind].by != "driver"]:
                self.pending.remove(fault)
                self.apply(fault, source="plan", batch=event.get("batch"))
        elif kind == ev.PARTITION_STATE and event.get("partition") == 0 and event.get("leader") is not None:
            # A condition, not a time: how long held followers take to leave the ISR varies (replica.lag.time.max.ms
            # plus up to half of it, more on a loaded machine; seen by the watch 3.4-6.5 s after the hold, median
            # 4.0 s, in 64 matrix runs), and a kill timed before it fails over to an in-sync follower: no loss.
            isr = list(event.get("isr") or ())
            for fault in [f for f in self.pending if f.isr is not None and isr and len(isr) <= f.isr]:
                self.pending.remove(fault)
                self.apply(fault, source="plan", isr=isr)
        elif kind == ev.DRIVER_READY:
            due, self.deferred = self.deferred, []
            for fault, source, context in due:
                self.apply(fault, source=source, **context)
        elif kind in {FAULTS[f.kind].confirmed_by for f in self.awaiting}:
            # Every press has index -1: a pressed poison is told from another by the event it made poison.
            done = next((f for f in self.awaiting if f.index == event.get("index")
                         and FAULTS[f.kind].confirmed_by == kind
                         and self._awaited_seq.get(id(f)) in (None, event.get("seq"))), None)
            if done is not None:
                self.awaiting.remove(done)
                self._awaited_seq.pop(id(done), None)
        elif kind == ev.FAULT and event.get("source") == "driver":
            # A fault the pipeline carries out itself (task-failure) is no longer pending once
            # it reports it; left in the plan, it would keep the run from ever draining.
            self.pending[:] = [f for f in self.pending if f.index != event.get("index")]

    def inject(self, kind: str, *, source: str = "ui", **options) -> dict:
        """Carry out a fault now (a panel press); see :meth:`lab.run.supervisor.Run.inject`."""
        if kind not in FAULTS:
            raise choices_error("fault kind", kind, FAULTS)
        fault = Fault(kind=kind, at_s=round(self.elapsed(), 3), index=options.pop("index", -1), **options)
        self.config.check_fault(fault)
        if FAULTS[kind].by == "driver" and not FAULTS[kind].button:
            raise LabError(f"fault {kind!r} is carried out by the pipeline at a batch; plan it: {kind}@batch=<n>")
        return self.apply(fault, source=source)

    def apply(self, fault: Fault, source: str, **context) -> dict:
        """Carry out ``fault`` now, or defer it when it needs a driver and none is up.

        Returns the ``fault`` event written (or the ``fault-deferred`` one).
        """
        info = {"index": fault.index, "kind": fault.kind, "elapsed_s": round(self.elapsed(), 3),
                "batch": context.get("batch", fault.batch), "point": fault.point}
        if "isr" in context:  # the ISR that fired an isr=N trigger, and N (what a replay plans again)
            info.update(isr=context["isr"], isr_at_most=fault.isr)
        if "output_records" in context:  # the records that fired an output=N trigger, and N
            info.update(output_records=context["output_records"], output_at_least=fault.output)
        if fault.kind in ("driver-crash", "driver-pause", "executor-crash") and not self.controls.driver_up():
            self.deferred.append((fault, source, {**context, "deferred_at": time.monotonic()}))
            return self.events.write(ev.FAULT_DEFERRED, **info, by=source,
                                     reason="no driver is up (it is being restarted); applied when the next one is "
                                            "ready")
        effect = EFFECTS.get(fault.kind)
        if effect is None:
            raise LabError(f"fault {fault.kind!r} is carried out by the pipeline itself, not the supervisor")
        then = effect(self, fault, info)
        try:
            if "deferred_at" in context:
                info["deferred_s"] = round(time.monotonic() - context["deferred_at"], 3)
            self.fired.append({**info, "source": source})
            if FAULTS[fault.kind].confirmed_by:
                self.awaiting.append(fault)
                self._awaited_seq[id(fault)] = info.get("seq")
            return self.events.write(ev.FAULT, **info, by=source)
        finally:
            if then is not None:  # once the event is written (or could not be): the effect's second half
                then()

    def restart_broker_in(self, seconds: float) -> None:
        """Have :meth:`tick` restart the killed broker ``seconds`` from now."""
        self.broker_restart_at = time.monotonic() + seconds

    def restart_node_in(self, node: int, seconds: float) -> None:
        """Have :meth:`tick` restart cluster broker ``node`` ``seconds`` from now."""
        self.node_restarts[node] = time.monotonic() + seconds

    def not_applied(self, why: str | None) -> None:
        """At the run's end: a ``fault-not-applied`` event for every fault left deferred, awaiting or pending
        (``why``: the end's reason, added to each, e.g. that no batch started for a while)."""
        why = why or ""
        for fault, source, _ in self.deferred:
            self.events.write(ev.FAULT_NOT_APPLIED, index=fault.index, kind=fault.kind, by=source,
                              reason="no driver became ready again before the run ended")
        for fault in self.awaiting:  # fired, but the pipeline found nothing to act on (no consumer got records)
            self.events.write(ev.FAULT_NOT_APPLIED, index=fault.index, kind=fault.kind, by="plan",
                              reason=f"the pipeline never carried it out ({FAULTS[fault.kind].confirmed_by} never "
                                     f"came) before the run ended{why}")
        for fault in self.pending:  # e.g. a batch the pipeline never reached: the run is not drained
            self.events.write(ev.FAULT_NOT_APPLIED, index=fault.index, kind=fault.kind, by="plan",
                              reason=f"its trigger ({fault.to_text()}) never came before the run ended{why}")

    def heal_proxy(self) -> dict | None:
        """End any proxy fault still in effect, if this run fired one; at most once per run.

        Only after a proxy fault of this run: a proxy shared by runs at the same
        time (one stack, two notebooks) keeps another run's fault otherwise.

        Returns
        -------
        dict or None
            The proxy's reply; None when nothing was sent or the proxy did not answer
            (a proxy that is gone holds no fault; one that stays unreachable fails the
            next run's start, :func:`lab.broker.external.check_proxy`).
        """
        if (self._healed or not self.controls.client_controls
            or not any(FAULTS[f["kind"]].by == "proxy" for f in self.fired)):
            return None
        self._healed = True
        replies = []
        for port in (*self.controls.client_controls, *self.controls.replication_controls):
            try:
                replies.append(proxy.control(port, {"cmd": "heal"}, timeout_s=2.0, host=self.controls.control_host))
            except (OSError, ValueError):
                pass
        return replies[0] if replies else None
