"""Where a Spark pipeline's time goes: its stages timed one at a time over a topic already written.

Each stage is one Spark batch job over the whole topic (``earliest`` to
``latest``) with Spark's ``kafka`` reader and the structured pipeline's
options (:func:`lab.pipelines.structured.kafka_input.spark_kafka_options`),
in a session like the pipeline's (``--master``, default ``local[2]``), each
stage adding one step of the pipeline's path to the one before:

``read``       the records fetched by the JVM's Kafka consumers, every value's bytes touched
               (``sum(length(value))``): Spark's reader alone;
``parse``      the JSON values parsed into the lab's event columns
               (:func:`~lab.pipelines.structured.kafka_input.events_from_kafka_rows`), counted in the JVM;
``to_python``  those rows handed to Python workers through Arrow (``mapInArrow``) and turned into the
               sink's row tuples (:func:`lab.kafka.read.rows_of_arrow`): everything but the sink, when
               Spark SQL parses (stateful queries, the files sink);
``to_python_raw`` the records themselves handed to Python workers through Arrow and parsed there
               (:func:`lab.kafka.read.rows_of_records`), as the database writer of a stateless query and
               the direct pipeline do: everything but the sink on their path.

Stages run in turns, ``--rounds`` times (the first round also warms the JVM
up; the median of the rounds is reported). A stage's records/s beside the
pipeline's steady rate and the sink alone's (``bench/pipelines.py``) says
which step takes the time. Prints one JSON object; ``bench/pipelines.py``
runs this script in its own process, on the broker of the run it measured::

    python bench/spark_stages.py --bootstrap 127.0.0.1:9092 --topic T --partitions 3 [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `lab` importable from the checkout

STAGES = ("read", "parse", "to_python", "to_python_raw")


def count_rows(batches):
    """``mapInArrow``: the sink's row tuples built from the partition's rows, then only their count yielded."""
    import pyarrow as pa

    from lab.kafka.read import rows_of_arrow

    rows = rows_of_arrow(batches)
    yield pa.RecordBatch.from_pydict({"rows": [len(rows)]}, schema=pa.schema([("rows", pa.int64())]))


def count_record_rows(batches):
    """``mapInArrow``: Kafka's records parsed into the sink's row tuples in the task, then only their count yielded."""
    import pyarrow as pa

    from lab.kafka.read import rows_of_records

    rows = rows_of_records(batches)
    yield pa.RecordBatch.from_pydict({"rows": [len(rows)]}, schema=pa.schema([("rows", pa.int64())]))


def stage_job(spark, stage: str, bootstrap: str, topic: str, partitions: int):
    """The DataFrame whose ``collect()`` runs ``stage`` over the whole topic; its one value is the rows counted."""
    from pyspark.sql import functions as F

    from lab.pipelines.shared.kafka_reader import kafka_records
    from lab.pipelines.structured.kafka_input import events_from_kafka_rows, spark_kafka_options

    options = spark_kafka_options(bootstrap, topic, partitions, 0, "read_uncommitted")
    del options["maxOffsetsPerTrigger"]  # a streaming option; this batch job reads the whole topic
    reader = spark.read.format("kafka")
    for key, value in {**options, "endingOffsets": "latest"}.items():
        reader = reader.option(key, value)
    records = reader.load()
    if stage == "read":
        return records.agg(F.count(F.lit(1)).alias("rows"), F.sum(F.length("value")).alias("bytes"))
    if stage == "to_python_raw":
        return kafka_records(records).mapInArrow(count_record_rows, "rows long").agg(F.sum("rows").alias("rows"))
    events = events_from_kafka_rows(records)
    if stage == "parse":
        return events.agg(F.count("event_id").alias("rows"), F.sum("seq").alias("seqs"))
    if stage == "to_python":
        return events.mapInArrow(count_rows, "rows long").agg(F.sum("rows").alias("rows"))
    raise ValueError(f"unknown stage {stage!r}; valid: {', '.join(STAGES)}")


def measure(bootstrap: str, topic: str, partitions: int, master: str = "local[2]", rounds: int = 3) -> dict:
    """Each stage's seconds and records/s over the topic, ``rounds`` times in turns; medians and trials."""
    from lab.spark.session import spark_session

    trials: dict[str, list[float]] = {s: [] for s in STAGES}
    rows: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="lab-bench-stages-") as work:
        spark = spark_session(master, Path(work), app_name="lab-bench-stages", kafka_connector=True, ui=False)
        try:
            for _ in range(rounds):
                for stage in STAGES:
                    job = stage_job(spark, stage, bootstrap, topic, partitions)
                    t = time.perf_counter()
                    got = job.collect()[0]["rows"]
                    trials[stage].append(round(time.perf_counter() - t, 3))
                    rows[stage] = int(got)
        finally:
            spark.stop()
    out = {}
    for stage in STAGES:
        seconds = statistics.median(trials[stage])
        out[stage] = {"rows": rows[stage], "median_s": seconds, "records_per_s": round(rows[stage] / seconds),
                      "trials_s": trials[stage]}
    return {"master": master, "rounds": rounds, "stages": out}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=int, required=True)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args(argv)
    if a.rounds < 1:
        print(f"error: bad --rounds {a.rounds}; valid: 1 or more", file=sys.stderr)
        return 2
    print(json.dumps(measure(a.bootstrap, a.topic, a.partitions, a.master, a.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
