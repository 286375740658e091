"""The window audit's pure core: which events are late, and windows expected against windows measured."""

import numpy as np
import pytest

from lab.audit.window import EventTimes, batch_of, late_mask, window_audit_core

W = 10_000  # a 10 s window, in ms


def events(times, keys, partitions=None, offsets=None):
    n = len(times)
    return EventTimes(seq=np.arange(n), key=np.array(keys, dtype=object),
                      partition=np.array(partitions or [0] * n), kafka_offset=np.array(offsets or list(range(n))),
                      event_time_ms=np.array(times, dtype=np.int64))


def test_each_event_belongs_to_the_batch_whose_range_holds_it():
    part = np.array([0, 0, 1, 1, 0])
    off = np.array([0, 5, 0, 9, 12])
    ranges = {0: {0: (0, 5), 1: (0, 3)}, 1: {0: (5, 10), 1: (3, 9)}}
    assert batch_of(part, off, ranges).tolist() == [0, 1, 0, -1, -1]


def test_a_row_is_late_by_the_previous_batchs_watermark():
    # batch 1 filters with batch 0's watermark (0: nothing late), batch 2 with batch 1's (25 s).
    marks = {0: 0, 1: 25_000, 2: 40_000}
    t = np.array([1_000, 14_000, 15_000, 26_000, 1_000])
    batch = np.array([1, 2, 2, 2, -1])
    # window-count: late when the window's end <= the watermark: [0,10) and [10,20) end at 10 s and 20 s.
    assert late_mask(t, batch, marks, "window-count", W).tolist() == [False, True, True, False, False]
    # dedupe: late when the event time itself <= the watermark.
    assert late_mask(t, batch, marks, "dedupe", W).tolist() == [False, True, True, False, False]
    # A window ending exactly at the watermark is closed; one ending after it is not.
    edge = late_mask(np.array([15_000, 25_000]), np.array([2, 2]), {1: 20_000}, "window-count", W)
    assert edge.tolist() == [True, False]


def test_exact_over_and_under_windows_are_counted_in_events():
    e = events([1_000, 2_000, 3_000, 12_000, 13_000, 500], ["a", "a", "b", "a", "b", "a"])
    late = np.array([False, False, False, False, False, True])
    seen = np.ones(6, dtype=bool)
    measured = [(0, W, "a", 2), (0, W, "b", 1), (W, 2 * W, "a", 3)]  # (W, b) missing: under by 1
    w = window_audit_core(e, late, seen, measured, W)
    assert (w.windows, w.windows_exact, w.windows_over, w.windows_under) == (4, 2, 1, 1)
    assert (w.overcount, w.undercount, w.late_dropped, w.unseen) == (2, 1, 1, 0)
    assert w.counted_exactly == 3  # the events of the two exact windows
    row = w.table.set_index(["window_start", "key"]).loc[(0, "a")]
    assert (row["expected"], row["measured"], row["late"], row["status"]) == (2, 2, 1, "exact")


def test_unread_events_are_owed_to_no_window_yet():
    e = events([1_000, 2_000], ["a", "a"])
    w = window_audit_core(e, np.zeros(2, dtype=bool), np.array([True, False]), [(0, W, "a", 1)], W)
    assert (w.windows_exact, w.unseen, w.undercount) == (1, 1, 0)


@pytest.mark.parametrize("measured", [[], [(0, W, "a", 0)]])
def test_a_window_with_nothing_owed_and_nothing_stored_is_no_window(measured):
    e = events([1_000], ["a"])
    w = window_audit_core(e, np.array([True]), np.ones(1, dtype=bool), measured, W)
    assert (w.windows, w.late_dropped, w.undercount) == (0, 1, 0)


def test_late_events_are_drawn_from_their_own_stream_and_stamped_in_the_past():
    from lab.run.produced_events import LateEvents

    never, always = LateEvents(1, 0.0, 60), LateEvents(1, 1.0, 60)
    assert never.event_time_ms(1000.5) == 1_000_500
    assert always.event_time_ms(1000.5) == 1_000_500 - 60_000
    some = LateEvents(3, 0.25, 60)
    stamps = [some.event_time_ms(100.0) for _ in range(4000)]
    assert 800 < stamps.count(40_000) < 1200 and set(stamps) == {100_000, 40_000}
    # Same seed, same late events.
    again = LateEvents(3, 0.25, 60)
    assert [again.event_time_ms(100.0) for _ in range(4000)] == stamps


def test_the_per_event_audit_counts_late_events_as_dropped_not_lost():
    from lab.audit.auditor import LedgerView, audit_core

    ledger = LedgerView(seq=np.arange(4), event_id=np.array(["a", "b", "c", "d"], dtype=object),
                        partition=np.zeros(4, dtype=np.int64), kafka_offset=np.arange(4))
    late = np.array([False, True, False, False])
    a = audit_core(ledger, np.array([0, 3]), np.array(["a", "d"], dtype=object), positions={0: 4}, final=True,
                   late=late)
    assert (a.exactly_once, a.late_dropped, a.lost) == (2, 1, 1)
    assert a.table["status"].tolist() == ["exactly-once", "late", "lost", "exactly-once"]
