"""lab.matrix.rows: a row started ahead waits for its turn file (LAB_ROW_AHEAD switches it); an interrupt ends rows."""

import subprocess
import threading
import time

import pytest

from lab.errors import LabError
from lab.matrix import rows as matrix_rows


def test_ahead_is_on_unless_switched_off_and_a_bad_value_names_the_choices():
    assert matrix_rows.ahead({}) is True
    assert matrix_rows.ahead({"LAB_ROW_AHEAD": " OFF "}) is False
    with pytest.raises(LabError, match="'sometimes'.*off, on"):
        matrix_rows.ahead({"LAB_ROW_AHEAD": "sometimes"})


def test_wait_for_turn_returns_once_the_file_exists(tmp_path):
    turn = tmp_path / "turn"
    threading.Timer(0.3, turn.touch).start()
    t0 = time.monotonic()
    waited = matrix_rows.wait_for_turn(turn)
    assert turn.exists() and 0.25 <= waited <= time.monotonic() - t0 + 0.001  # waited is rounded to ms


def test_a_row_whose_papermill_is_gone_gives_its_run_up(tmp_path, monkeypatch):
    parents = iter([100, 100, 1])  # the kernel's parent at the start, then reparented: papermill ended
    monkeypatch.setattr(matrix_rows.os, "getppid", lambda: next(parents))
    with pytest.raises(LabError, match="matrix ended before this row's turn"):
        matrix_rows.wait_for_turn(tmp_path / "never", poll_s=0.01)


def test_an_interrupt_lets_a_row_whose_run_is_over_end_its_notebook_and_ends_the_others(tmp_path):
    over, running = tmp_path / "over", tmp_path / "running"
    over.mkdir(), running.mkdir()
    (over / "report.json").write_text("{}")
    finishing = subprocess.Popen(["sleep", "0.5"], start_new_session=True)  # its plots, then papermill's own end
    stuck = subprocess.Popen(["sleep", "60"], start_new_session=True)
    finishing.row_dir, stuck.row_dir = over, running
    t0 = time.monotonic()
    matrix_rows.stop_rows([finishing, stuck])
    assert finishing.returncode == 0, "the finished run's notebook was cut"
    assert stuck.returncode not in (None, 0), "the running row was not ended"
    assert time.monotonic() - t0 < matrix_rows.FINISH_GRACE_S


def test_batch_watch_sees_a_batch_done_once_its_line_is_whole(tmp_path):
    row = tmp_path / "row"
    watch = matrix_rows.BatchWatch(row)
    assert not watch.done()  # no run yet
    events = row / "lab-runs" / "r1" / "events.jsonl"
    events.parent.mkdir(parents=True)
    events.write_text('{"type": "batch-start", "batch": 0}\n{"type": "batch-do')
    assert not watch.done()  # a torn last line is kept for the next poll
    with events.open("a") as f:
        f.write('ne", "batch": 0}\n')
    assert watch.done() and watch.done()
