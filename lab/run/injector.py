"""The fault injector: when a run's faults are due (its plan, panel presses), for the supervisor.

What each fault does is :mod:`lab.run.effects`'s, one function per fault kind: the injector decides when
(triggers, deferral while no driver is up, the restarts a kill schedules) and writes what was hit.

Protocol
--------
The supervisor owns the processes; the injector owns the plan. The supervisor
feeds it every timeline event (:meth:`FaultInjector.on_event`) and the clock
(:meth:`FaultInjector.tick`), and gives it callbacks for what only the
supervisor may do: kill the driver's process group and say whether a driver is
up. A fault fires on its trigger:

``at=Ns``          :meth:`tick` once ``N`` seconds of the run have passed;
``batch=N``        a ``batch-start`` event of batch ``N`` (faults without a point);
``batch=N:POINT``  a ``fault-point`` event: the driver waits at the point for its kill;
``isr=N``          a ``partition-state`` event of partition 0 with a leader and at most ``N``
                   replicas in sync (the run's :class:`lab.kafka.replication.ReplicationWatch`
                   polls every 0.5 s): the ISR has shrunk, whenever that happens.

Who carries a fault out is the catalogue's ``by`` (:mod:`lab.faults.catalogue`):
``supervisor`` faults are kills (the driver's group through the callback, an
executor JVM found in process trees the lab started, the broker's JVM, which
the supervisor restarts on its data after ``for=Ns``), ``proxy`` faults go to
the proxy's control port (``control_host:control_port``: the embedded broker's
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
from typing import Callable

from lab import events as ev
from lab.broker import proxy
from lab.errors import LabError, choices_error
from lab.faults.plan import Fault
from lab.faults.catalogue import FAULTS
from lab.run.effects import EFFECTS


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
    kill_driver : callable
        SIGKILLs the driver's process group and schedules its restart; returns the PID killed.
    driver_up : callable
        True when a driver process runs and it is not being restarted.
    kill_executor : callable
        SIGKILLs one executor JVM; returns its PID, or ``None`` when there is none.
    control_port : int or None
        The proxy's control port (``None``: no proxy, e.g. ``LAB_KAFKA_BOOTSTRAP`` without ``LAB_KAFKA_PROXY``).
    control_host : str
        The host of that control port: 127.0.0.1 for the embedded broker's proxy.
    kill_broker : callable, optional
        ``kill_broker()`` SIGKILLs the broker's JVM; returns the PID killed. The injector restarts it
        ``for=Ns`` later (:meth:`tick`).
    restart_broker : callable, optional
        Starts the killed broker's JVM again on its data (called ``for=Ns`` after a broker-crash).
    abort_transactions : callable, optional
        ``abort_transactions(count)``: the producer aborts its next ``count`` transactions.
    client_controls, replication_controls : tuple of int
        A cluster's proxies (:mod:`lab.broker.cluster`): client faults go to every
        client proxy, ``follower-lag`` to every replication proxy.
    pause_driver : callable, optional
        ``pause_driver(duration_s)`` SIGSTOPs the driver's process group; the supervisor continues it (or sets it
        aside for a replacement) and returns what the fault's event records (``pid``, ``on_pause``).
    kill_leader : callable, optional
        ``kill_leader()`` SIGKILLs the broker leading the run topic's partition 0;
        returns ``{"node", "pid", "leads"}``, or ``None`` when no leader is known.
    cut_output_leader : callable, optional
        ``cut_output_leader(seconds)`` cuts the client proxy of a broker leading an output partition, not the
        transaction coordinator (:func:`lab.broker.cluster.cut_output_leader`).
    restart_node : callable, optional
        ``restart_node(node)`` starts that broker again on its data (``for=Ns`` after a leader-crash).
    """

    def __init__(self, config, events, *, elapsed: Callable[[], float],
                 stream_elapsed: Callable[[], float | None] | None = None, kill_driver: Callable[[], int | None],
                 driver_up: Callable[[], bool], kill_executor: Callable[[], int | None],
                 control_port: int | None, kill_broker: Callable[[], int | None] | None = None,
                 restart_broker: Callable[[], None] | None = None,
                 abort_transactions: Callable[[int], dict] | None = None,
                 control_host: str = "127.0.0.1", client_controls: tuple = (), replication_controls: tuple = (),
                 kill_leader: Callable[[], dict | None] | None = None,
                 pause_driver: Callable[[float], dict] | None = None,
                 restart_node: Callable[[int], None] | None = None,
                 cut_output_leader: Callable[[float], dict] | None = None) -> None:
        self.config = config
        self.events = events
        self.elapsed = elapsed
        self.stream_elapsed = stream_elapsed or elapsed
        self.kill_driver = kill_driver
        self.driver_up = driver_up
        self.kill_executor = kill_executor
        self.control_port = control_port
        self.control_host = control_host
        self._healed = False
        self.kill_broker = kill_broker
        self.restart_broker = restart_broker
        self.broker_restart_at: float | None = None  # time.monotonic() when a crashed broker restarts
        self.abort_transactions = abort_transactions
        self.client_controls = tuple(client_controls) or ((control_port,) if control_port is not None else ())
        self.replication_controls = tuple(replication_controls)
        self.kill_leader = kill_leader
        self.pause_driver = pause_driver
        self.restart_node = restart_node
        self.cut_output_leader = cut_output_leader
        self.node_restarts: dict[int, float] = {}  # node -> time.monotonic() when its killed JVM restarts
        self.pending: list[Fault] = list(config.fault_plan)
        self.deferred: list[tuple[Fault, str, dict]] = []
        # Fired, not yet carried out by the pipeline: a consumer-crash waits for a consumer with records.
        self.awaiting: list[Fault] = []
        self.fired: list[dict] = []

    @property
    def busy(self) -> bool:
        """True while a planned fault has not fired yet or the broker is down (a run is not drained then)."""
        return bool(self.pending or self.deferred or self.awaiting or self.broker_restart_at is not None
                    or self.node_restarts)

    def tick(self) -> None:
        """Fire the time-triggered faults that are due; restart a crashed broker when its time has come."""
        if self.broker_restart_at is not None and time.monotonic() >= self.broker_restart_at:
            self.broker_restart_at = None
            self.restart_broker()
        for node, at in sorted(self.node_restarts.items()):
            if time.monotonic() >= at:
                del self.node_restarts[node]
                self.restart_node(node)
        now = self.stream_elapsed()
        for fault in [f for f in self.pending if f.at_s is not None and now is not None and now >= f.at_s]:
            self.pending.remove(fault)
            self.apply(fault, source="plan")

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
            done = next((f for f in self.awaiting if f.index == event.get("index")
                         and FAULTS[f.kind].confirmed_by == kind), None)
            if done is not None:
                self.awaiting.remove(done)
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
        if FAULTS[kind].by == "driver":
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
        if fault.kind in ("driver-crash", "driver-pause", "executor-crash") and not self.driver_up():
            self.deferred.append((fault, source, {**context, "deferred_at": time.monotonic()}))
            return self.events.write(ev.FAULT_DEFERRED, **info, by=source,
                                     reason="no driver is up (it is being restarted); applied when the next one is ready")
        effect = EFFECTS.get(fault.kind)
        if effect is None:
            raise LabError(f"fault {fault.kind!r} is carried out by the pipeline itself, not the supervisor")
        effect(self, fault, info)
        if "deferred_at" in context:
            info["deferred_s"] = round(time.monotonic() - context["deferred_at"], 3)
        self.fired.append({**info, "source": source})
        if FAULTS[fault.kind].confirmed_by:
            self.awaiting.append(fault)
        return self.events.write(ev.FAULT, **info, by=source)

    def restart_broker_in(self, seconds: float) -> None:
        """Have :meth:`tick` restart the killed broker ``seconds`` from now."""
        self.broker_restart_at = time.monotonic() + seconds

    def restart_node_in(self, node: int, seconds: float) -> None:
        """Have :meth:`tick` restart cluster broker ``node`` ``seconds`` from now."""
        self.node_restarts[node] = time.monotonic() + seconds

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
        if self._healed or not self.client_controls or not any(FAULTS[f["kind"]].by == "proxy" for f in self.fired):
            return None
        self._healed = True
        replies = []
        for port in (*self.client_controls, *self.replication_controls):
            try:
                replies.append(proxy.control(port, {"cmd": "heal"}, timeout_s=2.0, host=self.control_host))
            except (OSError, ValueError):
                pass
        return replies[0] if replies else None
