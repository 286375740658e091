"""Task-side fault hooks and executor detection shared by the Spark pipelines, without Spark."""

from types import SimpleNamespace

import psutil
import pytest

from lab.config import make_config
from lab.errors import DriverConfigError
from lab.faults.plan import Fault
from lab.pipelines.shared import tasks
from lab.spark.executors import is_executor


class _Proc:
    def __init__(self, cmdline=None, error=None):
        self._cmdline, self._error = cmdline, error

    def cmdline(self):
        if self._error:
            raise self._error
        return self._cmdline


def test_is_executor_reads_the_command_line_and_survives_vanished_processes():
    java = ["/usr/bin/java", "-cp", "jars/*", "org.apache.spark.executor.CoarseGrainedExecutorBackend",
            "--driver-url", "spark://x", "--executor-id", "1"]
    assert is_executor(_Proc(java))
    assert not is_executor(_Proc(["/usr/bin/java", "org.apache.spark.deploy.worker.Worker"]))
    assert not is_executor(_Proc(error=psutil.NoSuchProcess(4242)))
    assert not is_executor(_Proc(error=psutil.AccessDenied(4242)))
    assert not is_executor(psutil.Process())  # this test process


class _Ctx:
    """The parts of a DriverContext a task hook uses."""

    def __init__(self, pending=()):
        self.pending = list(pending)
        self.points = []
        self.events = SimpleNamespace(write=lambda *a, **k: None)

    def point(self, name, batch):
        self.points.append((name, batch))


@pytest.fixture
def task(monkeypatch):
    """Pretend to run inside a Spark task: set the partition and attempt ``TaskContext.get()`` reports."""
    import pyspark

    current = {}
    monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls: SimpleNamespace(
        partitionId=lambda: current["partition"], attemptNumber=lambda: current["attempt"])))

    def set_task(partition, attempt):
        current.update(partition=partition, attempt=attempt)

    return set_task


def crash_at(point, batch):
    return Fault(kind="driver-crash", batch=batch, point=point, index=0)


def test_no_hook_unless_a_fault_is_planned_for_this_task(task):
    task(tasks.FAULT_PARTITION, 0)
    assert tasks.midway_hook(_Ctx(), 3, fail_once=False) is None  # the sink then writes in one transaction
    assert tasks.midway_hook(_Ctx([crash_at("mid-output", 2)]), 3, fail_once=False) is None
    assert tasks.midway_hook(_Ctx([crash_at("after-offset-log", 3)]), 3, fail_once=False) is None
    task(tasks.FAULT_PARTITION + 1, 0)
    assert tasks.midway_hook(_Ctx([crash_at("mid-output", 3)]), 3, fail_once=True, executor_crash=True) is None


def test_task_failure_fails_the_first_attempt_only(task):
    task(tasks.FAULT_PARTITION, 0)
    hook = tasks.midway_hook(_Ctx(), 5, fail_once=True)
    with pytest.raises(tasks.InjectedTaskFailure, match="batch 5, Spark partition 0"):
        hook()
    task(tasks.FAULT_PARTITION, 1)
    assert tasks.midway_hook(_Ctx(), 5, fail_once=True) is None


def test_mid_output_point_is_reached_on_every_attempt(task):
    ctx = _Ctx([crash_at("mid-output", 2)])
    for attempt in (0, 1):
        task(tasks.FAULT_PARTITION, attempt)
        tasks.midway_hook(ctx, 2, fail_once=False)()
    assert ctx.points == [("mid-output", 2), ("mid-output", 2)]


def test_executor_crash_in_local_mode_carries_on(task, monkeypatch):
    monkeypatch.setattr(tasks, "executor_jvm", lambda: None)  # local mode: no executor JVM to wait for
    task(tasks.FAULT_PARTITION, 0)
    hook = tasks.midway_hook(_Ctx(), 1, fail_once=False, executor_crash=True)
    assert hook is not None and hook() is None
    task(tasks.FAULT_PARTITION, 1)
    assert tasks.midway_hook(_Ctx(), 1, fail_once=False, executor_crash=True) is None


def test_receiver_driver_refuses_an_impossible_point_as_a_config_error():
    from lab.pipelines.receiver.pipeline import _check_points

    ctx = SimpleNamespace(config=make_config(pipeline="receiver", wal="off", ack="stored"),
                          pending=[crash_at("after-wal-before-ack", 1)])
    with pytest.raises(DriverConfigError, match="after-wal-before-ack exists only with --wal on --ack stored "
                                                r"\(this run: --wal off --ack stored\)"):
        _check_points(ctx)
    ctx.config = ctx.config.with_options(wal="on")
    _check_points(ctx)  # possible: no error
