import sqlite3

import pytest

from lab.sinks import OffsetMismatch, SinkSpec, open_sink

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
        assert s.totals() == {"stored_rows": 13, "write_attempts": 13}


def test_idempotent_stores_once(tmp_path):
    with sink(tmp_path, "idempotent") as s:
        s.write_batch(ROWS, "b1")
        s.write_batch(ROWS, "b1-again")
        assert set(stored(s).values()) == {1} and s.totals() == {"stored_rows": 10, "write_attempts": 20}


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
    rows = sqlite3.connect(tmp_path / "append.sqlite").execute("SELECT COUNT(DISTINCT event_id) FROM sink_events").fetchone()
    assert rows == (10,)
