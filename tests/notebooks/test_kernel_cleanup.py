"""A kernel interrupt or restart mid-run leaves no process of the run behind."""

from __future__ import annotations

import time

import pytest

from lab.events import read_events
from tests.integration.conftest import assert_all_gone, run_pids

pytestmark = pytest.mark.notebook

START = """
from lab import notebook as nb
cfg = nb.config(events=200000, rate=500)
result = nb.run(cfg, quiet=True)
"""


def wait_for_run(runs_dir, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dirs = [d for d in runs_dir.glob("*") if (d / "events.jsonl").exists()]
        if dirs and any(e["type"] == "batch-done" for e in read_events(dirs[0])):
            return dirs[0]
        time.sleep(0.2)
    raise AssertionError("the run never got going")


@pytest.fixture
def kernel(runs_dir):
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=__import__("os").environ.copy())
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    yield km, kc
    kc.stop_channels()
    if km.is_alive():
        km.shutdown_kernel(now=True)


def test_kernel_interrupt_mid_run(kernel, runs_dir):
    km, kc = kernel
    msg_id = kc.execute(START)
    run_dir = wait_for_run(runs_dir)
    pids = run_pids(run_dir)
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=60)
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
    assert_all_gone(pids)
    # and the kernel's own threads of the run are gone
    kc.execute("import threading; print(sorted(t.name for t in threading.enumerate() if t.name.startswith('lab-')))")
    out = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = kc.get_iopub_msg(timeout=30)
        if m["msg_type"] == "stream":
            out += m["content"]["text"]
            break
    assert out.strip() == "[]"


def test_kernel_restart_mid_run(kernel, runs_dir):
    km, kc = kernel
    kc.execute(START)
    run_dir = wait_for_run(runs_dir)
    pids = run_pids(run_dir)
    km.restart_kernel(now=False)
    assert_all_gone(pids)
