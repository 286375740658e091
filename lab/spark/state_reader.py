"""Spark's own readers of a query's state (Spark 4.0): ``format("statestore")`` and ``format("state-metadata")``.

Run as its own process, by a notebook or a test, on a finished run::

    python -m lab.spark.state_reader CHECKPOINT OUT.json --batches 2,3,4

It starts a local Spark session (one thread, no UI), reads the checkpoint
and writes one JSON file:

``operators``  ``state-metadata``'s rows: each stateful operator, its partitions, and the batches it has state for.
``batches``    per batch asked for, the state as that batch committed it (``batchId``): its rows
               (window, key) and the sum of their counts (``window-count``; ``null`` for another query), and for
               ``window-count`` ``windows``, each ``[window_start_ms, key, count]``.
               ``session-count`` (``transformWithStateInPandas``): the state variable ``session`` (Spark's
               reader needs its name, ``stateVarName``, taken from ``state-metadata``), its rows, and
               ``sessions``, each key's open session ``[key, start, last, count]``. A deduplication keyed by
               ``event_id`` (the Kafka sink's ``dedupe``): ``ids``, the event ids in the state, sorted.
``changes``    the change feed (``readChangeFeed``) from the first batch asked for to the last: per batch and
               change type, the rows changed.

Delivery guarantee: none; it reads the checkpoint and changes nothing in it (Spark's readers are read-only).

A checkpoint whose commit log names its state files (``stateUniqueIds``: state checkpoint format 2, which real-time
mode writes) is read with ``spark.sql.streaming.stateStore.checkpointFormatVersion`` 2 (:func:`checkpoint_format`):
measured on 4.3.0, the reader otherwise looks for ``1.changelog`` and fails with
``CANNOT_READ_STREAMING_STATE_FILE``.

On failure: a checkpoint without state, or a batch it has no state for, fails with Spark's error, printed on
stderr; the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path


def value_state_var(operators: list[dict]) -> str | None:
    """The first value state variable of a ``transformWithState`` operator in ``state-metadata``'s rows, else None.

    Spark's reader reads such an operator one state variable at a time and refuses to guess which.
    """
    for op in operators:
        try:
            props = json.loads(op.get("operatorProperties") or "{}")
        except ValueError:
            continue
        for var in props.get("stateVariables") or []:
            if var.get("stateVariableType") == "ValueState":
                return var["stateName"]
    return None


#: The session setting for a state checkpoint's format (1: ``N.delta``/``N.changelog``; 2: files named by id).
FORMAT_CONF = "spark.sql.streaming.stateStore.checkpointFormatVersion"


def checkpoint_format(checkpoint: Path | str) -> int:
    """The state checkpoint format a query's commit log says it wrote: 2 when an entry lists ``stateUniqueIds``."""
    commits = Path(checkpoint) / "commits"
    for f in sorted((f for f in commits.glob("*") if f.name.isdigit()), key=lambda f: int(f.name), reverse=True):
        return 2 if "stateUniqueIds" in f.read_text(errors="replace") else 1
    return 1


def read_state(spark, checkpoint: str, batches: list[int]) -> dict:
    """The JSON the module docstring describes, read with ``spark``."""
    from pyspark.sql import functions as F

    operators = [r.asDict() for r in spark.read.format("state-metadata").load(checkpoint).collect()]
    var = value_state_var(operators)

    def reader():
        r = spark.read.format("statestore")
        return r.option("stateVarName", var) if var else r

    out_batches = {}
    for batch in batches:
        # lesson: state-reader
        state = reader().option("batchId", batch).load(checkpoint)
        # end lesson: state-reader
        counted = "count" in state.schema["value"].dataType.fieldNames()
        row = state.agg(F.count("*").alias("rows"),
                        (F.sum("value.count") if counted else F.lit(None)).alias("counted")).collect()[0]
        entry = {"rows": int(row["rows"]), "counted": None if row["counted"] is None else int(row["counted"])}
        if {"window", "key"} <= set(state.schema["key"].dataType.fieldNames()) and counted:
            entry["windows"] = [[int(r["s"]), r["k"], int(r["c"])] for r in state.select(
                F.unix_millis("key.window.start").alias("s"), F.col("key.key").alias("k"),
                F.col("value.count").alias("c")).orderBy("s", "k").collect()]
        if state.schema["key"].dataType.fieldNames() == ["event_id"]:
            entry["ids"] = sorted(r[0] for r in state.select("key.event_id").collect())
        if var:
            entry["state_var"] = var
            entry["sessions"] = [[r["k"], int(r["s"]), int(r["l"]), int(r["c"])] for r in state.select(
                F.col("key.key").alias("k"), F.col("value.start").alias("s"), F.col("value.last").alias("l"),
                F.col("value.count").alias("c")).orderBy("k").collect()]
        out_batches[str(batch)] = entry
    changes = []
    if len(batches) > 1:
        feed = (reader().option("readChangeFeed", "true")
                .option("changeStartBatchId", min(batches)).option("changeEndBatchId", max(batches)).load(checkpoint))
        changes = [{"batch": int(r["batch_id"]), "change_type": r["change_type"], "rows": int(r["rows"])}
                   for r in feed.groupBy("batch_id", "change_type").agg(F.count("*").alias("rows"))
                   .orderBy("batch_id", "change_type").collect()]
    return {"operators": [{k: v for k, v in op.items() if k != "operatorProperties"} for op in operators],
            "batches": out_batches, "changes": changes}


def spark_error_line(text: str) -> str:
    """The line of a Spark error that names it (``[ERROR_CLASS] ...``), else its first line.

    A Java exception reaches Python as a ``Py4JJavaError`` whose first line only says which call failed
    ("An error occurred while calling o187.collectToPython.").
    """
    lines = text.splitlines() or [""]
    for line in lines:
        m = re.search(r"\[[A-Z][A-Z0-9_.]+\]", line)
        if m:
            return line[m.start():].strip()
    return lines[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.spark.state_reader", description=__doc__.splitlines()[0])
    p.add_argument("checkpoint")
    p.add_argument("out")
    p.add_argument("--batches", required=True, help="comma-separated batch ids, e.g. 2,3,4")
    a = p.parse_args(argv)
    try:
        batches = sorted({int(b) for b in a.batches.split(",")})
    except ValueError:
        print(f"error: bad --batches {a.batches!r}; valid: batch ids separated by commas, e.g. 2,3,4", file=sys.stderr)
        return 2
    from lab.spark.session import spark_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="lab-state-reader-") as work:
        fmt = checkpoint_format(a.checkpoint)
        spark = spark_session("local[1]", Path(work), app_name="lab-state-reader", ui=False,
                              extra={FORMAT_CONF: str(fmt)} if fmt != 1 else None)
        try:
            result = read_state(spark, str(Path(a.checkpoint).resolve()), batches)
        except Exception as e:  # Spark's error, in one line
            print(f"error: {spark_error_line(str(e))[:400]}", file=sys.stderr)
            return 1
        finally:
            spark.stop()
    Path(a.out).write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
