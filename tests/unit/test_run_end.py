"""When a run may end (lab.run.end): the no-more-batches rule fires only when no batch can come.

Pure apart from the topic's end offsets and the ledger, which are replaced by
fixed values; the clock is a fake one the tests move.
"""

from types import SimpleNamespace

import pytest

from lab import events as ev
from lab.faults.plan import parse_fault_plan
from lab.run import end as run_end

END = {0: 10, 1: 10}
PAST = {"positions": {0: 10, 1: 10}, "attempt": 1}


class Clock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(run_end, "time", c)
    monkeypatch.setattr(run_end.kafka_tools, "end_offsets", lambda bootstrap, topic, partitions: dict(END))
    monkeypatch.setattr(run_end, "max_acked_offsets", lambda path: {0: 9, 1: 9})
    return c


def driver(attempt=1, started_at=1000.0):
    return SimpleNamespace(attempt=attempt, started_at=started_at, alive=lambda: True)


def faults(plan="driver-crash@batch=6:mid-output"):
    pending = list(parse_fault_plan(plan)) if plan else []
    return SimpleNamespace(pending=pending, deferred=[], awaiting=[], broker_restart_at=None, node_restarts={},
                           busy=bool(pending))


def watch(interval_s=1.0):
    cfg = SimpleNamespace(topic="t", partitions=2, batch_interval_s=interval_s)
    return run_end.EndWatch(cfg, "/nonexistent")


def idle(w, progress=PAST, **kw):
    args = dict(driver=driver(), faults=faults(), producer_done=True, restart_pending=False, bootstrap="b",
                on_cluster=False) | kw
    return w.batchless_s(progress, **args)


def batch(w, kind, n, attempt=1):
    w.on_event({"type": kind, "batch": n, "attempt": attempt})


def test_a_batch_fault_that_cannot_come_ends_the_run_after_the_idle_time(clock):
    w = watch()
    batch(w, ev.BATCH_START, 0)
    batch(w, ev.BATCH_DONE, 0)
    clock.now += run_end.IDLE_END_S - 1
    assert idle(w) is None
    clock.now += 2
    assert idle(w) == pytest.approx(run_end.IDLE_END_S + 1)
    assert not w.drained(PAST, driver=driver(), faults=faults(), producer_done=True, restart_pending=False,
                         bootstrap="b", on_cluster=False)  # a fault is left: not drained


def test_an_isr_shrink_that_cannot_come_ends_the_run_like_a_batch_fault(clock):
    w = watch()
    batch(w, ev.BATCH_START, 0)
    batch(w, ev.BATCH_DONE, 0)
    clock.now += run_end.IDLE_END_S + 1
    assert idle(w, faults=faults("leader-crash@isr=1:for=2s"), on_cluster=True) == pytest.approx(run_end.IDLE_END_S + 1)
    assert idle(w, faults=faults("leader-crash@isr=1:for=2s,leader-crash@at=90s")) is None


def test_never_while_a_batch_is_open_or_data_is_left(clock):
    w = watch()
    batch(w, ev.BATCH_SUBMITTED, 4)  # a receiver's queued batch: submitted, not started
    clock.now += 60
    assert idle(w) is None
    batch(w, ev.BATCH_START, 4)
    batch(w, ev.BATCH_DONE, 4)
    clock.now += 60
    assert idle(w) is not None
    assert idle(w, progress={"positions": {0: 10, 1: 9}, "attempt": 1}) is None  # short of the end offsets


def test_never_for_time_triggers_an_unfinished_producer_or_a_pending_restart(clock):
    w = watch()
    batch(w, ev.BATCH_START, 0)
    batch(w, ev.BATCH_DONE, 0)
    clock.now += 60
    assert idle(w, faults=faults("driver-crash@at=90s")) is None
    assert idle(w, faults=faults("driver-crash@batch=6,driver-crash@at=90s")) is None
    assert idle(w, faults=faults(None)) is None  # nothing left: the drained rule's case
    assert idle(w, producer_done=False) is None
    assert idle(w, restart_pending=True) is None


def test_a_restarted_driver_must_start_a_batch_of_its_own(clock):
    w = watch()
    batch(w, ev.BATCH_START, 2)  # attempt 1's batch 2, never done: it crashed
    clock.now += 60
    restarted = driver(attempt=2, started_at=clock.now)
    w.on_event({"type": ev.DRIVER_READY, "attempt": 2})
    clock.now += 60
    assert idle(w, driver=restarted, progress={**PAST, "attempt": 2}) is None
    batch(w, ev.BATCH_START, 2, attempt=2)
    batch(w, ev.BATCH_DONE, 2, attempt=2)
    clock.now += 60  # the dead attempt's open batch does not count
    assert idle(w, driver=restarted, progress={**PAST, "attempt": 2}) is not None


def test_long_batch_intervals_wait_five_of_them(clock):
    w = watch(interval_s=5.0)
    batch(w, ev.BATCH_START, 0)
    batch(w, ev.BATCH_DONE, 0)
    clock.now += 20
    assert idle(w) is None
    clock.now += 6
    assert idle(w) is not None


def test_on_a_cluster_offsets_short_of_the_ledger_count_as_truncated_after_a_settle(clock, monkeypatch):
    # The ledger acknowledged offset 14 of partition 0; the topic ends at 10 (an unclean election truncated it).
    monkeypatch.setattr(run_end, "max_acked_offsets", lambda path: {0: 14, 1: 9})
    w = watch()
    args = dict(driver=driver(), producer_done=True, restart_pending=False, bootstrap="b")
    up = SimpleNamespace(pending=[], deferred=[], broker_restart_at=None, node_restarts={}, busy=False)
    assert not w.drained(PAST, faults=up, on_cluster=False, **args)  # one broker: never truncated, wait for it
    assert not w.drained(PAST, faults=up, on_cluster=True, **args)  # at the end: the settle starts
    clock.now += run_end.TRUNCATED_SETTLE_S - 0.1
    assert not w.drained(PAST, faults=up, on_cluster=True, **args)
    clock.now += 0.2
    assert w.drained(PAST, faults=up, on_cluster=True, **args)
    clock.now += 60
    assert not w.drained({"positions": {0: 9, 1: 10}, "attempt": 1}, faults=up, on_cluster=True, **args)


def test_a_consumer_crash_no_consumer_carried_out_ends_the_run_like_a_batch_fault(clock):
    w = watch()
    batch(w, ev.BATCH_START, 0)
    batch(w, ev.BATCH_DONE, 0)
    clock.now += run_end.IDLE_END_S + 1
    waiting = SimpleNamespace(pending=[], deferred=[], awaiting=list(parse_fault_plan("consumer-crash@at=3s")),
                              broker_restart_at=None, node_restarts={}, busy=True)
    assert idle(w, faults=waiting) == pytest.approx(run_end.IDLE_END_S + 1)
    assert idle(w, faults=faults(None)) is None  # nothing left to wait for: the run drains instead
