"""The receiver's clean stop (lab.pipelines.receiver.stop): when it may stop without Spark's graceful wait."""

import threading
import time

from lab.pipelines.receiver.stop import FINISH_WAIT_S, BatchTimes, stop


def test_the_wait_ends_once_the_newest_batch_with_records_and_one_after_the_stop_have_completed():
    times = BatchTimes()
    times.submitted(1_000, 50)
    times.submitted(1_500, 0)  # empty batches are not waited for, but they count as "after the stop"
    times.completed(1_000)
    assert times.wait_done(after_ms=900, timeout_s=0.05)
    assert not times.wait_done(after_ms=1_200, timeout_s=0.05), "no batch timed after 1200 has completed"
    times.completed(1_500)
    assert times.wait_done(after_ms=1_200, timeout_s=0.05)


def test_a_batch_with_records_still_running_holds_the_stop_until_it_completes():
    times = BatchTimes()
    times.submitted(2_000, 120)
    times.completed(1_500)
    threading.Timer(0.1, times.completed, args=(2_000,)).start()
    t0 = time.monotonic()
    assert times.wait_done(after_ms=1_000, timeout_s=5)
    assert 0.05 < time.monotonic() - t0 < 2


def test_the_wait_goes_on_while_batches_complete_and_ends_once_they_stop_completing():
    times = BatchTimes()
    times.hold_through(5_000)
    for i, batch in enumerate(range(1_000, 5_001, 1_000)):  # one batch every 0.1 s: 0.5 s in all
        threading.Timer(0.1 * (i + 1), times.completed, args=(batch,)).start()
    t0 = time.monotonic()
    assert times.wait_done(None, timeout_s=0.15, renew_s=0.3), "each completion leaves 0.3 s more"
    assert time.monotonic() - t0 >= 0.45
    stuck = BatchTimes()
    stuck.hold_through(5_000)
    threading.Timer(0.05, stuck.completed, args=(1_000,)).start()
    t0 = time.monotonic()
    assert not stuck.wait_done(None, timeout_s=0.1, renew_s=0.2)
    assert 0.2 <= time.monotonic() - t0 < 1


class _Feeder:
    def __init__(self, finished: bool, exact: bool = True) -> None:
        self.finished, self.finished_exact = finished, exact

    def finish(self, timeout_s: float) -> bool:
        return self.finished


class _Context:
    def __init__(self) -> None:
        self.calls = []

    def stop(self, stopSparkContext: bool, stopGraceFully: bool) -> None:  # noqa: N803 - PySpark's names
        self.calls.append((stopSparkContext, stopGraceFully))


def test_the_stop_is_sparks_graceful_one_when_the_feeder_or_the_batches_did_not_finish(monkeypatch):
    import lab.pipelines.receiver.stop as mod

    monkeypatch.setattr(mod, "FINISH_WAIT_S", 0.05)
    done = BatchTimes()
    done.completed(int(time.time() * 1000) + 60_000)  # a batch timed after any stop has completed
    pending = BatchTimes()
    pending.submitted(int(time.time() * 1000) + 60_000, 10)  # never completes

    for feeder, times, quick in ((_Feeder(True), done, True), (_Feeder(False), done, False),
                                 (_Feeder(True), pending, False)):
        ssc = _Context()
        assert stop(ssc, feeder, times) is quick
        assert ssc.calls == [(True, not quick)]
    ssc = _Context()
    assert stop(ssc, _Feeder(True), done, quick_stop=False) is False and ssc.calls == [(True, True)], \
        "LAB_QUICK_STOP off: Spark's graceful stop, as before"


def test_without_exact_counts_the_batch_waited_for_is_timed_a_block_interval_later(monkeypatch):
    import lab.pipelines.receiver.stop as mod

    monkeypatch.setattr(mod, "FINISH_WAIT_S", 0.3)
    soon = BatchTimes()
    soon.completed(int(time.time() * 1000) + 100)  # after the stop, but within a block interval of it
    assert stop(_Context(), _Feeder(True, exact=True), soon) is True
    assert stop(_Context(), _Feeder(True, exact=False), soon) is False, "a line may still be in the block buffer"


def test_with_exact_counts_a_context_behind_the_clock_stops_once_its_batches_with_records_are_done(monkeypatch):
    # A driver recovered from the write-ahead log runs the batches of its down time: 20 s behind the clock, measured.
    import lab.pipelines.receiver.stop as mod

    monkeypatch.setattr(mod, "FINISH_WAIT_S", 0.3)
    behind = int(time.time() * 1000) - 20_000
    late = BatchTimes()
    late.submitted(behind, 146)
    late.completed(behind)
    assert stop(_Context(), _Feeder(True, exact=True), late) is True
    assert stop(_Context(), _Feeder(True, exact=False), late) is False, "no batch timed after the stop yet"
    nothing = BatchTimes()  # no batch has completed at all: nothing was handed over to wait for
    assert stop(_Context(), _Feeder(True, exact=True), nothing) is True


def test_a_recovered_driver_waits_for_the_pending_batches_its_earlier_attempt_left(monkeypatch):
    # Submitted again at the restart with no record count: only their times say they hold records.
    import lab.pipelines.receiver.stop as mod

    monkeypatch.setattr(mod, "FINISH_WAIT_S", 0.3)
    times = BatchTimes()
    times.hold_through(5_000)
    times.submitted(4_500, 0)
    times.completed(4_500)
    assert stop(_Context(), _Feeder(True, exact=True), times) is False, "batch 5000 may hold the killed driver's"
    threading.Timer(0.1, times.completed, args=(5_000,)).start()
    assert times.wait_done(None, timeout_s=5)


def test_the_stops_waits_and_sparks_graceful_fallback_stay_within_the_supervisors_grace():
    # The stop's waits and Spark's graceful fallback (10 s at 0.5 s batches) stay within the supervisor's grace.
    from lab.run.supervisor import STOP_GRACE_S

    assert FINISH_WAIT_S + 10 < STOP_GRACE_S
