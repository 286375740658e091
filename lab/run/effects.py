"""What each fault does: one effect per fault kind, for :class:`lab.run.injector.FaultInjector`.

An effect carries a fault out now and adds what it hit to the fault's event (``info``): a PID, the proxy's
reply, the producer's answer, or a ``reason`` it could not. An effect may return a function the injector calls
once that event is written (``poison``: the producer waits for it). When a fault is due is the injector's business;
the processes an effect acts on are found where they live (:mod:`lab.spark.executors`, :mod:`lab.broker.cluster`,
the proxy's control port). A new fault kind is its catalogue entry (:mod:`lab.faults.catalogue`) and an effect here.
Effects of the pipeline's own faults (``task-failure``) are the driver's; ``timeline`` faults are the event.
"""

from __future__ import annotations

from lab.broker import proxy
from lab.errors import LabError
from lab.faults.plan import Fault


def driver_crash(inj, fault: Fault, info: dict) -> None:
    info["pid"] = inj.controls.kill_driver()


def driver_pause(inj, fault: Fault, info: dict) -> None:
    info.update(duration_s=fault.duration_s, **inj.controls.pause_driver(fault.duration_s))


def executor_crash(inj, fault: Fault, info: dict) -> None:
    info["pid"] = inj.controls.kill_executor()
    if info["pid"] is None:
        info["reason"] = "no executor JVM found under the driver or the lab's cluster workers"


def broker_crash(inj, fault: Fault, info: dict) -> None:
    info.update(duration_s=fault.duration_s, pid=None)
    if inj.broker_restart_at is not None:
        info["reason"] = "the broker was already down (an earlier broker-crash had not restarted it yet)"
    else:
        info["pid"] = inj.controls.kill_broker()
        inj.restart_broker_in(fault.duration_s)


def leader_crash(inj, fault: Fault, info: dict) -> None:
    info.update(duration_s=fault.duration_s)
    hit = inj.controls.kill_leader()
    if hit is None:
        info.update(pid=None, reason="no broker leads partition 0 now (it is being elected, or is down)")
    else:
        info.update(hit)
        inj.restart_node_in(hit["node"], fault.duration_s)


def leader_unreachable(inj, fault: Fault, info: dict) -> None:
    info.update(duration_s=fault.duration_s)
    info.update(inj.controls.cut_output_leader(fault.duration_s))


def txn_abort(inj, fault: Fault, info: dict) -> None:
    info.update(count=fault.count or 1, producer=inj.controls.abort_transactions(fault.count or 1))


def proxy_fault(inj, fault: Fault, info: dict) -> None:
    info.update(duration_s=fault.duration_s, count=fault.count, proxy=_proxy_message(inj, fault))


#: poison pressed on the panel: how many sends past the producer's next one the poisoned event lies (the producer
#: stops before it until the press's ``fault`` event is written). The share consumers read the timeline when a poll
#: returns records, so no consumer can get the record before it can know it is poison.
POISON_AHEAD = 10


def poison_next(inj, fault: Fault, info: dict):
    """poison (a panel press): an event the producer has not sent yet becomes poison; the ``fault`` event names it
    (``seq``, ``key``, ``nth``: ``poison@key=<key>:nth=<nth>`` replays it) and the share consumers treat it as a
    planned poison record. Returns what lets the producer go on, for the injector to call once the event is written.
    """
    info.update(inj.controls.hold_unsent(POISON_AHEAD))
    return inj.controls.release_producer


def timeline_fault(inj, fault: Fault, info: dict) -> None:
    """Nothing to do: the ``fault`` event the injector writes is the fault (the driver watches for it)."""


#: The effect of each fault kind the supervisor's side carries out.
EFFECTS = {
    "driver-crash": driver_crash,
    "driver-pause": driver_pause,
    "executor-crash": executor_crash,
    "broker-crash": broker_crash,
    "leader-crash": leader_crash,
    "txn-abort": txn_abort,
    "broker-outage": proxy_fault,
    "ack-loss": proxy_fault,
    "follower-lag": proxy_fault,
    "leader-unreachable": leader_unreachable,
    "receiver-restart": timeline_fault,
    "consumer-crash": timeline_fault,
    "poison": poison_next,
}


def _proxy_message(inj, fault: Fault) -> dict:
    if not inj.controls.client_controls:
        raise LabError(f"fault {fault.kind!r} needs the lab's proxy: unset LAB_KAFKA_BOOTSTRAP for the embedded "
                       "broker's, or set LAB_KAFKA_PROXY to the control address of a proxy in front of it")
    ports = inj.controls.client_controls
    if fault.kind == "broker-outage":
        message = {"cmd": "cut", "seconds": fault.duration_s}
    elif fault.kind == "follower-lag":
        message, ports = {"cmd": "hold", "seconds": fault.duration_s}, inj.controls.replication_controls
    else:
        message = {"cmd": "ack_loss", "seconds": fault.duration_s, "count": fault.count}
    replies = [proxy.control(port, message, host=inj.controls.control_host) for port in ports]
    # One proxy's reply, as before; a cluster's others say the same (their counters differ).
    return {**replies[0], "proxies": len(replies)} if len(replies) > 1 else replies[0]
