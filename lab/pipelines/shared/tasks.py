"""Faults inside Spark tasks, shared by the ``direct`` and ``structured`` pipelines; executor JVMs by process.

Spark's Python workers import this module in every output task, so it
imports nothing heavy at its top (PySpark and psutil are imported where
they are used) and nothing of the driver's.

The task of :data:`FAULT_PARTITION`
-----------------------------------
Faults that act inside a batch's output hit the task of Spark partition
:data:`FAULT_PARTITION`, once part of its rows are written
(:func:`midway_hook`, passed to :meth:`lab.sinks.database.Sink.write_batch` as
``on_midway``, or called by the structured pipeline's file writer half-way):

``mid-output``      ``ctx.point("mid-output", batch)``: a planned
                    ``driver-crash`` blocks the task there until the
                    supervisor kills the driver's process group. PySpark's
                    worker daemon puts itself and its workers in a process
                    group of their own (``os.setpgid(0, 0)`` in
                    ``pyspark/daemon.py``), so the kill does not reach the
                    worker directly: the daemon sees its pipe to the dead
                    JVM close and sends its group SIGHUP.
``task-failure``    the task's first attempt raises
                    :class:`InjectedTaskFailure`; Spark retries the task
                    (the pipelines give local masters task retries).
``executor-crash``  the task's first attempt names its executor JVM in an
                    ``executor-target`` event and waits for the supervisor
                    to kill it (:func:`await_executor_kill`); the worker
                    then exits as it would on a dead machine, and Spark
                    reruns the task on another executor.

Delivery effect: whatever the task wrote before the hook stays written
(``append`` and ``idempotent`` sinks have committed the first half;
``transactional`` nothing), so a retried or rerun task writes those rows
again.

Executor JVMs
-------------
:func:`is_executor` tells a Spark executor JVM from any other process by
its command line (``CoarseGrainedExecutorBackend``); everything that looks
for executors (a task finding its own, the receiver naming its receiver's)
uses it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from lab import events as ev
from lab.spark.executors import is_executor, take_kill_order, this_host

if TYPE_CHECKING:
    from lab.pipelines.driver import DriverContext

#: The Spark partition whose task carries ``mid-output``, ``task-failure`` and ``executor-crash``.
FAULT_PARTITION = 0
#: Seconds the task named for an executor crash waits for the kill before it carries on.
EXECUTOR_KILL_WAIT_S = 20.0


class InjectedTaskFailure(RuntimeError):
    """The planned ``task-failure``: raised once inside a task, after part of its rows were written."""


def executor_jvm():
    """The executor JVM this Python worker belongs to (``None`` in local mode, where there is none)."""
    import psutil

    try:
        return next((p for p in psutil.Process().parents() if is_executor(p)), None)
    except psutil.Error:
        return None


def await_executor_kill(ctx: DriverContext, batch: int) -> None:
    """Name this task's executor JVM for the supervisor's kill (``executor-target``) and wait for it.

    The Python worker exits (status 137) as soon as its executor JVM is
    gone, as it would on a dead machine: left running it could finish its
    output after Spark had already rerun the task elsewhere. Returns after
    :data:`EXECUTOR_KILL_WAIT_S` without a kill, and at once in local mode.
    """
    import psutil

    jvm = executor_jvm()
    if jvm is None:
        return
    ctx.events.write(ev.EXECUTOR_TARGET, pid=jvm.pid, batch=batch, worker_pid=os.getpid(), host=this_host())
    deadline = time.monotonic() + EXECUTOR_KILL_WAIT_S
    while time.monotonic() < deadline:
        try:
            take_kill_order(ctx.run_dir, jvm)
            gone = not psutil.pid_exists(jvm.pid) or jvm.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            gone = True
        if gone:
            os._exit(137)
        time.sleep(0.02)


def midway_hook(ctx: DriverContext, batch: int, fail_once: bool, executor_crash: bool = False) -> Callable | None:
    """What the running task does once part of its rows are written; ``None`` when nothing is planned for it.

    Only the task of :data:`FAULT_PARTITION` gets a hook, and only when a
    ``driver-crash`` at ``mid-output`` of ``batch`` is planned (every
    attempt), or on its first attempt a ``task-failure`` (``fail_once``) or
    an ``executor-crash`` (``executor_crash``) is. Without a hook the sink
    writes the task's rows in one transaction.

    Must be called inside a Spark task (it reads ``TaskContext``).
    """
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc.partitionId() != FAULT_PARTITION:
        return None
    first_attempt = tc.attemptNumber() == 0
    crash_here = any(f.kind == "driver-crash" and f.point == "mid-output" and f.batch == batch for f in ctx.pending)
    if not (crash_here or (first_attempt and (fail_once or executor_crash))):
        return None

    def hook() -> None:
        if crash_here:
            ctx.point("mid-output", batch)
        if executor_crash and first_attempt:
            await_executor_kill(ctx, batch)
        if fail_once and first_attempt:
            raise InjectedTaskFailure(f"planned task-failure in batch {batch}, Spark partition {FAULT_PARTITION}")

    return hook


def executor_pid(executor_id: str) -> int | None:
    """The PID of executor ``executor_id`` among this driver's descendants (None in local mode)."""
    import psutil

    if executor_id == "driver":
        return None
    for proc in psutil.Process(os.getpid()).children(recursive=True):
        if not is_executor(proc):
            continue
        try:
            cmd = proc.cmdline()
        except psutil.Error:
            continue
        if "--executor-id" in cmd:
            i = cmd.index("--executor-id")
            if i + 1 < len(cmd) and cmd[i + 1] == executor_id:
                return proc.pid
    return None
