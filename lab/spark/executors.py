"""Spark's executor JVMs: how the lab tells one from any other process (by its main class on the command line).

Read by the fault injector (``executor-crash``), the cluster's leak checks and the tasks' own hooks.
"""

from __future__ import annotations

#: What an executor JVM's command line contains (Spark's executor main class).
EXECUTOR_MAIN_CLASS = "CoarseGrainedExecutorBackend"


def is_executor(proc) -> bool:
    """Whether ``proc`` (a ``psutil.Process``) is a Spark executor JVM; ``False`` when it is gone or unreadable."""
    try:
        return any(EXECUTOR_MAIN_CLASS in part for part in proc.cmdline())
    except Exception:  # psutil.NoSuchProcess, AccessDenied, ZombieProcess
        return False
