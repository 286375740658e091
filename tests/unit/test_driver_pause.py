"""driver-pause: the plan, what --on-pause resolves to, and a real SIGSTOP, replacement and zombie of a process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from lab.config import make_config
from lab.errors import LabError
from lab.faults.plan import Fault, parse_fault_plan
from lab.run.driver_process import DriverProcess
from tests.unit.test_injector import Timeline


def test_a_pause_plan_reads_its_trigger_and_duration():
    assert parse_fault_plan("driver-pause@at=3s:for=20s") == (Fault("driver-pause", at_s=3.0, duration_s=20.0),)
    assert parse_fault_plan("driver-pause@batch=2:for=15s")[0].to_text() == "driver-pause@batch=2:for=15s"


@pytest.mark.parametrize("pipeline, mode", [("plain", "replace"), ("kafka-eos", "replace"), ("share", "replace"),
                                            ("structured", "wait"), ("flink", "wait")])
def test_on_pause_auto_is_stated_in_the_config(pipeline, mode):
    assert make_config(pipeline=pipeline).on_pause == mode


@pytest.mark.parametrize("params, must_name", [
    (dict(pipeline="plain", on_pause="later"), ["on-pause 'later'", "auto, replace, wait"]),
    (dict(pipeline="direct", on_pause="replace", faults="driver-pause@at=2s:for=9s"),
     ["'direct'", "plain, share, kafka-eos, structured", "--on-pause wait"]),
    (dict(pipeline="plain", faults="driver-pause@at=2s:for=2s"), ["for=2s", "n > 2"]),
])
def test_a_pause_the_run_cannot_carry_out_is_one_line_before_it_starts(params, must_name):
    with pytest.raises(LabError) as e:
        make_config(**params)
    assert "\n" not in str(e.value)
    for word in must_name:
        assert word in str(e.value)


def test_a_short_pause_is_fine_when_nothing_replaces_the_driver():
    assert make_config(pipeline="plain", on_pause="wait", faults="driver-pause@at=1s:for=1s").on_pause == "wait"


class Counting(DriverProcess):
    """A DriverProcess whose drivers are a child counting into a file of its attempt (no pipeline, no JVM)."""

    def _spawn(self, attempt, log_path, **env):
        # written whole (a new file renamed over the old), so a reader never sees it half written
        path = f"{self.run_dir}/count-{attempt}"
        script = ("import os, time\nn = 0\nwhile True:\n    n += 1\n"
                  f"    open(r'{path}.new', 'w').write(str(n))\n    os.replace(r'{path}.new', r'{path}')\n"
                  "    time.sleep(0.02)\n")
        return subprocess.Popen([sys.executable, "-c", script], start_new_session=True)


def count(run_dir, attempt) -> int:
    try:
        return int((run_dir / f"count-{attempt}").read_text() or 0)
    except (OSError, ValueError):
        return 0


def settled(run_dir, attempt) -> int:
    time.sleep(0.3)
    return count(run_dir, attempt)


def goes_on_past(run_dir, attempt, past, patience_s=60.0) -> bool:
    """Does the attempt's count pass ``past``? Waits for it: on a busy machine a resumed child may take a while."""
    deadline = time.monotonic() + patience_s
    while count(run_dir, attempt) <= past:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_set_aside_driver_is_stopped_while_its_replacement_runs_then_comes_back_and_is_ended(tmp_path):
    d = Counting(tmp_path, on_child_group=lambda *a: None)
    d.start()
    try:
        while count(tmp_path, 1) < 3:
            time.sleep(0.02)
        pid = d.pause()
        assert psutil.Process(pid).status() == psutil.STATUS_STOPPED
        stopped_at = settled(tmp_path, 1)
        assert settled(tmp_path, 1) == stopped_at  # a stopped process does nothing
        d.set_aside()
        assert d.proc is None and d.zombie[0].pid == pid
        new_pid, _ = d.start()
        assert d.attempt == 2 and new_pid != pid and d.log_path.name == "driver-2.log"
        while count(tmp_path, 2) < 3:
            time.sleep(0.02)
        assert d.resume(zombie=True) == pid
        assert goes_on_past(tmp_path, 1, stopped_at)  # the zombie goes on where it stopped, beside its replacement
        assert not d.zombie_exited()
        ended = d.end_zombie()
        assert ended["how"] == "killed" and ended["pid"] == pid and ended["attempt"] == 1
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert d.alive() and d.zombie is None
    finally:
        d.kill_remaining()
    with pytest.raises(ProcessLookupError):
        os.kill(new_pid, 0)


def test_the_timeline_shades_the_pause_and_the_zombie_after_it():
    from lab.views.plots import timeline

    events = [{"t": 100.0, "type": "run-start"},
              {"t": 102.0, "type": "fault", "kind": "driver-pause", "pid": 7},
              {"t": 104.0, "type": "driver-replaced", "pid": 7, "attempt": 1},
              {"t": 104.1, "type": "driver-start", "pid": 8, "attempt": 2},
              {"t": 105.0, "type": "batch-done", "batch": 3, "rows": 50, "attempt": 2},
              {"t": 112.0, "type": "driver-resume", "pid": 7, "attempt": 1, "zombie": True, "alive": True},
              {"t": 112.5, "type": "batch-done", "batch": 3, "rows": 50, "attempt": 1},
              {"t": 120.0, "type": "zombie-end", "pid": 7, "attempt": 1, "how": "killed"}]
    fig = timeline(events)
    bands = sorted((s.x0, s.x1) for s in fig.layout.shapes if s.type == "rect")
    assert (2.0, 12.0) in bands and (12.0, 20.0) in bands
    labels = {a.text for a in fig.layout.annotations}
    assert {"paused", "zombie"} <= labels
    assert {t.name for t in fig.data} >= {"batches, driver #1", "batches, driver #2"}


def started(tmp_path):
    d = Counting(tmp_path, on_child_group=lambda *a: None)
    d.start()
    while count(tmp_path, 1) < 2:
        time.sleep(0.02)
    return d


def test_a_run_that_ends_while_a_zombie_runs_ends_it_first_and_says_so(tmp_path):
    from lab.run.pause import DriverPause

    d, log = started(tmp_path), Timeline()
    pause = DriverPause(d, log, "replace", start_replacement=lambda: d.start())
    try:
        zombie = pause.pause(5.0)["pid"]
        pause.step(time.monotonic() + 2.5)  # past PAUSE_REPLACE_AFTER_S: set aside, replacement started
        assert d.zombie is not None and d.attempt == 2 and pause.zombie_attempts == {1}
        pause.finish()  # the run's end comes before the pause's: the zombie is woken, then ended
        assert ([e["type"] for e in log.lines[-2:]] == ["driver-resume", "zombie-end"]
                and log.lines[-2]["at_run_end"] is True)
        assert d.zombie is None and not pause.pending and not psutil.pid_exists(zombie)
    finally:
        d.kill_remaining()


def test_a_driver_killed_while_paused_ends_its_pause_without_a_replacement(tmp_path):
    from lab.run.pause import DriverPause

    d, log = started(tmp_path), Timeline()
    replaced = []
    pause = DriverPause(d, log, "replace", start_replacement=lambda: replaced.append(1))
    try:
        pause.pause(5.0)
        d.kill()  # a driver-crash during the pause: the supervisor restarts it, the pause is over
        pause.step(time.monotonic() + 2.5)
        assert not replaced and d.zombie is None and not pause.pending
        assert log.lines[-1]["type"] == "driver-resume" and log.lines[-1]["alive"] is False
    finally:
        d.kill_remaining()


def test_clean_up_ends_a_stopped_driver_and_a_zombie(tmp_path):
    d = started(tmp_path)
    first = d.pause()
    d.set_aside()
    d.start()
    second = d.pause()  # the replacement stopped too: both are stopped at clean-up
    d.kill_remaining()
    for pid in (first, second):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_second_driver_is_never_started_beside_a_live_one(tmp_path):
    d = started(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="is alive"):
            d.start()
    finally:
        d.kill_remaining()


def test_a_zombie_s_progress_write_never_hides_its_replacement_s_last_one(tmp_path):
    # As measured: the replacement wrote its last batch, then the woken zombie (reading the same checkpoint)
    # wrote progress.json before the supervisor looked; the run then waited for progress that never came.
    from lab.events import progress_not_from, read_progress, write_progress

    write_progress(tmp_path, {0: 5}, 1, attempt=1)
    write_progress(tmp_path, {0: 9}, 2, attempt=2)
    write_progress(tmp_path, {0: 7}, 6, attempt=1)  # the zombie, last
    assert read_progress(tmp_path)["attempt"] == 1
    own = progress_not_from(tmp_path, {1}, last_attempt=2)
    assert (own["attempt"], own["batch"], own["positions"]) == (2, 2, {0: 9})
    assert progress_not_from(tmp_path, set(), last_attempt=2)["batch"] == 6  # nobody set aside: the file as written
    assert progress_not_from(tmp_path, {1, 2}, last_attempt=2)["positions"] == {}
