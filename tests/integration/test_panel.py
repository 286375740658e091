"""The control panel against real runs: a press equals the parameter, errors show, nothing survives."""

import json
import subprocess
import threading
import time

import pytest

from lab.config import make_config
from lab.events import read_events
from lab.run.supervisor import run_scenario
from lab.views.panel import Panel
from tests.conftest import clean_env, lab_cmd
from tests.integration.conftest import assert_all_gone, resumed_at, run_pids

pytestmark = pytest.mark.integration

LAB_THREADS = ("lab-panel", "lab-supervisor", "lab-producer")


def lab_threads():
    return [t.name for t in threading.enumerate() if t.name in LAB_THREADS and t.is_alive()]


def _read_again(run_dir) -> tuple[int, int]:
    """The rows the restarted driver read again that its first driver had (done, started) writing before the crash.

    Per partition, what the first driver's batches covered before the crash (``batch-start`` ranges) above
    where the restarted driver's batches began: of the batches ``batch-done`` says were written, and of all
    those started (a batch cut by the kill may or may not have reached the sink). From the timeline only;
    the audit that judges the run reads the sink and the ledger.
    """
    events = read_events(run_dir)
    crash = next(e["t"] for e in events if e["type"] == "fault")
    done = {e["batch"] for e in events if e["type"] == "batch-done" and e.get("attempt") == 1 and e["t"] < crash}
    started = {e["batch"]: e.get("ranges", {}) for e in events
               if e["type"] == "batch-start" and e.get("attempt") == 1 and e["t"] < crash}
    resumed = resumed_at(run_dir)

    def again(batches) -> int:
        return sum(max(0, end - max(start, resumed[int(p)])) for b in batches
                   for p, (start, end) in started[b].items() if int(p) in resumed)

    return again(done & started.keys()), again(started)


def _verdict_is_what_its_files_decide(duplicated: int, guarantee: str, run_dir) -> None:
    """Auto-commit commits, inside ``poll()``, everything the driver was given: a crash replays what was written
    since the last such commit, and nothing when it fell before the stream flowed or just after a commit (both
    measured on a loaded machine: a driver with no batch done at its crash at 2.1 s; a crash 0.13 s after a commit
    with no batch between). The duplicates are those rows, and the verdict follows from them."""
    low, high = _read_again(run_dir)
    assert low <= duplicated <= high, (low, duplicated, high, run_dir)
    assert guarantee == ("at-least-once" if duplicated else "exactly-once"), (guarantee, duplicated, run_dir)


def test_press_has_the_same_effect_as_the_parameter_and_the_replay(runs_dir):
    # The same crash three ways (a press, the parameter at the press's second, a replay of the pressed run's
    # timeline): each run's verdict is the one its own files decide (_verdict_is_what_its_files_decide).
    cfg = dict(events=4000, rate=1000, commit="auto", max_batch_records=100)
    panel = Panel(make_config(**cfg), interactive=True, refresh_s=0.2)
    panel.predict.value = "at-least-once"
    panel.start_button.click()
    deadline = time.monotonic() + 60
    # Press once the stream flows, 2 s in: a driver on a warm broker has batches within 0.4 s.
    while (panel.run.status().batches < 5 or panel.run.status().elapsed_s < 2.0) and time.monotonic() < deadline:
        time.sleep(0.1)
    panel.fault_buttons["driver-crash"].click()
    pressed = panel.wait(timeout=120)
    assert not panel.errors.outputs, panel.errors.outputs
    faults = [e for e in read_events(pressed.run_dir) if e["type"] == "fault"]
    assert len(faults) == 1 and faults[0]["by"] == "ui" and faults[0]["kind"] == "driver-crash"
    _verdict_is_what_its_files_decide(pressed.audit.duplicated, pressed.audit.guarantee, pressed.run_dir)
    assert panel.verdict.measured == pressed.audit.guarantee
    assert panel.verdict.predicted == "at-least-once"
    assert panel.verdict.match == (pressed.audit.guarantee == "at-least-once")
    assert "lab-verdict" in panel.verdict_html.value

    at = faults[0]["elapsed_s"]
    by_parameter = run_scenario(make_config(**cfg, faults=f"driver-crash@at={at:.1f}s"))
    fired = [e for e in read_events(by_parameter.run_dir) if e["type"] == "fault"]
    assert len(fired) == 1 and fired[0]["kind"] == "driver-crash" and fired[0]["elapsed_s"] >= round(at, 1)
    _verdict_is_what_its_files_decide(by_parameter.audit.duplicated, by_parameter.audit.guarantee,
                                      by_parameter.run_dir)

    p = subprocess.run(lab_cmd("run", "--events", "4000", "--rate", "1000", "--commit", "auto", "--max-batch", "100",
                               "--faults-from", str(pressed.run_dir / "events.jsonl"), "--json"),
                       capture_output=True, text=True, timeout=180, env=clean_env(LAB_RUNS_DIR=str(runs_dir)))
    assert p.returncode == 0, p.stderr
    replay = json.loads(p.stdout.strip().splitlines()[-1])
    assert replay["faults"] == f"driver-crash@at={round(at, 1):g}s"
    _verdict_is_what_its_files_decide(replay["duplicated"], replay["guarantee"], replay["run_dir"])
    time.sleep(0.5)
    assert lab_threads() == []
    for r in (pressed.run_dir, by_parameter.run_dir):
        assert_all_gone(run_pids(r))


def test_a_failing_press_is_shown_in_the_panel(runs_dir):
    panel = Panel(make_config(events=100), interactive=True)
    button = panel.fault_buttons["driver-crash"]
    button.disabled = False
    button.click()  # before Start: nothing to crash
    text = "".join(o.get("text", "") for o in panel.errors.outputs)
    assert "press Start first" in text and panel.errors.layout.display is None
    panel.close()


def test_close_mid_run_stops_every_thread_and_process(runs_dir):
    panel = Panel(make_config(events=50000, rate=500), interactive=True, refresh_s=0.2)
    panel.start()
    deadline = time.monotonic() + 30
    while panel.run.status().batches < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = run_pids(panel.run.run_dir)
    panel.close()
    assert_all_gone(pids)
    time.sleep(0.5)
    assert lab_threads() == []
