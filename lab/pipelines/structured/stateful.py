"""The ``structured`` pipeline's stateful queries (``--query window-count|dedupe|session-count``).

Both read the event time the producer stamped (``event_time_ms``) as the
column ``event_ts`` and declare a watermark of ``--watermark`` seconds on it,
so Spark keeps a bounded state in its state store (``--state-store``:
``hdfs``, the default HDFS-backed provider, or ``rocksdb``), under
``<run_dir>/checkpoint/state/<operator>/<partition>/``: one version per
micro-batch (``N.delta`` files and periodic ``N.snapshot`` for HDFS,
``N.zip`` for RocksDB). A batch re-run after a crash reloads the version of
the batch before it and computes the same result again.

``window-count``
    ``groupBy(window(event_ts, --window), key).count()`` in update output
    mode: each micro-batch hands ``foreachBatch`` the running count of every
    (window, key) it changed. The change since the previous batch (what an
    ``append`` sink stores, and a downstream ``SUM`` reads) is that count
    minus the one in the state store's previous version, read with Spark's
    state data source (``spark.read.format("statestore")``,
    :func:`previous_counts`). Each task writes its Spark partition's rows with
    :meth:`lab.sinks.database.Sink.write_windows` under batch key
    ``batch-<batch id>-part-<partition>`` (the aggregation's output is
    hash-partitioned by its group key, so a replay gives each partition the
    same groups).
``dedupe``
    ``dropDuplicatesWithinWatermark(["event_id"])`` before the sink: copies of
    an event (a producer retry after a lost acknowledgement, without
    idempotence) are dropped by the engine, whatever the sink does.
``session-count``
    ``transformWithStateInPandas`` with a processor that keeps each key's
    open session and an event-time timer
    (:mod:`lab.pipelines.structured.sessions`); its rows carry their own
    change (``delta``) and are written as ``window-count``'s are, a session
    in place of a window.

Delivery guarantee
------------------
The state is exactly once: a batch's state version is replaced, never added
to, when the batch runs again. The output is as the sink makes it:
``append`` stores a replayed batch's changes twice (its windows over by the
batch's contribution); ``idempotent`` rewrites the same running counts;
``transactional`` skips a batch key already committed. Rows behind the
watermark are dropped by Spark on purpose (:mod:`lab.audit.window` counts
them as ``late_dropped``).

On failure
----------
As the ``structured`` pipeline: the named points and ``task-failure`` act
inside the same ``foreachBatch`` function, in the task of Spark partition
:data:`lab.pipelines.shared.tasks.FAULT_PARTITION`; a missing state version (a
checkpoint deleted by hand) fails the batch with Spark's error.
"""

from __future__ import annotations

from lab.pipelines.driver import DriverContext
from lab.pipelines.shared.tasks import midway_hook
from lab.sinks.reader import open_sink

#: The columns ``window-count`` hands ``foreachBatch``.
WINDOW_COLUMNS = ("window_start", "window_end", "key", "count")
#: What each output task of ``window-count`` returns to the driver.
WINDOW_PART_SCHEMA = "part int, rows long, counted long, outcome string"
#: Spark's state store providers, by ``--state-store``.
STATE_STORE_CONF = "spark.sql.streaming.stateStore.providerClass"
#: RocksDB's changelog files: ``session-count`` sets it (see :func:`session_conf`).
CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"


def session_conf(query: str) -> dict[str, str]:
    """The session settings a query needs beyond its state store provider.

    ``session-count`` writes RocksDB's changelog (``N.changelog`` beside the
    ``N.zip`` snapshots): Spark's change feed (``readChangeFeed``) reads a
    RocksDB store's changes from those files only. Measured without them:
    ``CANNOT_READ_STREAMING_STATE_FILE`` (``3.changelog does not exist``).
    """
    return {CHANGELOG_CONF: "true"} if query == "session-count" else {}


def stateful_query(source, query: str, window_s: float, watermark_s: float, gap_ms: int = 0):
    """The query's output DataFrame and its output mode, from the event stream ``source``.

    ``gap_ms``: ``session-count``'s session gap.

    Raises
    ------
    ValueError
        For a query that is not stateful (the caller keeps ``passthrough``'s own path).
    """
    from pyspark.sql import functions as F

    # lesson: stateful-query
    timed = (source.withColumn("event_ts", F.timestamp_millis("event_time_ms"))
             .withWatermark("event_ts", f"{int(round(watermark_s * 1000))} milliseconds"))
    if query == "dedupe":
        return timed.dropDuplicatesWithinWatermark(["event_id"]).drop("event_ts"), "append"
    if query == "session-count":
        from lab.pipelines.structured.sessions import session_query

        return session_query(timed, gap_ms), "update"
    if query == "window-count":
        counts = timed.groupBy(F.window("event_ts", f"{int(round(window_s * 1000))} milliseconds"), "key").count()
        return counts.select(F.unix_millis("window.start").alias("window_start"),
                             F.unix_millis("window.end").alias("window_end"), "key", "count"), "update"
    raise ValueError(f"not a stateful query: {query!r}")
    # end lesson: stateful-query


def previous_counts(spark, checkpoint: str, batch: int) -> dict[tuple[int, str], int]:
    """``{(window_start_ms, key): count}`` in the state store as ``batch - 1`` left it (empty for batch 0).

    Read with Spark's state data source, which loads the committed version
    of every state partition; the state is small (windows × keys the
    watermark still keeps).
    """
    if batch <= 0:
        return {}
    from pyspark.sql import functions as F

    state = spark.read.format("statestore").option("batchId", batch - 1).load(checkpoint)
    rows = state.select(F.unix_millis("key.window.start").alias("s"), F.col("key.key").alias("k"),
                        F.col("value.count").alias("c")).collect()
    return {(int(r["s"]), r["k"]): int(r["c"]) for r in rows}


def window_writer(ctx: DriverContext, batch: int, fail_once: bool, previous: dict[tuple[int, str], int] | None):
    """The ``mapInArrow`` function that writes one Spark partition of ``window-count``'s or ``session-count``'s counts.

    Each row goes to the sink as ``(window_start, window_end, key, count,
    delta)`` with ``delta = count - previous[(window_start, key)]``; with
    ``previous`` None the rows bring their own ``delta`` column (``session-count``).
    Delivery guarantee: the sink mode's per batch key
    ``batch-<batch>-part-<partition>``. On failure the task raises; Spark
    retries it, and an append sink then holds the changes the failed attempt
    had committed as well.
    """

    def write(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        part = TaskContext.get().partitionId()
        rows = []
        for b in batches:
            cols = b.to_pydict()
            if previous is None:
                rows.extend(zip(*(cols[c] for c in (*WINDOW_COLUMNS, "delta"))))
                continue
            for start, end, key, count in zip(*(cols[c] for c in WINDOW_COLUMNS)):
                rows.append((start, end, key, count, count - previous.get((start, key), 0)))
        hook = midway_hook(ctx, batch, fail_once)
        with open_sink(ctx.run_dir) as sink:
            outcome = sink.write_windows(rows, f"batch-{batch}-part-{part}", on_midway=hook)
        yield pa.RecordBatch.from_pydict(
            {"part": [part], "rows": [len(rows)], "counted": [sum(r[4] for r in rows)], "outcome": [outcome]},
            schema=pa.schema([("part", pa.int32()), ("rows", pa.int64()), ("counted", pa.int64()),
                              ("outcome", pa.string())]))

    return write


def state_progress(progress: dict) -> dict | None:
    """What a query progress says of its state: rows, bytes, rows dropped behind the watermark.

    ``None`` when the query has no stateful operator.
    """
    ops = progress.get("stateOperators") or []
    if not ops:
        return None
    return {
        "batch": int(progress["batchId"]),
        "state_rows": sum(int(o.get("numRowsTotal", 0)) for o in ops),
        "state_bytes": sum(int(o.get("memoryUsedBytes", 0)) for o in ops),
        "dropped_by_watermark": sum(int(o.get("numRowsDroppedByWatermark", 0)) for o in ops),
        "commit_ms": sum(int(o.get("commitTimeMs", 0)) for o in ops),
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
    }

