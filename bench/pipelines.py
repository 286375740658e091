"""Pipeline throughput, as a ratio to raw consume throughput measured in the same run.

For each ``--pipeline``: start one embedded Apache Kafka broker (through the
lab's proxy, as every client sees it), run the pipeline as a normal lab
scenario (:func:`lab.run.supervisor.run_scenario`, ``rate=0``, no faults,
``--kafka-reader``, default ``auto``: Spark's own ``kafka`` reader for
structured and direct on Apache Kafka; the reader that ran is recorded from
the report as ``kafka_reader``) against it, then read the same topic back with
one kafka-python consumer a few times, with kafka-python's defaults (a plain
consumer: ``ratio``'s baseline) and with the lab's bulk readers' client
settings (:data:`lab.kafka.tools.READ_SETTINGS`: no pure-Python CRC check,
about 3x faster; ``ratio_same_client_settings``). ``ratio_to_faster`` is the
pipeline against the faster of the two. The pipeline's records/s is
taken from its own timeline: rows of all batches over the span from the
first batch's start (``began``, when the engine handed it over, if the
pipeline logs it) to the last batch's end, so the JVM start is excluded and
the first batch's warm-up is included; the rate without the first batch is
reported as ``steady_records_per_s``. Target: ``ratio`` >= 0.5 (receiver 0.3); the goal
for structured with Spark's reader: ``ratio_to_faster`` >= 1.0 (:data:`GOALS`).

Each pipeline is measured ``--runs`` times (default 3), each run with its
own broker and baseline; the entry is the run with the median ``ratio_to_faster``,
with every run's figures under ``runs`` and ``meets_target`` judged on that run.

Writes ``bench/results/pipelines.json``; entries of pipelines not measured
in this invocation are kept, so pipelines can be measured one at a time::

    python bench/pipelines.py --pipeline structured [--events 200000] [--max-batch 50000] [--runs 3]
        [--kafka-reader auto|labkafka|spark]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import machine  # noqa: E402
RESULTS = ROOT / "bench" / "results" / "pipelines.json"
TARGET_RATIO = 0.5

#: Per-pipeline settings that make a fair throughput run (a batch size worth the per-batch cost).
DEFAULTS = {
    # structured: 200,000 offsets per trigger, the default 200,000-event backlog in one micro-batch (as
    # direct below). With Spark's reader (auto on Apache Kafka; kafka.max.poll.records 10,000), measured
    # while a test suite ran on the same 2 cores: 16,000 records/s at 100,000 (two batches; median of 3
    # runs) -> 19,800 at 200,000 (median of 3, alternated); in a warm JVM 43,600 -> 58,000 (and 34,200 at
    # 50,000). Admission control only: a replayed batch is still its logged offset range. One batch has
    # no steady_records_per_s: --max-batch 100000 gives it. (With labkafka, 25,000-50,000 gave 0.28 and
    # 0.45 of the plain baseline.)
    "structured": {"max_batch_records": 200_000, "batch_interval_s": 0.0, "sink": "append"},
    # direct: max_batch_records is per Kafka partition, so 100,000 takes a 200,000-event backlog
    # in one batch; its first batch comes one interval after the driver starts, and 10 s lets the
    # producer finish first, so the batch reads a complete backlog (not the producer's pace).
    "direct": {"max_batch_records": 100_000, "batch_interval_s": 10.0, "sink": "append"},
    # receiver: max_batch_records / batch_interval_s is the receiver's maxRate, so 100,000 per 1 s
    # batch does not throttle it; the defaults --wal on --ack stored are what is measured.
    "receiver": {"max_batch_records": 100_000, "batch_interval_s": 1.0, "sink": "append"},
}
#: Pipelines whose issue sets a different target ratio than TARGET_RATIO.
TARGETS = {"receiver": 0.3}
#: Goals on ``ratio_to_faster`` (the pipeline against the faster raw consumer), per pipeline and reader.
GOALS = {("structured", "spark"): 1.0}


def raw_consume(bootstrap: str, topic: str, partitions: int, records: int, timeout_s: float = 60.0,
                **settings) -> tuple[int, float]:
    """Read ``records`` records from the start of the topic with one plain kafka-python consumer.

    Assigned, no group; ``settings`` go to the consumer on top of
    :data:`lab.kafka.tools.CONSUMER_DEFAULTS`. It stops on the count, not on
    end offsets, because the broker's reported end can lag right after a
    burst of writes (measured on Tansu: a few hundred records short).

    Returns
    -------
    tuple
        ``(records read, records/s)``; fewer records than asked when
        ``timeout_s`` passes without one arriving.
    """
    from kafka import TopicPartition

    from lab.kafka import tools as kafka_tools

    c = kafka_tools.consumer(bootstrap, **settings)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning()
    n = 0
    t = last = time.perf_counter()
    while n < records and time.perf_counter() - last < timeout_s:
        got = sum(len(v) for v in c.poll(timeout_ms=200, max_records=10_000).values())
        if got:
            n += got
            last = time.perf_counter()
    took = last - t
    c.close()
    return n, n / took


def pipeline_rate(run_dir: Path) -> dict:
    """Records/s of a finished run, from its ``batch-start`` / ``batch-done`` events."""
    from lab.events import read_events

    events = read_events(run_dir)
    starts = [e for e in events if e["type"] == "batch-start"]
    dones = [e for e in events if e["type"] == "batch-done"]
    if not starts or not dones:
        raise RuntimeError(f"run {run_dir} logged no complete batch")
    began = {e["batch"]: e.get("began", e["t"]) for e in starts}
    begin = min(began.values())
    end = max(e["t"] for e in dones)
    rows = sum(e["rows"] for e in dones)
    produced = next((e["t"] for e in events if e["type"] == "producer-done"), None)
    first = min(began)
    later = [e for e in dones if e["batch"] != first]
    steady = None
    if later:
        # Without the first batch, which also pays for the JVM's and the Python workers' warm-up.
        steady = round(sum(e["rows"] for e in later) / (end - min(began[e["batch"]] for e in later)))
    first_done = min(e["t"] for e in dones if e["batch"] == first)
    return {
        "rows": rows,
        "batches": len(dones),
        "span_s": round(end - begin, 3),
        "first_batch_s": round(first_done - began[first], 3),
        "records_per_s": round(rows / (end - begin)),
        "steady_records_per_s": steady,
        # When the producer was still writing as the first batch began, the pipeline could
        # not have gone faster than the producer: the figure is then a lower bound.
        "producer_done_before_first_batch": produced is not None and produced <= begin,
    }


def measure(pipeline: str, events: int, partitions: int, raw_repeats: int, runs_dir: Path, overrides: dict,
            kafka_reader: str = "auto") -> dict:
    """One pipeline run and its raw-consume baseline on the same broker and topic.

    Raises
    ------
    RuntimeError
        When the run did not deliver every event exactly once (no faults were planned),
        or the consumer read a different number of records than the run's topic holds.
    """
    from lab.broker import embedded as broker
    from lab.config import make_config
    from lab.kafka.tools import READ_SETTINGS
    from lab.registry import PIPELINES
    from lab.run.supervisor import run_scenario

    settings = {**DEFAULTS.get(pipeline, {}), **{k: v for k, v in overrides.items() if v is not None}}
    topic = f"bench-{pipeline}"
    # Apache Kafka whatever LAB_BROKER says: Spark's reader needs it (Tansu's ListOffsets answers, see
    # lab.pipelines.structured.kafka_input), and the run sees it as a Kafka of its own (kafka_bootstrap).
    info = broker.start_embedded(runs_dir / f"broker-{pipeline}", product="kafka")
    try:
        cfg = make_config(pipeline=pipeline, events=events, rate=0, partitions=partitions, topic=topic,
                          kafka_bootstrap=info.bootstrap, runs_dir=str(runs_dir), deadline_s=900,
                          name=f"bench-{pipeline}", broker="kafka", kafka_reader=kafka_reader, **settings)
        result = run_scenario(cfg)
        topic = result.config.topic  # the supervisor gives each run a topic of its own
        a = result.audit
        if not result.drained or a.acked != events or a.lost or a.unseen:
            raise RuntimeError(f"{pipeline} run did not drain cleanly: {a.counts()} (see {result.run_dir})")
        rate = pipeline_rate(result.run_dir)
        baselines = {}
        # Two baselines: kafka-python's defaults (a plain consumer: the target's ratio), and
        # the Kafka source's own client settings (no CRC check, same fetch sizes: like for like).
        reader_settings = dict(READ_SETTINGS)  # check_crcs=False included
        for label, settings_ in (("reader_settings", reader_settings), ("client_defaults", {})):
            trials = []
            for _ in range(raw_repeats):
                read, eps = raw_consume(info.bootstrap, topic, partitions, events, **settings_)
                if read != events:
                    raise RuntimeError(f"raw consumer read {read} records, the run acknowledged {events}")
                trials.append(round(eps))
            baselines[label] = {"median_per_s": statistics.median(trials), "trials": trials, "settings": settings_}
    finally:
        broker.stop_embedded(info)
    plain = baselines["client_defaults"]["median_per_s"]
    alike = baselines["reader_settings"]["median_per_s"]
    faster = max(plain, alike)
    steady = rate["steady_records_per_s"]
    # None for the receiver, which has no Kafka reader to choose.
    reader = result.report["settings"].get("kafka_reader")
    goal = GOALS.get((pipeline, reader))
    return {
        **rate,
        "kafka_reader": reader,
        "raw_consume_per_s": plain,
        "raw_consume_faster_per_s": faster,
        "raw_consume": baselines,
        # The target's ratio: the pipeline against a plain kafka-python consumer.
        "ratio": round(rate["records_per_s"] / plain, 3),
        "ratio_steady": round(steady / plain, 3) if steady else None,
        # Like for like: the baseline with the Kafka source's own client settings (no CRC check).
        "ratio_same_client_settings": round(rate["records_per_s"] / alike, 3),
        "ratio_steady_same_client_settings": round(steady / alike, 3) if steady else None,
        # The goal for structured with Spark's reader: at least the faster raw consumer.
        "ratio_to_faster": round(rate["records_per_s"] / faster, 3),
        "ratio_steady_to_faster": round(steady / faster, 3) if steady else None,
        "goal_ratio_to_faster": goal,
        "meets_goal": None if goal is None else rate["records_per_s"] / faster >= goal,
        "target_ratio": TARGETS.get(pipeline, TARGET_RATIO),
        "load_average": os.getloadavg(),
        "events": events,
        "partitions": partitions,
        # From the report: kafka_reader is the reader the driver used, kafka_reader_asked the --kafka-reader.
        "settings": {k: result.report["settings"].get(k, cfg.__dict__.get(k))
                     for k in ("sink", "max_batch_records", "batch_interval_s", "spark_master",
                               *PIPELINES[pipeline].options, "kafka_reader_asked")
                     if k != "kafka_reader_asked" or k in result.report["settings"]},
        "broker": f"{info.product} {info.version}",
        "guarantee": a.guarantee,
        "run_dir": str(result.run_dir),
        "timings": result.timings,
    }


def main(argv=None) -> int:
    from lab.registry import PIPELINES

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pipeline", action="append", choices=sorted(PIPELINES),
                   help="pipeline to measure; repeat for several (default structured)")
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--max-batch", type=int, default=None, help="records per batch (default per pipeline)")
    p.add_argument("--batch-interval", type=float, default=None, help="seconds between batches (default per pipeline)")
    p.add_argument("--sink", default=None, help="sink mode (default append)")
    p.add_argument("--raw-repeats", type=int, default=3, help="raw consume trials; the median is the baseline")
    p.add_argument("--runs", type=int, default=3, help="pipeline runs; the entry is the median-ratio run")
    p.add_argument("--runs-dir", default=None, help="where the runs go (default: a temporary directory, removed)")
    p.add_argument("--kafka-reader", default="auto", choices=("auto", "labkafka", "spark"),
                   help="structured and direct: auto (Spark's reader on Apache Kafka), labkafka or spark")
    a = p.parse_args(argv)
    overrides = {"max_batch_records": a.max_batch, "batch_interval_s": a.batch_interval, "sink": a.sink}
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results.setdefault("pipelines", {})
    with tempfile.TemporaryDirectory(prefix="lab-bench-") as tmp:
        runs_dir = Path(a.runs_dir).resolve() if a.runs_dir else Path(tmp)
        for name in a.pipeline or ["structured"]:
            runs = []
            for i in range(a.runs):
                print(f"{name}: {a.events:,} events, run {i + 1} of {a.runs} ...", flush=True)
                r = measure(name, a.events, a.partitions, a.raw_repeats, runs_dir, overrides, a.kafka_reader)
                if not a.runs_dir:
                    r["run_dir"] = None  # removed with the temporary directory
                runs.append(r)
                print(f"  reader {r['kafka_reader'] or '-'}: {r['records_per_s']:,} records/s; ratio "
                      f"{r['ratio']} to {r['raw_consume_per_s']:,}/s (plain consumer), {r['ratio_to_faster']} "
                      f"to {r['raw_consume_faster_per_s']:,}/s (the faster one)", flush=True)
            by_goal = sorted(runs, key=lambda x: x["ratio_to_faster"])
            r = by_goal[(len(by_goal) - 1) // 2]
            ratios = sorted(x["ratio"] for x in runs)
            target = r["target_ratio"]
            r = {**r, "ratio_min": ratios[0], "ratio_max": ratios[-1],
                 "ratio_to_faster_min": by_goal[0]["ratio_to_faster"],
                 "ratio_to_faster_max": by_goal[-1]["ratio_to_faster"],
                 "meets_target": r["ratio"] >= target, "min_meets_target": ratios[0] >= target,
                 "runs": [{k: x[k] for k in ("kafka_reader", "ratio", "ratio_steady", "ratio_to_faster",
                                             "ratio_steady_to_faster", "records_per_s", "steady_records_per_s",
                                             "raw_consume_per_s", "raw_consume_faster_per_s", "first_batch_s",
                                             "load_average")} for x in runs]}
            results["pipelines"][name] = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), **r}
            print(f"  median run ({r['kafka_reader'] or 'no'} reader): {r['records_per_s']:,} records/s over "
                  f"{r['batches']} batches "
                  f"({r['steady_records_per_s'] or '-'}/s after the first) vs plain consumer "
                  f"{r['raw_consume_per_s']:,}/s: ratio {r['ratio']} (steady {r['ratio_steady']}; target >= "
                  f"{r['target_ratio']}); vs a consumer with the source's settings "
                  f"{r['raw_consume']['reader_settings']['median_per_s']:,}/s: {r['ratio_same_client_settings']}; "
                  f"to the faster: {r['ratio_to_faster']} (steady {r['ratio_steady_to_faster']}; goal "
                  f"{r['goal_ratio_to_faster'] or '-'}); ratios of the {len(runs)} runs {ratios}",
                  flush=True)
    results["machine"] = machine()
    results["versions"] = {pkg: version(pkg) for pkg in ("pyspark", "kafka-python")}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
