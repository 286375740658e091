"""bench/soak.py: its hogs are its own and end with it, whichever way it ends."""

from __future__ import annotations

import json
import tempfile

import pytest

from bench import soak
from lab.host import processes


@pytest.fixture(autouse=True)
def _logs_in_tmp_path(tmp_path, monkeypatch):
    """The harness keeps its logs in a directory it names at the end: here, inside the test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_the_hogs_end_with_an_interrupted_soak(tmp_path, monkeypatch):
    def interrupted(number, only, work):
        raise KeyboardInterrupt("Ctrl-C")

    monkeypatch.setattr(soak, "run_round", interrupted)
    out = tmp_path / "load.json"
    assert soak.main(["--rounds", "1", "--out", str(out)]) == 1
    result = json.loads(out.read_text())
    assert result["interrupted"] == "Ctrl-C" and result["hogs_left_running"] == []
    assert len(result["hog_pids"]) == result["setting"]["cpu_hogs"] >= 1
    assert not [p for p in result["hog_pids"] if processes.pid_alive(p)]


def test_a_round_counts_failures_not_skips(tmp_path, monkeypatch):
    tests = [{"test": "a", "outcome": "passed"}, {"test": "b", "outcome": "skipped"},
             {"test": "c", "outcome": "failed", "message": "AssertionError: 1 != 2"}]
    monkeypatch.setattr(soak, "run_round", lambda n, only, work: {"round": n, "wall_s": 1.0, "pytest_exit": 1,
                                                                  "failures": 1, "tests": tests})
    out = tmp_path / "load.json"
    assert soak.main(["--rounds", "2", "--out", str(out)]) == 1
    result = json.loads(out.read_text())
    assert [r["failures"] for r in result["rounds"]] == [1, 1] and result["hogs_left_running"] == []


def test_rounds_must_be_positive(tmp_path):
    with pytest.raises(SystemExit):
        soak.main(["--rounds", "0", "--out", str(tmp_path / "x.json")])
