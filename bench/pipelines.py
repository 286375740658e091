"""Pipeline throughput over a backlog, as a ratio to a raw consumer's, and the producer that paces every run.

For each ``--pipeline``: start one embedded Apache Kafka broker (through the
lab's proxy, as every client sees it) and run the pipeline as a normal lab
scenario (:func:`lab.run.supervisor.run_scenario`, ``rate=0``, no faults,
``--backlog``: the driver gets its turn once the ledgered producer is done, so
every batch reads events already in the topic; ``--kafka-reader`` default
``auto``: Spark's own ``kafka`` reader for structured and direct on Apache
Kafka; the reader that ran is recorded as ``kafka_reader``). In the same run,
on the same broker:

* **the raw consumer**: the run's topic read back with one kafka-python
  consumer, with kafka-python's defaults (``raw_consume_per_s``) and with the
  lab's bulk readers' client settings (:data:`lab.kafka.tools.READ_SETTINGS`:
  no pure-Python CRC check, about 3x faster; ``raw_consume_lab_settings_per_s``);
* **the sink alone**: the same rows written to a fresh sink of the run's mode
  in batches of the run's size (``sink_alone_per_s``): the pipeline cannot go
  faster than its sink, and this says whether the sink is the limit;
* **the ledgered producer's rate** in the run (``ledgered_produce_per_s``), with the client
  ``--producer-client`` names (default ``confluent``: the backlog is written in seconds, not minutes;
  ``producer_client``);
* **Spark's steps alone** (structured with Spark's reader): ``bench/spark_stages.py`` over the run's topic,
  the reader, the JSON parse and the hop to Python each as one batch job (``spark_stages``), and the
  pipeline's time per record split by step (``time_shares``, :func:`time_shares`): where the time goes.

Once per invocation, on a broker of its own: **the producers** (``bench/producers.py``'s
:func:`~bench.producers.producer_comparison`: kafka-python as the lab uses it, kafka-python tuned,
confluent-kafka raw, and the ledgered producer with each client; ``producers``).

The pipeline's rate is taken from its own timeline. ``steady_records_per_s``:
the rows of every batch after the first, over the span from the second
batch's start to the last batch's end (the first batch also pays for the
JVM's and the Python workers' warm-up); ``records_per_s`` includes the first.
Ratios: ``ratio_steady`` to the lab-settings consumer (goal for structured
with Spark's reader >= 0.5, :data:`GOALS`), ``ratio_steady_plain`` to the
plain one.

``--scale``: one more run, ``structured`` with the defaults (its default
reader and batch sizes, rate 0, no backlog) but the transactional sink (the
default append sink is at-least-once by design), on ``--events``, and a
driver crash while the producer still sends (``driver-crash@at=--crash-at``); it must drain exactly
once. Its wall time and the peak resident memory of every process of the run
(this process and its children, sampled every 0.5 s) go under ``scale``.

Writes ``bench/results/pipelines.json``; entries of pipelines not measured
in this invocation are kept, so pipelines can be measured one at a time::

    python bench/pipelines.py --pipeline structured [--events 1000000] [--max-batch 100000] [--runs 1]
        [--kafka-reader auto|labkafka|spark] [--scale [--crash-at 30]] [--no-pipelines]
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
EVENTS = 1_000_000

#: Per-pipeline settings for a backlog of ``--events`` (1,000,000: batches of about 100,000, so the steady rate
#: is measured over nine batches after the first).
DEFAULTS = {
    # structured: 100,000 offsets per trigger, the lab's shortest interval (0.2 s): a batch that takes longer
    # is followed at once by the next.
    "structured": {"max_batch_records": 100_000, "batch_interval_s": 0.2, "sink": "append"},
    # direct: max_batch_records is per Kafka partition and per second of the interval (maxRatePerPartition):
    # 3 partitions x 33,334 x 1 s is a batch of about 100,000.
    "direct": {"max_batch_records": 33_334, "batch_interval_s": 1.0, "sink": "append"},
    # receiver: max_batch_records / batch_interval_s is the receiver's maxRate, so 100,000 per 1 s
    # batch does not throttle it; the defaults --wal on --ack stored are what is measured.
    "receiver": {"max_batch_records": 100_000, "batch_interval_s": 1.0, "sink": "append"},
}
#: Goals on ``ratio_steady`` (the pipeline's steady rate against the lab-settings raw consumer), per pipeline and
#: reader.
GOALS = {("structured", "spark"): 0.5}


def raw_consume(bootstrap: str, topic: str, partitions: int, records: int, timeout_s: float = 60.0,
                **settings) -> tuple[int, float]:
    """Read ``records`` records from the start of the topic with one plain kafka-python consumer.

    Assigned, no group; ``settings`` go to the consumer on top of
    :data:`lab.kafka.tools.CONSUMER_DEFAULTS`. It stops on the count, not on
    end offsets: the count is what was produced, whatever the broker reports
    as its end.

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


def sink_alone(mode: str, events: int, batch: int) -> float:
    """Rows/s of a fresh sink of ``mode`` (SQLite in a temporary directory) given ``events`` rows in batches of
    ``batch``."""
    from lab.sinks.reader import open_sink
    from lab.sinks.spec import sink_spec_for_run

    with tempfile.TemporaryDirectory(prefix="lab-bench-sink-") as tmp:
        spec = sink_spec_for_run(mode, tmp, None)
        with open_sink(spec) as sink:
            rows = [(f"e{i:07d}", i, i % 3, i // 3) for i in range(events)]
            t = time.perf_counter()
            for n, start in enumerate(range(0, events, batch)):
                sink.write_batch(rows[start:start + batch], f"batch-{n}")
            took = time.perf_counter() - t
    return events / took


def spark_stages(bootstrap: str, topic: str, partitions: int, master: str, timeout_s: float = 900.0) -> dict:
    """``bench/spark_stages.py`` over the run's topic, in its own process: each step's records/s in Spark."""
    import subprocess

    cmd = [sys.executable, str(ROOT / "bench" / "spark_stages.py"), "--bootstrap", bootstrap, "--topic", topic,
           "--partitions", str(partitions), "--master", master]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"spark_stages.py failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_shares(steady: float, stages: dict, sink_rate: float, parse_in_task: bool = True) -> dict:
    """The pipeline's time per record split by step, as fractions of it (a step's time per record is 1 / its rate).

    The stages are cumulative (``parse`` includes ``read``), so each step's share is what it adds; the sink's is
    the sink alone's; ``rest`` is what none of them accounts for (micro-batch planning, offset and commit logs,
    tasks waiting for one another). Rough where steps overlap on the 2 cores. ``parse_in_task``: the pipeline's
    path is ``read`` then ``to_python_raw`` (the records to Python, parsed there: ``to_python_and_parse``), else
    ``read``, ``parse`` (Spark SQL), ``to_python``.
    """
    rate = {name: s["records_per_s"] for name, s in stages.items()}
    read = steady / rate["read"]
    sink = steady / sink_rate
    if parse_in_task:
        steps = {"read": read, "to_python_and_parse": steady / rate["to_python_raw"] - read}
        done = steady / rate["to_python_raw"]
    else:
        steps = {"read": read, "parse": steady / rate["parse"] - read,
                 "to_python": steady / rate["to_python"] - steady / rate["parse"]}
        done = steady / rate["to_python"]
    return {k: round(v, 3) for k, v in {**steps, "sink": sink, "rest": 1 - done - sink}.items()}


def producer_rate(run_dir: Path) -> float:
    """The ledgered producer's records/s in a run: its acknowledged sends over ``producer-start`` to
    ``producer-done``."""
    from lab.events import read_events

    events = read_events(run_dir)
    start = next(e["t"] for e in events if e["type"] == "producer-start")
    done = next(e for e in events if e["type"] == "producer-done")
    return done["acked"] / (done["t"] - start)


def measure(pipeline: str, events: int, partitions: int, raw_repeats: int, runs_dir: Path, overrides: dict,
            kafka_reader: str = "auto", producer_client: str = "confluent") -> dict:
    """One pipeline run over a backlog and, on the same broker, the raw consumer, the sink alone and Spark's steps.

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
    # A broker of the bench's own, which the run sees as a Kafka of its own (kafka_bootstrap).
    info = broker.start_embedded(runs_dir / f"broker-{pipeline}")
    try:
        cfg = make_config(pipeline=pipeline, events=events, rate=0, partitions=partitions, topic=topic,
                          kafka_bootstrap=info.bootstrap, runs_dir=str(runs_dir), deadline_s=900, backlog=True,
                          name=f"bench-{pipeline}", kafka_reader=kafka_reader,
                          producer_client=producer_client, **settings)
        result = run_scenario(cfg)
        topic = result.config.topic  # the supervisor gives each run a topic of its own
        a = result.audit
        if not result.drained or a.acked != events or a.lost or a.unseen or a.duplicated:
            raise RuntimeError(f"{pipeline} run did not drain exactly once: {a.counts()} (see {result.run_dir})")
        rate = pipeline_rate(result.run_dir)
        baselines = {}
        for label, settings_ in (("lab_settings", dict(READ_SETTINGS)), ("client_defaults", {})):
            trials = []
            for _ in range(raw_repeats):
                read, eps = raw_consume(info.bootstrap, topic, partitions, events, **settings_)
                if read != events:
                    raise RuntimeError(f"raw consumer read {read} records, the run acknowledged {events}")
                trials.append(round(eps))
            baselines[label] = {"median_per_s": statistics.median(trials), "trials": trials, "settings": settings_}
        stages = None
        if pipeline == "structured" and result.report["settings"].get("kafka_reader") == "spark":
            # Where the time goes: Spark's reader, the JSON parse and the hop to Python, each alone.
            stages = spark_stages(info.bootstrap, topic, partitions,
                                  result.report["settings"].get("spark_master") or "local[2]")
    finally:
        broker.stop_embedded(info)
    ledgered = producer_rate(result.run_dir)
    sink_rate = sink_alone(settings["sink"], events, settings["max_batch_records"] * (
        partitions if pipeline == "direct" else 1))
    lab_consumer = baselines["lab_settings"]["median_per_s"]
    plain = baselines["client_defaults"]["median_per_s"]
    steady = rate["steady_records_per_s"]
    reader = result.report["settings"].get("kafka_reader")  # None for the receiver, which has no reader to choose
    goal = GOALS.get((pipeline, reader))
    return {
        **rate,
        "kafka_reader": reader,
        "raw_consume_lab_settings_per_s": lab_consumer,
        "raw_consume_per_s": plain,
        "raw_consume": baselines,
        "ratio_steady": round(steady / lab_consumer, 3) if steady else None,
        "ratio_steady_plain": round(steady / plain, 3) if steady else None,
        "ratio_with_first_batch": round(rate["records_per_s"] / lab_consumer, 3),
        "goal_ratio_steady": goal,
        "meets_goal": None if goal is None or not steady else steady / lab_consumer >= goal,
        "sink_alone_per_s": round(sink_rate),
        # The sink is the limit when the pipeline's steady rate comes within a fifth of what the sink alone takes.
        "sink_is_the_limit": bool(steady and steady >= 0.8 * sink_rate),
        "spark_stages": stages,
        "time_shares": (time_shares(steady, stages["stages"], sink_rate, parse_in_task=pipeline == "structured")
                        if stages and steady else None),
        "ledgered_produce_per_s": round(ledgered),
        "producer_client": producer_client,
        "load_average": os.getloadavg(),
        "events": events,
        "partitions": partitions,
        # From the report: kafka_reader is the reader the driver used, kafka_reader_asked the --kafka-reader.
        "settings": {k: result.report["settings"].get(k, cfg.__dict__.get(k))
                     for k in ("sink", "max_batch_records", "batch_interval_s", "spark_master", "backlog",
                               *PIPELINES[pipeline].options, "kafka_reader_asked")
                     if k != "kafka_reader_asked" or k in result.report["settings"]},
        "broker": f"{info.product} {info.version}",
        "guarantee": a.guarantee,
        "run_dir": str(result.run_dir),
        "timings": result.timings,
    }


class PeakMemory:
    """The largest sum of resident memory over this process and all its children, sampled every ``every_s``."""

    def __init__(self, every_s: float = 0.5) -> None:
        import threading

        self.every_s, self.peak_bytes, self.peak_processes = every_s, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="bench-peak-memory", daemon=True)

    def _sample(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop.is_set():
            total, count = 0, 0
            for p in [me, *me.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                    count += 1
                except psutil.Error:  # a process that ended between the listing and the read
                    pass
            if total > self.peak_bytes:
                self.peak_bytes, self.peak_processes = total, count
            self._stop.wait(self.every_s)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def scale_run(events: int, partitions: int, runs_dir: Path, crash_at_s: float,
              producer_client: str = "confluent") -> dict:
    """``structured`` with its defaults on ``events`` at full speed, a driver crash at ``crash_at_s``: wall time, peak
    RSS.

    Raises
    ------
    RuntimeError
        When the run does not drain exactly once.
    """
    from lab.broker import embedded as broker
    from lab.config import make_config
    from lab.run.supervisor import run_scenario

    info = broker.start_embedded(runs_dir / "broker-scale")
    try:
        # The transactional sink: the lab's default sink (append) is at-least-once by design, so a crash would
        # duplicate; every other setting is the lab's default.
        cfg = make_config(pipeline="structured", events=events, rate=0, partitions=partitions, deadline_s=900,
                          kafka_bootstrap=info.bootstrap, runs_dir=str(runs_dir), name="bench-scale",
                          sink="transactional", faults=f"driver-crash@at={crash_at_s:g}s",
                          producer_client=producer_client)
        t = time.perf_counter()
        with PeakMemory() as memory:
            result = run_scenario(cfg)
        wall = time.perf_counter() - t
    finally:
        broker.stop_embedded(info)
    a = result.audit
    if not result.drained or a.guarantee != "exactly-once" or a.acked != events:
        raise RuntimeError(f"the scale run did not drain exactly once: {a.counts()} (see {result.run_dir})")
    from lab.events import read_events

    timeline = read_events(result.run_dir)
    fault = next(e for e in timeline if e["type"] == "fault")
    produced = next(e for e in timeline if e["type"] == "producer-done")
    return {
        "events": events, "partitions": partitions, "faults": cfg.faults, "sink": cfg.sink,
        "max_batch_records": cfg.max_batch_records, "batch_interval_s": cfg.batch_interval_s,
        "kafka_reader": result.report["settings"].get("kafka_reader"), "producer_client": producer_client,
        "guarantee": a.guarantee, "exactly_once": a.exactly_once, "duplicated": a.duplicated, "lost": a.lost,
        "restarts": result.restarts, "wall_s": round(wall, 1), "timings": result.timings,
        "crash_while_producing": fault["t"] < produced["t"],
        "drained_after_producer_s": round(result.timings.get("until_drained_s", wall)
                                          - result.timings.get("producer_s", 0), 1),
        "peak_rss_mib": round(memory.peak_bytes / 2**20), "peak_rss_processes": memory.peak_processes,
        "load_average": os.getloadavg(),
    }


def producers(events: int, partitions: int, runs_dir: Path) -> dict:
    """:func:`bench.producers.producer_comparison` on an embedded Apache Kafka broker of its own, through its proxy."""
    from bench.producers import producer_comparison
    from lab.broker import embedded as broker

    info = broker.start_embedded(runs_dir / "broker-producers")
    try:
        return producer_comparison(info.bootstrap, events, partitions=partitions,
                                   pids={"broker": info.broker_pid, "proxy": info.proxy_pid})
    finally:
        broker.stop_embedded(info)


def main(argv=None) -> int:
    from lab.registry import PIPELINES

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pipeline", action="append", choices=sorted(PIPELINES),
                   help="pipeline to measure; repeat for several (default structured, direct, receiver)")
    p.add_argument("--events", type=int, default=EVENTS)
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--max-batch", type=int, default=None, help="records per batch (default per pipeline)")
    p.add_argument("--batch-interval", type=float, default=None, help="seconds between batches (default per pipeline)")
    p.add_argument("--sink", default=None, help="sink mode (default append)")
    p.add_argument("--raw-repeats", type=int, default=3, help="raw consume trials; the median is the baseline")
    p.add_argument("--runs", type=int, default=1, help="pipeline runs; the entry is the median-ratio run")
    p.add_argument("--runs-dir", default=None, help="where the runs go (default: a temporary directory, removed)")
    p.add_argument("--kafka-reader", default="auto", choices=("auto", "labkafka", "spark"),
                   help="structured and direct: auto (Spark's reader on Apache Kafka), labkafka or spark")
    p.add_argument("--scale", action="store_true", help="also the scale run: structured's defaults, a crash mid-stream")
    p.add_argument("--crash-at", type=float, default=30.0, help="the scale run's driver crash, seconds into the stream")
    p.add_argument("--no-pipelines", action="store_true", help="no pipeline runs (only --scale and the producers)")
    p.add_argument("--producer-client", default="confluent", choices=("kafka-python", "confluent"),
                   help="the ledgered producer's client in the runs (default confluent)")
    p.add_argument("--no-producers", action="store_true", help="without the producers' comparison")
    p.add_argument("--producer-events", type=int, default=200_000,
                   help="events per client in the producers' comparison")
    a = p.parse_args(argv)
    overrides = {"max_batch_records": a.max_batch, "batch_interval_s": a.batch_interval, "sink": a.sink}
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results.setdefault("pipelines", {})
    with tempfile.TemporaryDirectory(prefix="lab-bench-") as tmp:
        runs_dir = Path(a.runs_dir).resolve() if a.runs_dir else Path(tmp)
        for name in [] if a.no_pipelines else (a.pipeline or ["structured", "direct", "receiver"]):
            runs = []
            for i in range(a.runs):
                print(f"{name}: a backlog of {a.events:,} events, run {i + 1} of {a.runs} ...", flush=True)
                r = measure(name, a.events, a.partitions, a.raw_repeats, runs_dir, overrides, a.kafka_reader,
                            a.producer_client)
                if not a.runs_dir:
                    r["run_dir"] = None  # removed with the temporary directory
                runs.append(r)
                print(f"  reader {r['kafka_reader'] or '-'}: steady {r['steady_records_per_s']:,} records/s "
                      f"({r['records_per_s']:,} with the first batch); raw consumer "
                      f"{r['raw_consume_lab_settings_per_s']:,}/s (lab settings), {r['raw_consume_per_s']:,}/s "
                      f"(plain): ratio {r['ratio_steady']} ({r['ratio_steady_plain']}); sink alone "
                      f"{r['sink_alone_per_s']:,}/s; producer ({r['producer_client']}) "
                      f"{r['ledgered_produce_per_s']:,}/s", flush=True)
                if r["time_shares"]:
                    stages = ", ".join(f"{k} {v['records_per_s']:,}/s" for k, v in r["spark_stages"]["stages"].items())
                    print(f"  Spark's steps alone: {stages}; shares of the pipeline's time: {r['time_shares']}",
                          flush=True)
            by_ratio = sorted(runs, key=lambda x: x["ratio_steady"] or 0)
            r = by_ratio[(len(by_ratio) - 1) // 2]
            r = {**r, "runs": [{k: x[k] for k in ("kafka_reader", "ratio_steady", "steady_records_per_s",
                                                  "records_per_s", "raw_consume_lab_settings_per_s",
                                                  "raw_consume_per_s", "sink_alone_per_s", "ledgered_produce_per_s",
                                                  "first_batch_s", "load_average")}
                               for x in runs]}
            results["pipelines"][name] = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), **r}
        if a.scale:
            print(f"scale run: structured, {a.events:,} events at full speed, driver-crash@at={a.crash_at:g}s ...",
                  flush=True)
            results["scale"] = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                **scale_run(a.events, a.partitions, runs_dir, a.crash_at, a.producer_client)}
            s = results["scale"]
            print(f"  {s['guarantee']}: {s['exactly_once']:,} of {a.events:,}; wall {s['wall_s']} s; "
                  f"peak RSS {s['peak_rss_mib']:,} MiB over {s['peak_rss_processes']} processes", flush=True)
        if not a.no_producers:
            print(f"producers: {a.producer_events:,} events per client ...", flush=True)
            results["producers"] = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                    **producers(a.producer_events, a.partitions, runs_dir)}
    results["command"] = " ".join([".venv/bin/python", "bench/pipelines.py",
                                   *(argv if argv is not None else sys.argv[1:])])
    results["exit_status"] = 0
    results["machine"] = machine()
    results["versions"] = {pkg: version(pkg) for pkg in ("pyspark", "kafka-python", "confluent-kafka")}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
