"""The ``structured`` pipeline's Spark tasks: the ``mapInArrow`` functions its ``foreachBatch`` hands each batch to.

Spark's Python workers run these, one task per Kafka partition's range of a batch; the driver
(:mod:`lab.pipelines.structured.pipeline`) only builds them. Each carries the batch's ``mid-output`` and
``task-failure`` hooks (:func:`lab.pipelines.shared.tasks.midway_hook`); their delivery guarantees are the
sink modes' (the pipeline's module docstring).
"""

from __future__ import annotations

import time

from lab.kafka.read import rows_of_arrow, rows_of_records
from lab.pipelines.driver import DriverContext
from lab.pipelines.shared.tasks import midway_hook
from lab.sinks.reader import open_sink


def database_writer(ctx: DriverContext, batch: int, fail_once: bool, records: bool = False):
    """The ``mapInArrow`` function that writes one Spark partition to the run's database sink.

    ``records``: its input is Kafka's records, parsed here (:func:`lab.kafka.read.rows_of_records`), not events.

    Delivery guarantee: the sink mode's, per part ``batch-<batch>-kafka-<Kafka partition>``
    (each Spark partition holds one Kafka partition's range, with either reader).
    On failure the task raises; Spark retries it, and an append sink then
    holds the rows the failed attempt had committed as well.
    """

    def write(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        part = TaskContext.get().partitionId()
        rows = rows_of_records(batches) if records else rows_of_arrow(batches)
        hook = midway_hook(ctx, batch, fail_once)
        # A range of transaction markers only has no rows and nothing to commit under any key.
        key = f"batch-{batch}-kafka-{rows[0][2]}" if rows else f"batch-{batch}-empty-{part}"
        with open_sink(ctx.run_dir) as sink:
            outcome = sink.write_batch(rows, key, on_midway=hook)
        yield pa.RecordBatch.from_pydict({"part": [part], "rows": [len(rows)], "outcome": [outcome]},
                                         schema=pa.schema([("part", pa.int32()), ("rows", pa.int64()),
                                                           ("outcome", pa.string())]))

    return write


#: Seconds a ``mid-output`` crash of the files sink waits for the batch's other tasks to finish their files.
OTHER_FILES_WAIT_S = 15.0


def await_other_files(out_dir, before: set[str], others: int, timeout_s: float = OTHER_FILES_WAIT_S) -> int:
    """Wait until ``others`` files not in ``before`` are complete in ``out_dir``; how many were (at the timeout too)."""
    from lab.sinks.files import complete_data_files

    deadline = time.monotonic() + timeout_s
    while True:
        new = len(complete_data_files(out_dir) - before)
        if new >= others or time.monotonic() >= deadline:
            return new
        time.sleep(0.05)


def files_passthrough(ctx: DriverContext, batch: int, fail_once: bool, out_dir=None, others: int = 0):
    """The ``mapInArrow`` identity in front of the file writer that carries the task's fault hook.

    The hook runs after half of the partition's rows have been handed on.
    Delivery guarantee: every row once, in order (it adds and drops nothing).
    On failure (the planned ``task-failure``) the task raises; Spark's file
    commit protocol deletes the failed attempt's file and retries the task.

    A ``mid-output`` crash first waits (up to :data:`OTHER_FILES_WAIT_S`) until
    the batch's ``others`` other tasks have finished their files in ``out_dir``
    (each Spark partition of a batch writes one), so the killed attempt leaves
    complete files no log entry lists, beside its own cut-short one. Without
    the wait the kill usually came while every task's file was still open
    (measured: 26 files, 2 unreadable, no complete file of the killed attempt).
    """
    crash_planned = (out_dir is not None and others > 0
                     and any(f.kind == "driver-crash" and f.point == "mid-output" and f.batch == batch
                             for f in ctx.pending))
    if crash_planned:  # the files complete before this batch: the others are those that come after
        from lab.sinks.files import complete_data_files

        before = complete_data_files(out_dir)

    def passthrough(batches):
        hook = midway_hook(ctx, batch, fail_once)
        if hook is None:
            yield from batches
            return
        items = list(batches)
        total = sum(b.num_rows for b in items)
        handed = 0
        for b in items:
            if handed < total // 2 <= handed + b.num_rows:
                cut = total // 2 - handed
                yield b.slice(0, cut)
                if crash_planned:
                    await_other_files(out_dir, before, others)
                hook()
                yield b.slice(cut)
            else:
                yield b
            handed += b.num_rows
        if total == 0:
            hook()

    return passthrough
