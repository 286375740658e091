"""Spark's executor JVMs: how the lab tells one from any other process (by its main class on the command line).

Read by the fault injector (``executor-crash``), the cluster's leak checks and the tasks' own hooks.

An executor in another container or on another machine (the compose stack's workers) is not in any
process tree the supervisor can see. Its kill is ordered through the run directory, which the driver
and the executors share: the supervisor writes :data:`KILL_ORDER_FILE` naming the executor by host and
PID (:func:`order_kill`), the waiting task on that executor takes the order and SIGKILLs its own executor
JVM (:func:`take_kill_order`). The kill is as real as a local one; only who sends the signal differs.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from lab.host.atomic_file import write_atomic

#: The supervisor's order to kill an executor it cannot reach (``{"host": ..., "pid": ...}``), in the run directory.
KILL_ORDER_FILE = "executor-kill.json"

#: What an executor JVM's command line contains (Spark's executor main class).
EXECUTOR_MAIN_CLASS = "CoarseGrainedExecutorBackend"


def is_executor(proc) -> bool:
    """Whether ``proc`` (a ``psutil.Process``) is a Spark executor JVM; ``False`` when it is gone or unreadable."""
    try:
        return any(EXECUTOR_MAIN_CLASS in part for part in proc.cmdline())
    except Exception:  # psutil.NoSuchProcess, AccessDenied, ZombieProcess
        return False


def executor_processes(driver_pid: int, spark_master: str, runs_dir: str) -> list:
    """The executor JVMs of a driver, as ``psutil.Process`` objects, oldest PID first.

    Executors of ``local-cluster`` are descendants of the driver's JVM; those of
    a ``lab cluster`` (``spark://``) are descendants of its workers. Either way
    they are found in process trees the lab started, never by name alone.
    """
    import psutil

    try:
        found = [p for p in psutil.Process(driver_pid).children(recursive=True) if is_executor(p)]
    except psutil.NoSuchProcess:
        return []
    if spark_master.startswith("spark://"):
        for pid in executor_pids(runs_dir):
            try:
                found.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
    return sorted(found, key=lambda p: p.pid)


def kill_executor(driver_pid: int | None, spark_master: str, runs_dir: str, targets: list[dict],
                  run_dir: Path) -> int | None:
    """SIGKILL one executor JVM: the one the driver named last (its ``executor-target`` events), else the oldest.

    One named on another host is killed by the task waiting on it, on an order through ``run_dir``
    (:func:`order_kill`). Returns the PID killed, or ``None`` when the driver has no executor to kill.
    """
    import psutil

    named = targets[-1] if targets else None
    if named and named.get("host") not in (None, this_host()):
        return order_kill(run_dir, named["host"], named["pid"])
    if driver_pid is None:
        return None
    executors = executor_processes(driver_pid, spark_master, runs_dir)
    if not executors:
        return None
    target = next((p for p in executors if named and p.pid == named.get("pid")), executors[0])
    try:
        target.kill()
    except psutil.NoSuchProcess:
        return None
    return target.pid


def executor_pids(runs_dir: str | Path) -> list[int]:
    """PIDs of executor JVMs running under the recorded cluster's workers."""
    import psutil

    from lab.spark.cluster import load_running

    info = load_running(runs_dir)
    if info is None:
        return []
    found = []
    for pid in info.worker_pids:
        try:
            for child in psutil.Process(pid).children(recursive=True):
                if is_executor(child):
                    found.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def this_host() -> str:
    """The name an ``executor-target`` event gives for where its executor runs."""
    return socket.gethostname()


def order_kill(run_dir: Path, host: str, pid: int, wait_s: float = 10.0) -> int | None:
    """Order the task waiting on executor ``pid`` at ``host`` to SIGKILL its executor JVM.

    Returns ``pid`` once the task took the order, or ``None`` when no task took it within ``wait_s``.
    Taking and withdrawing are each one rename of the order, so exactly one of them happens: a task
    that took the order kills, and an order withdrawn is never taken after.
    """
    order = Path(run_dir) / KILL_ORDER_FILE
    write_atomic(order, json.dumps({"host": host, "pid": pid}))
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and order.exists():
        time.sleep(0.02)
    try:
        order.rename(order.with_suffix(".withdrawn"))
    except FileNotFoundError:
        return pid  # taken
    return None


def take_kill_order(run_dir: Path, jvm) -> bool:
    """Whether the supervisor ordered ``jvm`` (this task's executor, a ``psutil.Process``) killed; if so, kill it.

    Called by the waiting task. The order is taken (renamed to ``.taken``) before the SIGKILL, so the
    supervisor knows it was; an order it withdrew first cannot be taken.
    """
    order = Path(run_dir) / KILL_ORDER_FILE
    try:
        target = json.loads(order.read_text())
    except (OSError, ValueError):
        return False
    if target.get("host") != this_host() or target.get("pid") != jvm.pid:
        return False
    try:
        order.rename(order.with_suffix(".taken"))
    except FileNotFoundError:
        return False  # withdrawn since it was read
    jvm.kill()
    return True
