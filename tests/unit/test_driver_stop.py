"""The last driver's stop: SIGKILL once it shows no progress for the grace, not while it still writes its batches."""

from __future__ import annotations

import subprocess
import sys
import time

from lab.run.driver_process import DriverProcess


def child(seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


def test_a_driver_that_keeps_progressing_gets_past_the_grace():
    proc = child(1.6)
    began = time.monotonic()
    try:
        assert DriverProcess._wait_with_progress(proc, 0.6, lambda: True, 10.0, began)
    finally:
        proc.kill()
        proc.wait()
    assert 1.5 < time.monotonic() - began < 3.0


def test_a_quiet_driver_is_given_up_on_after_the_grace():
    proc = child(30)
    began = time.monotonic()
    try:
        assert not DriverProcess._wait_with_progress(proc, 0.6, lambda: False, 10.0, began)
        assert proc.poll() is None  # giving up is the caller's SIGKILL
    finally:
        proc.kill()
        proc.wait()
    assert 0.5 < time.monotonic() - began < 1.5


def test_progress_never_takes_the_stop_past_its_limit():
    proc = child(30)
    began = time.monotonic()
    try:
        assert not DriverProcess._wait_with_progress(proc, 0.6, lambda: True, 1.2, began)
    finally:
        proc.kill()
        proc.wait()
    assert 1.1 < time.monotonic() - began < 2.0
