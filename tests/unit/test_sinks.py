import sqlite3

import pytest

from lab.sinks.reader import open_sink
from lab.sinks.spec import OffsetMismatch, SinkSpec

ROWS = [(f"e{i}", i, 0, i) for i in range(10)]


class Crash(Exception):
    pass


def sink(tmp_path, mode):
    return open_sink(SinkSpec(mode=mode, backend="sqlite", path=str(tmp_path / f"{mode}.sqlite")))


def stored(s):
    return dict(s.event_counts())


def crash():
    raise Crash()


def test_append_stores_every_attempt(tmp_path):
    with sink(tmp_path, "append") as s:
        s.write_batch(ROWS, "b1")
        s.write_batch(ROWS[:3], "b1")
        assert stored(s)["e0"] == 2 and stored(s)["e5"] == 1
        assert s.totals() == {"stored_rows": 13, "write_attempts": 13, "window_rows": 0}


def test_idempotent_stores_once(tmp_path):
    with sink(tmp_path, "idempotent") as s:
        s.write_batch(ROWS, "b1")
        s.write_batch(ROWS, "b1-again")
        assert (set(stored(s).values()) == {1}
                and s.totals() == {"stored_rows": 10, "write_attempts": 20, "window_rows": 0})


def test_transactional_skips_a_committed_batch(tmp_path):
    with sink(tmp_path, "transactional") as s:
        assert s.write_batch(ROWS, "batch-3-part-0") == "written"
        assert s.write_batch(ROWS, "batch-3-part-0") == "skipped"
        assert s.write_batch(ROWS[:2], "batch-3-part-1") == "written"
        assert stored(s)["e0"] == 2 and stored(s)["e9"] == 1
        assert s.committed_batches() == {"batch-3-part-0", "batch-3-part-1"}


@pytest.mark.parametrize("mode, left", [("append", 5), ("idempotent", 5), ("transactional", 0)])
def test_a_crash_mid_output_leaves_what_the_mode_committed(tmp_path, mode, left):
    with sink(tmp_path, mode) as s:
        with pytest.raises(Crash):
            s.write_batch(ROWS, "b1", on_midway=crash)
        assert s.totals()["stored_rows"] == left


def test_offsets_commit_with_the_rows_and_refuse_gaps_and_repeats(tmp_path):
    with sink(tmp_path, "transactional") as s:
        s.write_batch(ROWS[:5], "b0", offsets={0: (0, 5)})
        s.write_batch(ROWS[5:], "b1", offsets={0: (5, 10)})
        assert s.stored_offsets() == {0: 10}
        with pytest.raises(OffsetMismatch, match="repeated range"):
            s.write_batch(ROWS[:2], "b2", offsets={0: (8, 12)})
        with pytest.raises(OffsetMismatch, match="skipped range"):
            s.write_batch(ROWS[:2], "b3", offsets={0: (11, 12)})
        assert s.stored_offsets() == {0: 10} and s.totals()["stored_rows"] == 10  # nothing of b2/b3 committed


def test_sink_file_is_a_real_database(tmp_path):
    with sink(tmp_path, "append") as s:
        s.write_batch(ROWS, "b1")
    rows = sqlite3.connect(tmp_path / "append.sqlite").execute(
        "SELECT COUNT(DISTINCT event_id) FROM sink_events").fetchone()
    assert rows == (10,)


# -- a stateful query's counts ---------------------------------------------------------
W = 10_000
COUNTS = [(0, W, "k1", 3, 3), (0, W, "k2", 1, 1), (W, 2 * W, "k1", 2, 2)]
LATER = [(0, W, "k1", 5, 2)]  # the next batch: k1's first window went from 3 to 5


@pytest.mark.parametrize("mode, replayed", [("append", {(0, "k1"): 7, (0, "k2"): 1, (W, "k1"): 2}),
                                            ("idempotent", {(0, "k1"): 5, (0, "k2"): 1, (W, "k1"): 2}),
                                            ("transactional", {(0, "k1"): 5, (0, "k2"): 1, (W, "k1"): 2})])
def test_a_replayed_batch_of_counts_reads_as_the_mode_promises(tmp_path, mode, replayed):
    with sink(tmp_path, mode) as s:
        s.write_windows(COUNTS, "batch-0-part-0")
        s.write_windows(LATER, "batch-1-part-0")
        s.write_windows(LATER, "batch-1-part-0")  # the batch again, after a crash before Spark's commit
        got = {(a, k): c for a, b, k, c in s.window_counts()}
        assert got == replayed
        assert {b - a for a, b, _, _ in s.window_counts()} == {W}


@pytest.mark.parametrize("mode, left", [("append", 1), ("idempotent", 1), ("transactional", 0)])
def test_counts_cut_mid_output_leave_what_the_mode_committed(tmp_path, mode, left):
    with sink(tmp_path, mode) as s:
        with pytest.raises(Crash):
            s.write_windows(COUNTS, "b1", on_midway=crash)
        assert s.totals()["window_rows"] == left
