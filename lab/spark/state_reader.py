"""Spark's own readers of a query's state (Spark 4.0): ``format("statestore")`` and ``format("state-metadata")``.

Run as its own process, by a notebook or a test, on a finished run::

    python -m lab.spark.state_reader CHECKPOINT OUT.json --batches 2,3,4

It starts a local Spark session (one thread, no UI), reads the checkpoint
and writes one JSON file:

``operators``  ``state-metadata``'s rows: each stateful operator, its partitions, and the batches it has state for.
``batches``    per batch asked for, the state as that batch committed it (``batchId``): its rows
               (window, key) and the sum of their counts (``window-count``; ``null`` for another query).
``changes``    the change feed (``readChangeFeed``) from the first batch asked for to the last: per batch and
               change type, the rows changed.

Delivery guarantee: none; it reads the checkpoint and changes nothing in it (Spark's readers are read-only).

On failure: a checkpoint without state, or a batch it has no state for, fails with Spark's error, printed on
stderr; the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path


def read_state(spark, checkpoint: str, batches: list[int]) -> dict:
    """The JSON the module docstring describes, read with ``spark``."""
    from pyspark.sql import functions as F

    operators = [r.asDict() for r in spark.read.format("state-metadata").load(checkpoint).collect()]
    out_batches = {}
    for batch in batches:
        # lesson: state-reader
        state = spark.read.format("statestore").option("batchId", batch).load(checkpoint)
        # end lesson: state-reader
        counted = "count" in state.schema["value"].dataType.fieldNames()
        row = state.agg(F.count("*").alias("rows"),
                        (F.sum("value.count") if counted else F.lit(None)).alias("counted")).collect()[0]
        out_batches[str(batch)] = {"rows": int(row["rows"]), "counted": None if row["counted"] is None else int(row["counted"])}
    changes = []
    if len(batches) > 1:
        feed = (spark.read.format("statestore").option("readChangeFeed", "true")
                .option("changeStartBatchId", min(batches)).option("changeEndBatchId", max(batches)).load(checkpoint))
        changes = [{"batch": int(r["batch_id"]), "change_type": r["change_type"], "rows": int(r["rows"])}
                   for r in feed.groupBy("batch_id", "change_type").agg(F.count("*").alias("rows"))
                   .orderBy("batch_id", "change_type").collect()]
    return {"operators": [{k: v for k, v in op.items() if k != "operatorProperties"} for op in operators],
            "batches": out_batches, "changes": changes}


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
        spark = spark_session("local[1]", Path(work), app_name="lab-state-reader", ui=False)
        try:
            result = read_state(spark, str(Path(a.checkpoint).resolve()), batches)
        except Exception as e:  # Spark's error, in one line
            print(f"error: {str(e).splitlines()[0][:400]}", file=sys.stderr)
            return 1
        finally:
            spark.stop()
    Path(a.out).write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
