"""Spark's executor JVMs: how the lab tells one from any other process (by its main class on the command line).

Read by the fault injector (``executor-crash``), the cluster's leak checks and the tasks' own hooks.
"""

from __future__ import annotations

from pathlib import Path

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


def kill_executor(driver_pid: int | None, spark_master: str, runs_dir: str, named: list[int]) -> int | None:
    """SIGKILL one executor JVM: the one the driver named last (``executor-target``), else the oldest.

    Returns the PID killed, or ``None`` when the driver has no executor.
    """
    import psutil

    if driver_pid is None:
        return None
    executors = executor_processes(driver_pid, spark_master, runs_dir)
    if not executors:
        return None
    target = next((p for p in executors if named and p.pid == named[-1]), executors[0])
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
