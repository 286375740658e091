"""What an executor crash of the ``direct`` pipeline must show, from a run's report and its timeline alone.

The same checks hold wherever the executor ran: ``local-cluster`` (``test_direct``), ``lab cluster``
(``test_cluster``) and a worker container of the compose stack (``tests/stack/run.py``, where the run's
other files stay inside the stack). The expectation comes from the protocol: the task of Spark partition
``FAULT_PARTITION`` names its executor and waits for the kill once half of its rows are written
(:mod:`lab.pipelines.shared.tasks`); Spark reruns the task on a live executor.
"""

from __future__ import annotations

from lab.pipelines.shared.tasks import FAULT_PARTITION


def task_rows(ranges: dict) -> int:
    """Rows of the task of Spark partition FAULT_PARTITION, from a ``batch-start`` event's ranges: the non-empty
    ranges in Kafka partition order, one Spark partition each."""
    active = [hi - lo for _, (lo, hi) in sorted(ranges.items(), key=lambda kv: int(kv[0])) if hi > lo]
    return active[FAULT_PARTITION]


def check_executor_crash(report: dict, events: list[dict]) -> None:
    """The executor its task named was SIGKILLed during that batch, no driver restarted, and the sink shows the
    killed attempt: with the append sink the first half of the task's rows twice, else each event once."""
    fired = report["faults_fired"][0]
    target = [e for e in events if e["type"] == "executor-target"]
    start = next(i for i, e in enumerate(events) if e["type"] == "batch-start" and e["batch"] == fired["batch"])
    assert fired["kind"] == "executor-crash" and target and fired["pid"] == target[-1]["pid"], (fired, target)
    assert target[-1]["batch"] == fired["batch"] and events.index(target[-1]) < start, target[-1]
    assert report["restarts"] == 0 and report["lost"] == report["unseen"] == 0, report
    if report["settings"]["sink"] == "append":
        # The killed attempt had committed the first half of its rows; the rerun wrote them all.
        half = task_rows(events[start]["ranges"]) // 2
        assert (report["duplicated"], report["extra_copies"]) == (half, half), (report["duplicated"], half)
    else:
        assert (report["exactly_once"], report["duplicated"]) == (report["acked"], 0), report
