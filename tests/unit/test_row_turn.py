"""lab.row_turn: a matrix row started ahead waits for its turn file; LAB_ROW_AHEAD switches it."""

import threading
import time

import pytest

from lab import row_turn
from lab.errors import LabError


def test_ahead_is_on_unless_switched_off_and_a_bad_value_names_the_choices():
    assert row_turn.ahead({}) is True
    assert row_turn.ahead({"LAB_ROW_AHEAD": " OFF "}) is False
    with pytest.raises(LabError, match="'sometimes'.*off, on"):
        row_turn.ahead({"LAB_ROW_AHEAD": "sometimes"})


def test_await_turn_returns_once_the_file_exists(tmp_path):
    row_turn.await_turn("")  # its imports first: the wait alone is timed
    turn = tmp_path / "turn"
    threading.Timer(0.3, turn.touch).start()
    t0 = time.monotonic()
    waited = row_turn.await_turn(turn)
    assert turn.exists() and 0.25 <= waited <= time.monotonic() - t0


def test_no_turn_file_means_no_wait():
    assert row_turn.await_turn("") == 0.0
