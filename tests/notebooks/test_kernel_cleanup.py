"""A kernel interrupt or restart mid-run leaves no process of the run behind."""

from __future__ import annotations

import os
import queue
import signal
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
    km.start_kernel(env=os.environ.copy())
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    # A kernel that stops answering dumps its threads' stacks (to this test's captured stderr) on SIGUSR1.
    reply = kc.execute_interactive("import faulthandler, signal; faulthandler.register(signal.SIGUSR1, "
                                   "all_threads=True)",
                                   timeout=60)
    assert reply["content"]["status"] == "ok"  # else SIGUSR1 would end the kernel instead of dumping its stacks
    yield km, kc
    kc.stop_channels()
    if km.is_alive():
        km.shutdown_kernel(now=True)


def test_kernel_interrupt_mid_run(kernel, runs_dir):
    km, kc = kernel
    # stop_on_error=False: after the interrupt the kernel would otherwise abort the requests queued behind this
    # one, the probe below included (measured on a loaded machine: a reply without user_expressions)
    msg_id = kc.execute(START, stop_on_error=False)
    run_dir = wait_for_run(runs_dir)
    pids = run_pids(run_dir)
    km.interrupt_kernel()
    reply = shell_reply(km, kc, msg_id)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    assert_all_gone(pids)
    # and the kernel's own threads of the run are gone. Read from the shell reply, which the kernel sends
    # once the code ran: ipykernel 7 can drop IOPub messages (stream output) after an interrupt.
    names = "sorted(t.name for t in threading.enumerate() if t.name.startswith('lab-'))"
    probe = kc.execute("import threading", user_expressions={"lab_threads": names})
    reply = shell_reply(km, kc, probe)
    assert reply["status"] == "ok", reply
    assert reply["user_expressions"]["lab_threads"]["data"]["text/plain"] == "[]"


def shell_reply(km, kc, msg_id, timeout=60):
    """The shell reply to ``msg_id``; a kernel that sends none in ``timeout`` s dumps its stacks, then fails."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reply = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]
    if not km.is_alive():
        raise AssertionError(f"the kernel died without a reply to {msg_id} within {timeout} s")
    os.kill(km.provisioner.pid, signal.SIGUSR1)
    time.sleep(1)
    raise AssertionError(f"the kernel sent no reply to {msg_id} in {timeout} s (its stacks are in the captured stderr)")


def test_kernel_restart_mid_run(kernel, runs_dir):
    km, kc = kernel
    kc.execute(START)
    run_dir = wait_for_run(runs_dir)
    pids = run_pids(run_dir)
    km.restart_kernel(now=False)
    assert_all_gone(pids)
