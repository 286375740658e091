"""A driver JVM kept between runs against a new one for each run: what a run's first driver would save.

Every run of the lab starts its drivers fresh: a new Python process, a new JVM, a new
SparkSession. The start-up techniques (:mod:`lab.host.start_tuning`) shortened that start; this bench
measures what is left of it, by asking what the same run costs in a JVM that has already
served one. It is a design question (a driver process per run is the lab's protocol), so the
bench runs Spark directly, not ``lab run``.

One run here is a query like the structured pipeline's: Spark's Kafka source on a topic of its
own (:data:`EVENTS` events in 3 partitions, batches of :data:`MAX_BATCH`), ``foreachBatch`` with a
``mapInArrow`` job whose rows are collected, on the lab's session (:func:`lab.spark.session.spark_session`:
the class archive, the JVM flags, the connector), its Python workers started
(:func:`lab.spark.session.start_sql_python_workers`), until every record has been through a batch.

* ``new`` (today): one process per run (:func:`child`, one run), timed from its start to its exit.
* ``reused``: one process for all the runs of a round. Before each run after the first, the
  SparkContext is stopped and a new one made in the same JVM with the run's own directory, as a
  kept driver would for its next run; that run is timed from the stop of the one before to its
  last batch. The process's first run starts cold, as ``new`` does, and is left out (``cold``).

The variants run in turns, round after round, on one embedded broker (its CPU is in both).
Recorded per run: seconds to the first batch done and to the last, wall time, and the
machine's CPU seconds (``/proc/stat``); per variant the medians.

Run with ``python bench/driver_reuse.py [--rounds N] [--runs K] [--out FILE]`` (default
``bench/results/driver_reuse.json``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import core_seconds, machine  # noqa: E402
from bench.run_cpu import machine_busy_s  # noqa: E402
from bench.testbed import emit, produce, summary  # noqa: E402

EVENTS = 1500
PARTITIONS = 3
MAX_BATCH = 500
VARIANTS = ("new", "reused")
FIGURES = ("first_batch_s", "all_done_s", "wall_s", "cpu_s")


def one_query(spark, bootstrap: str, topic: str, checkpoint: Path) -> tuple[float, float]:
    """Run the bench's query over ``topic`` until every record is through; wall-clock times of its first and last
    batch."""
    done: list[tuple[int, float]] = []

    def count(batches):
        import pyarrow as pa

        yield pa.RecordBatch.from_pydict({"rows": [sum(b.num_rows for b in batches)]})

    def process(df, batch_id) -> None:
        rows = df.mapInArrow(count, "rows long").collect()
        done.append((sum(r["rows"] for r in rows), time.time()))

    source = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", MAX_BATCH).load())
    query = (source.selectExpr("CAST(value AS STRING) AS value").writeStream.foreachBatch(process)
             .option("checkpointLocation", str(checkpoint)).trigger(processingTime="0.5 seconds").start())
    deadline = time.monotonic() + 120
    while sum(n for n, _ in done) < EVENTS:
        if not query.isActive or time.monotonic() > deadline:
            raise SystemExit(f"query over {topic} stopped after {sum(n for n, _ in done)} of {EVENTS} records")
        time.sleep(0.02)
    query.stop()
    return done[0][1], done[-1][1]


def child(bootstrap: str, topics: list[str], work: Path) -> None:
    """Run one query per topic in this process, each on a new SparkContext; print one JSON line per run.

    Each line's ``start`` is when the run began (the process's start for the first; the stop
    of the run before for the others) as ``time.time()``; ``cpu_start``/``cpu_end`` the
    machine's CPU seconds then and at its last batch.
    """
    from lab.spark.session import SQL_TASK_MODULES, SQL_WORKER_IMPORTS, spark_session, start_sql_python_workers

    spark = None
    for i, topic in enumerate(topics):
        start, cpu_start = time.time(), machine_busy_s()
        if spark is not None:
            spark.stop()
        run_dir = work / f"run-{i}"
        spark = spark_session("local[2]", run_dir, app_name=f"bench-reuse-{i}", kafka_connector=True,
                              worker_imports=SQL_WORKER_IMPORTS)
        start_sql_python_workers(spark, SQL_TASK_MODULES)
        first, last = one_query(spark, bootstrap, topic, run_dir / "checkpoint")
        print(json.dumps({"topic": topic, "start": start, "first_batch": first, "last_batch": last,
                          "cpu_start": cpu_start, "cpu_end": machine_busy_s()}), flush=True)
    spark.stop()


def child_runs(stdout: str) -> list[dict]:
    """The JSON lines :func:`child` printed, in order (pure; other lines are Spark's or Java's)."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith('{"topic"')]


def figures(run: dict, start: float, end: float | None = None, cpu: float | None = None) -> dict:
    """One run's figures from a :func:`child` line, timed from ``start`` (pure).

    ``end`` and ``cpu``: the wall-clock end and the machine's CPU seconds measured from
    outside (a process per run: its exit included); otherwise the child's own.
    """
    end = run["last_batch"] if end is None else end
    cpu = run["cpu_end"] - run["cpu_start"] if cpu is None else cpu
    return {"first_batch_s": round(run["first_batch"] - start, 2), "all_done_s": round(run["last_batch"] - start, 2),
            "wall_s": round(end - start, 2), "cpu_s": round(cpu, 2)}


def fill_topics(bootstrap: str, topics: list[str]) -> None:
    """Create each topic and write :data:`EVENTS` acknowledged records to it (:func:`bench.testbed.produce`)."""
    from lab.kafka.tools import create_topic

    for t in topics:
        create_topic(bootstrap, t, PARTITIONS)
        produce(bootstrap, t, EVENTS)


def run_child(bootstrap: str, topics: list[str], work: Path) -> tuple[list[dict], float, float, float]:
    """One child process over ``topics``: its runs, and its start, end and machine CPU seconds from outside."""
    cpu, start = machine_busy_s(), time.time()
    p = subprocess.run([sys.executable, __file__, "--child", bootstrap, str(work), *topics],
                       capture_output=True, text=True)
    end, cpu = time.time(), machine_busy_s() - cpu
    runs = child_runs(p.stdout)
    if p.returncode != 0 or len(runs) != len(topics):
        raise SystemExit(f"bench child failed ({p.returncode}): {p.stderr[-1500:]}")
    return runs, start, end, cpu


def measure_round(bootstrap: str, rnd: int, runs: int, work: Path) -> list[dict]:
    """One round: ``runs`` runs of ``new`` (a process each), then ``runs`` + 1 of ``reused`` (one process)."""
    out = []
    new_topics = [f"new-{rnd}-{k}" for k in range(runs)]
    reused_topics = [f"reused-{rnd}-{k}" for k in range(runs + 1)]
    fill_topics(bootstrap, new_topics + reused_topics)
    for k, topic in enumerate(new_topics):
        (run,), start, end, cpu = run_child(bootstrap, [topic], work / topic)
        out.append({"variant": "new", "round": rnd, "run": k, **figures(run, start, end, cpu)})
    lines, start, _, _ = run_child(bootstrap, reused_topics, work / f"reused-{rnd}")
    for k, run in enumerate(lines):
        variant = "cold" if k == 0 else "reused"
        out.append({"variant": variant, "round": rnd, "run": k, **figures(run, start if k == 0 else run["start"])})
    return out


def medians(runs: list[dict]) -> dict:
    """Per variant: the runs' count and min/median/max of each figure (pure)."""
    by: dict = {}
    for r in runs:
        by.setdefault(r["variant"], []).append(r)
    return {v: {"runs": len(rs), **{k: summary([r[k] for r in rs]) for k in FIGURES}} for v, rs in by.items()}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(argv[1], argv[3:], Path(argv[2]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3, help="runs of each variant per round")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "driver_reuse.json"))
    a = ap.parse_args(argv)
    from lab.broker import embedded as broker

    before = core_seconds()
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="lab-driver-reuse-") as tmp:
        work = Path(tmp)
        info = broker.start_embedded(work / "broker-logs")
        try:
            for rnd in range(a.rounds):
                for r in measure_round(info.bootstrap, rnd, a.runs, work):
                    print(json.dumps(r), flush=True)
                    runs.append(r)
        finally:
            broker.stop_embedded(info, discard_data=True)
    emit({"machine": {**machine(), "core_seconds_before": before}, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
          "events": EVENTS, "partitions": PARTITIONS, "max_batch": MAX_BATCH, "rounds": a.rounds,
          "runs_per_round": a.runs, "summary": medians(runs), "runs": runs}, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
