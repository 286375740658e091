"""The executor kill ordered through the run directory (an executor the supervisor cannot see)."""

import subprocess
import sys
import threading
import time

import psutil

from lab.spark.executors import KILL_ORDER_FILE, order_kill, take_kill_order, this_host


def _victim():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    return proc, psutil.Process(proc.pid)


def test_the_waiting_task_takes_the_order_and_sigkills_its_executor(tmp_path):
    proc, jvm = _victim()
    try:
        answer = {}
        t = threading.Thread(target=lambda: answer.update(pid=order_kill(tmp_path, this_host(), jvm.pid, 10)))
        t.start()
        while not take_kill_order(tmp_path, jvm):
            assert t.is_alive(), "the supervisor gave up before the task saw the order"
            time.sleep(0.01)
        t.join()
        assert proc.wait(10) == -9 and answer["pid"] == jvm.pid
        assert not (tmp_path / KILL_ORDER_FILE).exists() and (tmp_path / KILL_ORDER_FILE).with_suffix(".taken").exists()
    finally:
        proc.kill()


def test_an_order_for_another_executor_is_left_alone_and_withdrawn(tmp_path):
    proc, jvm = _victim()
    try:
        t = threading.Thread(target=lambda: order_kill(tmp_path, "another-host", jvm.pid, 0.5))
        t.start()
        while not (tmp_path / KILL_ORDER_FILE).exists():
            time.sleep(0.01)
        assert not take_kill_order(tmp_path, jvm)
        t.join()
        assert proc.poll() is None and not (tmp_path / KILL_ORDER_FILE).exists()
    finally:
        proc.kill()


def test_a_withdrawn_order_is_never_taken(tmp_path):
    """The supervisor's deadline passes with the order unread: withdrawn, and the executor lives."""
    proc, jvm = _victim()
    try:
        assert order_kill(tmp_path, this_host(), jvm.pid, wait_s=0.1) is None
        assert not take_kill_order(tmp_path, jvm) and proc.poll() is None
    finally:
        proc.kill()
