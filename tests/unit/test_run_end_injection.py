"""A fault pressed after the run's loop has ended is refused; one pressed before reaches the injector."""

import threading

import pytest

from lab.config import make_config
from lab.errors import LabError
from lab.run.supervisor import Run


class Injector:
    def __init__(self):
        self.injected = []

    def inject(self, kind, source, **options):
        self.injected.append((kind, source))
        return {"type": "fault", "kind": kind}


def test_a_press_between_the_drain_and_the_audit_is_refused(tmp_path, monkeypatch):
    run = Run(make_config(pipeline="structured", sink="idempotent", events=10, runs_dir=str(tmp_path)))
    run.faults = Injector()
    in_loop, leave_loop, in_finish, leave_finish = (threading.Event() for _ in range(4))

    def loop():
        in_loop.set()
        leave_loop.wait(5)

    def finish():
        in_finish.set()
        leave_finish.wait(5)

    monkeypatch.setattr(run, "_loop", loop)
    monkeypatch.setattr(run, "_finish", finish)
    monkeypatch.setattr(run, "_cleanup", lambda: None)
    monitor = threading.Thread(target=run._monitor)
    monitor.start()
    try:
        assert in_loop.wait(5)
        assert run.inject("driver-crash")["kind"] == "driver-crash"  # while the run goes on
        leave_loop.set()
        assert in_finish.wait(5)
        with pytest.raises(LabError, match="the run has ended; broker-outage was not injected"):
            run.inject("broker-outage", duration_s=1)
    finally:
        leave_loop.set()
        leave_finish.set()
        monitor.join(5)
    assert run.faults.injected == [("driver-crash", "ui")]
    assert run.error is None and run._done.is_set()


def test_the_status_says_when_the_run_has_ended(tmp_path):
    run = Run(make_config(pipeline="structured", sink="idempotent", events=10, runs_dir=str(tmp_path)))
    assert run.status().ended is False
    run._ended = True
    assert run.status().ended is True and run.status().finished is False


def test_the_panel_greys_its_fault_buttons_once_the_run_has_ended(tmp_path, monkeypatch):
    from lab.run.result import RunStatus
    from lab.views.panel import Panel

    panel = Panel(make_config(pipeline="structured", sink="idempotent", events=10, runs_dir=str(tmp_path)),
                  refresh_s=0.01)
    seen = []

    class EndingRun:
        """Goes on, then ends (faults refused), then finishes; records the buttons at each look."""

        def status(self):
            seen.append({k: b.disabled for k, b in panel.fault_buttons.items()})
            n = len(seen)
            return RunStatus(0.0, 0, 0, False, 0, 0, True, {}, {}, finished=n >= 6, ended=n >= 3)

        def wait(self, timeout=None):
            return None

        def stop(self):
            pass

    monkeypatch.setattr(panel, "_refresh", lambda status: None)
    panel.run = EndingRun()
    for b in panel.fault_buttons.values():
        b.disabled = False  # as start() leaves them
    try:
        panel._poll()
    finally:
        panel.close()
    assert panel.fault_buttons and not any(seen[1].values())  # while the run goes on: pressable
    assert all(seen[3].values()) and all(seen[4].values())  # ended, not yet finished: greyed


def test_a_refused_press_shows_one_line_in_the_panel(tmp_path):
    from lab.views.panel import Panel

    panel = Panel(make_config(pipeline="structured", sink="idempotent", events=10, runs_dir=str(tmp_path)))
    shown = []
    panel._show_error = shown.append

    def refused(_button):
        raise LabError("the run has ended; driver-crash was not injected (start a new run to inject faults)")

    try:
        panel._callback(refused)(None)
    finally:
        panel.close()
    assert shown == ["the run has ended; driver-crash was not injected (start a new run to inject faults)\n"]
