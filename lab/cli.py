"""The ``lab`` command line (also ``python -m lab``).

Commands: ``doctor``, ``fetch``, ``jupyter``, ``broker start|stop|status``, ``cluster start|stop|status``,
``run``, ``matrix``, ``report``, ``predictions``. Errors the user can fix print one line,
``error: ...``, and exit with status 2; no error is a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial

from lab import events as ev
from lab.errors import LabError


def _add_run_args(p: argparse.ArgumentParser) -> None:
    from lab.config import ELR
    from lab.engines.kafka import COMMIT_MODES
    from lab.engines.spark import KAFKA_READERS, OFFSET_STORES, RECEIVER_ACKS, STATE_STORES
    from lab.faults.catalogue import ON_PAUSE
    from lab.flink.settings import CHECKPOINTING, FLINK_DELIVERIES
    from lab.kafka.eos_settings import DELIVERY_TIMEOUT_RANGE_S, DELIVERY_TIMEOUT_S
    from lab.kafka.producer_settings import PRODUCER_CLIENTS
    from lab.queries import QUERIES
    from lab.registry import PIPELINES
    from lab.samza.settings import SAMZA_STORE_CACHES
    from lab.share.settings import DEFAULT_CONSUMERS
    from lab.sinks.spec import SINK_MODES
    from lab.spark import trigger as spark_trigger
    from lab.storm.settings import STORM_MODES

    p.add_argument("--pipeline", default="plain", help=f"one of: {', '.join(PIPELINES)} (default plain)")
    p.add_argument("--sink", default=None,
                   help=f"one of: {', '.join(SINK_MODES)} (default append; kafka-eos: topic, its only sink; structured "
                        "--trigger real-time: topic)")
    p.add_argument("--events", type=int, default=3000, help="events to produce (default 3000)")
    p.add_argument("--rate", type=float, default=1000.0, help="events/s; 0 = as fast as possible (default 1000)")
    p.add_argument("--partitions", type=int, default=3, help="topic partitions (default 3)")
    p.add_argument("--faults", default="",
                   help="fault plan, e.g. driver-crash@at=3s or driver-crash@batch=2:mid-output")
    p.add_argument("--faults-from", default=None, metavar="EVENTS_JSONL",
                   help="replay the faults recorded in a run's events.jsonl (presses included)")
    p.add_argument("--seed", type=int, default=1, help="seed for event ids and keys (default 1)")
    p.add_argument("--commit", default="auto", help="plain pipeline's commit order, the share pipeline's "
                                                    f"acknowledgements: {', '.join(COMMIT_MODES)} "
                   "(default auto)")
    p.add_argument("--offsets", default="checkpoint",
                   help=f"direct pipeline's offset store: {', '.join(OFFSET_STORES)} (default checkpoint)")
    p.add_argument("--kafka-reader", default=None,
                   help=f"structured and direct pipelines' Kafka reader: {', '.join(KAFKA_READERS)} (default "
                        "LAB_KAFKA_READER or auto)")
    p.add_argument("--nodes", type=int, default=None,
                   help="Apache Kafka brokers: 1 or 3 (a cluster, replication factor 3); default LAB_BROKER_NODES, "
                        "else 1")
    p.add_argument("--min-insync", type=int, default=1,
                   help="the run topic's min.insync.replicas (needs --nodes 3; default 1, Kafka's own default, stated)")
    p.add_argument("--unclean", default="off",
                   help="the run topic's unclean.leader.election.enable: on or off (needs --nodes 3; default off)")
    p.add_argument("--wal", default="on", help="receiver pipeline's write-ahead log: on or off (default on)")
    p.add_argument("--ack", default="stored",
                   help=f"receiver's offset commits: {', '.join(RECEIVER_ACKS)} (default stored)")
    p.add_argument("--replication", type=int, default=1, help="receiver block replication: 1 or 2 (default 1)")
    p.add_argument("--query", default=None, help=f"what a pipeline computes: {', '.join(QUERIES)} "
                                                  "(key-count: kafka-eos and samza; default passthrough, samza "
                                                  "key-count)")
    p.add_argument("--window", type=float, default=10.0,
                   help="window-count: tumbling window in seconds of event time (default 10)")
    p.add_argument("--watermark", type=float, default=10.0,
                   help="window-count, dedupe, session-count: watermark delay in seconds of event time (default 10)")
    p.add_argument("--session-gap", type=float, default=None,
                   help="session-count: seconds of event time without an event that end a key's session (default 0.5)")
    p.add_argument("--state-store", default=None, help=f"Spark's state store provider: {', '.join(STATE_STORES)} "
                                                        "(default hdfs; session-count: rocksdb)")
    p.add_argument("--late-fraction", type=float, default=0.0,
                   help="fraction of events the producer stamps with an old event time (default 0)")
    p.add_argument("--late-by", type=float, default=60.0,
                   help="how many seconds old those late events are (default 60)")
    p.add_argument("--checkpointing", default="aligned", help=f"flink pipeline's checkpoint barriers: "
                   f"{', '.join(CHECKPOINTING)} (default aligned)")
    p.add_argument("--flink-delivery", default="auto", help=f"flink pipeline's KafkaSink guarantee: "
                   f"{', '.join(FLINK_DELIVERIES)} (default auto: at-least-once with --checkpointing at-least-once, "
                   "else exactly-once)")
    p.add_argument("--backlog", action="store_true", default=None,
                   help="the pipeline's driver gets its turn once the producer is done: it reads every event as a "
                        "backlog, as a consumer catching up after an outage")
    p.add_argument("--slow-sink", action="store_true", default=None,
                   help="flink pipeline: the KafkaSink sends one record per request, so back-pressure builds up")
    p.add_argument("--storm-mode", default="acked", help=f"storm pipeline's delivery: {', '.join(STORM_MODES)} "
                   "(default acked; trident writes --sink transactional unless told otherwise)")
    p.add_argument("--samza-store-cache", default="off", help=f"samza pipeline's store cache: "
                   f"{', '.join(SAMZA_STORE_CACHES)} (default off: every change to the changelog as it is made)")
    p.add_argument("--consumers", type=int, default=DEFAULT_CONSUMERS,
                   help=f"share pipeline's consumer processes, one share group (default {DEFAULT_CONSUMERS})")
    p.add_argument("--dlq", default=None, help="share pipeline's dead-letter topic (KIP-1191): off (Kafka's default: "
                   "a record past the delivery limit is archived) or on (moved to dlq.<topic>)")
    p.add_argument("--trigger", default=spark_trigger.MICRO_BATCH,
                   help=f"structured pipeline's trigger: {spark_trigger.MICRO_BATCH}, {spark_trigger.REAL_TIME} or "
                        f"{spark_trigger.REAL_TIME}:<n>s (Spark's real-time mode, interval default "
                        f"{spark_trigger.DEFAULT_REAL_TIME_S:g} s; writes --sink topic)")
    p.add_argument("--trust-commit", action="store_true", default=None,
                   help="kafka-eos: commit each transaction without first checking that every send in it was "
                        "acknowledged, leaving it to kafka-python's commit (a lesson: the client commits a "
                        "transaction one of whose sends timed out)")
    p.add_argument("--txn-client", default=None,
                   help="kafka-eos: the transactional producer's client: python (kafka-python, transactions v1; the "
                        "default) or java (Kafka's Java client in a JVM beside the driver, transactions v2)")
    p.add_argument("--delivery-timeout", type=float, default=None,
                   help=f"kafka-eos: seconds a send may take, retries included, before it fails "
                        f"({DELIVERY_TIMEOUT_RANGE_S[0]:g} to {DELIVERY_TIMEOUT_RANGE_S[1]:g}, default "
                        f"{DELIVERY_TIMEOUT_S:g})")
    p.add_argument("--elr", default="broker", help=f"eligible leader replicas (KIP-966): {', '.join(ELR)} "
                   f"(default broker: {ELR['broker']})")
    p.add_argument("--on-pause", default="auto", help=f"what a driver-pause leads to: {', '.join(ON_PAUSE)} "
                   f"(default auto: {ON_PAUSE['auto']})")
    p.add_argument("--master", default=None, help="Spark master: local[N], local-cluster[W,C,M], spark://host:port "
                                                  "(default LAB_SPARK_MASTER or local[2])")
    p.add_argument("--spark-ui", action="store_true", default=None,
                   help="the Spark driver's web UI on 127.0.0.1, its address printed as each driver has its turn "
                        "(default LAB_SPARK_UI, else off)")
    p.add_argument("--batch-interval", type=float, default=None,
                   help="seconds between micro-batches (default 0.5); flink: between checkpoints (default 1)")
    p.add_argument("--max-batch", type=int, default=None,
                   help="most records per batch (direct: per partition per batch; default 500, or events/20 when more)")
    p.add_argument("--acks", default="all", help="producer acks: 0, 1 or all (default all)")
    p.add_argument("--retries", type=int, default=5, help="producer retries (default 5)")
    p.add_argument("--idempotence", choices=("on", "off"), default="on", help="idempotent producer (default on)")
    p.add_argument("--transactional", choices=("on", "off"), default="off",
                   help="transactional producer (100 events per transaction; readers use read_committed)")
    p.add_argument("--producer-client", default="kafka-python", choices=PRODUCER_CLIENTS,
                   help="the ledgered producer's Kafka client: kafka-python (default; the lessons' client) or "
                        "confluent (confluent-kafka, the same settings, several times faster)")
    p.add_argument("--isolation", default="auto", choices=("auto", "read_committed", "read_uncommitted"),
                   help="the pipeline's Kafka isolation level (default auto: read_committed with --transactional on)")
    p.add_argument("--name", default="", help="run name (default PIPELINE-SINK)")
    p.add_argument("--deadline", type=float, default=None,
                   help="seconds without progress before the run stops undrained (default 120, or LAB_DEADLINE)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object, last")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lab", description="Make stream-processing delivery guarantees visible.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    sub.add_parser("doctor", help="check Python, Java, PySpark, the cached jars, the broker and disk space")
    f = sub.add_parser("fetch", help="fetch the pinned jars (Spark's and Flink's Kafka connectors, the Kafka broker, "
                                     "Storm) into the cache, compile the Storm topology, then build the class archives "
                                     "of the driver and broker JVMs")
    f.add_argument("--set", dest="jar_set", default=None, metavar="NAME",
                   help="one jar set of lab/jars.json, e.g. storm (default: all)")
    f.add_argument("--route", default="auto", help="auto (mvn when installed, else HTTPS), mvn or https (default auto)")
    f.add_argument("--no-class-archive", action="store_true",
                   help="skip building the class archives of the driver and broker JVMs (lab.spark.archive, "
                        "lab.broker.archive; made once, after the jars)")
    b = sub.add_parser("broker", help="start, stop or inspect the embedded broker")
    b.add_argument("action", choices=("start", "stop", "status"))
    b.add_argument("--port", type=int, default=None, help="port clients use (default: a free one)")
    b.add_argument("--nodes", type=int, default=None,
                   help="1 or 3: Apache Kafka as a three-broker cluster (one controller, three brokers); "
                        "default LAB_BROKER_NODES, else 1")
    c = sub.add_parser("cluster", help="start, stop or inspect a Spark standalone cluster on 127.0.0.1")
    c.add_argument("action", choices=("start", "stop", "status"))
    c.add_argument("--workers", type=int, default=2, help="workers to start (default 2)")
    m = sub.add_parser("matrix", help="run a grid of scenarios through papermill; print the results table")
    m.add_argument("--grid", default=None, help="grid file (YAML or JSON); default: the expected-outcomes table")
    m.add_argument("--jobs", type=int, default=1, help="scenarios run at once (default 1, for 2 cores)")
    m.add_argument("--out", default="data/results", help="results directory (default data/results)")
    rp = sub.add_parser("report", help="build one self-contained HTML report of a matrix's results")
    rp.add_argument("--out", default="data/results", help="results directory (default data/results)")
    rp.add_argument("--html", default=None, help="report file (default <out>/report.html)")
    j = sub.add_parser("jupyter", help="JupyterLab on 127.0.0.1 over your copies of the notebooks (make lab); "
                                       "prints the link to open")
    j.add_argument("--port", type=int, default=None, help="the port to try first (default LAB_JUPYTER_PORT, else 8888)")
    j.add_argument("--workspace", default=None,
                   help="where your copies of the notebooks live (default LAB_WORKSPACE, else workspace/)")
    r = sub.add_parser("run", help="run one scenario and audit it")
    _add_run_args(r)
    pr = sub.add_parser("predictions", help="the predictions recorded in a runs directory, per scenario: how many "
                                            "predicted each outcome, what was measured, how many were right")
    pr.add_argument("runs_dir", nargs="?", default=None, metavar="RUNS_DIR",
                    help="a directory of runs, or one run's (default LAB_RUNS_DIR, else runs/ at the lab's root)")
    pr.add_argument("--notebook", default=None, metavar="NN",
                    help="only the scenarios notebook NN asks to predict, e.g. 02 (read from notebooks/)")
    return p


def _restarts_text(report: dict) -> str:
    """``restarts`` and how long each kept the pipeline from its work (``restart_s``, :mod:`lab.audit.restarts`)."""
    n = report["restarts"]
    back = report.get("restart_s") or []
    if not back:
        return str(n)
    if back == [None]:
        return f"{n}  (no batch done by the restarted driver)"
    if len(back) == 1:
        return f"{n}  (first batch done {back[0]:.1f} s after the driver died)"
    each = ", ".join(f"#{i} {'no batch' if s is None else f'{s:.1f} s'}" for i, s in enumerate(back, 1))
    return f"{n}  (first batch done after the driver died: {each})"


def _print_table(report: dict) -> None:
    rows = [
        ("acknowledged", report["acked"]),
        ("exactly once", report["exactly_once"]),
        ("duplicated", f"{report['duplicated']}  (+{report['extra_copies']} extra rows)"),
        ("lost", report["lost"]),
        ("unseen (not yet read)", report["unseen"]),
        ("unexpected rows", report["unexpected"]),
        ("write attempts / stored", f"{report['write_attempts']} / {report['stored_rows']}"),
        ("restarts", _restarts_text(report)),
        ("broker", report.get("broker_version") or "?"),
        ("producer client", report["settings"].get("producer_client", "kafka-python")),
        ("guarantee measured", report["guarantee"]),
    ]
    if "windows" in report:  # window-count: audited per (window, key); lost/duplicated are the under/overcount
        rows[1:4] = [("windows exact / all", f"{report['windows_exact']} / {report['windows']}"),
                     ("windows over", f"{report['windows_over']}  (+{report['overcount']} events)"),
                     ("windows under", f"{report['windows_under']}  (-{report['undercount']} events)")]
    topic = report.get("topic") or {}
    if topic.get("lost") or topic.get("duplicated") or report["settings"].get("nodes"):
        rows.insert(4, ("final read of the topic", f"{topic['lost']} acknowledged and lost, {topic['duplicated']} "
                                                   f"duplicated ({topic['failed_sends']} failed, "
                                                   f"{topic['unknown_sends']} unknown sends)"))
    if report.get("late_dropped"):
        rows.insert(4, ("late, dropped (watermark)", report["late_dropped"]))
    deliveries = report.get("deliveries")
    if deliveries:  # share: the broker's delivery counts, and what it archived
        rows.insert(4, ("archived (delivery limit)", f"{report.get('archived', 0)}  (after "
                                                     f"{deliveries['delivery_limit']} deliveries each)"))
        if "dead_lettered" in deliveries:
            there = len(deliveries["dead_lettered"])
            rows.insert(5, ("dead-lettered", f"{report.get('dead_lettered', 0)}  (moved to the group's dead-letter "
                                             f"topic: {there} record{'' if there == 1 else 's'} there)"))
        hist = ", ".join(f"{n}: {c}" for n, c in deliveries["histogram"].items())
        rows.append(("delivery counts", f"{hist}  (events by the most deliveries one had)"))
    if report["pipeline"] == "kafka-eos":  # its transactional producer's client (--txn-client)
        rows.insert(-1, ("transactional client", {"java": "Kafka's Java client (--txn-client java)"}.get(
            report["settings"].get("txn_client"), "kafka-python")))
    if "read_uncommitted_records" in report:  # kafka-eos: the output topic, audited read_committed
        rows.insert(6, ("output read_uncommitted", f"{report['read_uncommitted_records']} records, "
                                                   f"{report['read_uncommitted_duplicated']} events more than once "
                                                   f"(+{report['read_uncommitted_extra_copies']} extra copies)"))
        latency = report.get("latency")
        if latency and latency["events"]:  # send to the output record's first copy (lab.audit.latency)
            steady = (f"; sent after the first output: p50 {latency['steady_p50_ms']:.0f} ms, p95 "
                      f"{latency['steady_p95_ms']:.0f} ms" if latency.get("steady_events") else "")
            rows.insert(7, ("latency send to output",
                            f"p50 {latency['p50_ms']:.0f} ms, p95 {latency['p95_ms']:.0f} ms, "
                                                      f"max {latency['max_ms']:.0f} ms{steady}"))
    replays = report.get("flink_replays")
    if replays and replays["restarts"]:  # flink: what its restarts wrote again, predicted from the timeline
        rows.insert(4, ("rewritten after restore", f"{replays['predicted_extra_copies']} predicted (records past the "
                                                   "restored checkpoint that were in the output before the crash)"))
    if report.get("aborted_sends"):
        rows.insert(6, ("aborted (txn-abort)", f"{report['aborted_sends']}  ({report.get('aborted_in_topic', '?')} of "
                                               "them in the topic, read uncommitted)"))
    for topic, producers in (report.get("transactions_in_log") or {}).items():  # the broker's log of each
        which = "output" if topic.endswith(".out") else "input"
        for pid, p in producers.items():
            epochs = ", ".join(map(str, p["data_epochs"]))
            rows.append((f"{which} transactions", f"producer id {pid}: {p['transactions']} in the log, records under "
                                                  f"epoch{'s' if len(p['data_epochs']) != 1 else ''} {epochs}; "
                                                  f"{p['markers_above_data']} of {p['markers']} end markers above "
                                                  "their records' epoch"))
    # Shown only when they happened: each is a reason to read the counts above with care.
    if report.get("acked_without_offset"):
        rows.insert(6, ("acked, no offset found",
                        f"{report['acked_without_offset']}  (not in the topic; lost unless the sink has them)"))
    if report.get("final_stop") not in (None, "graceful", "gone"):
        rows.append(("final stop", f"{report['final_stop']}  (events in flight counted unseen)"))
    for e in report.get("faults_not_applied", []):
        rows.append(("fault not applied", f"{e['kind']} (plan item {e['index']}): {e['reason']}"))
    for line in report.get("could_not_show", []):  # lab.audit.shown: the counts above show nothing of the lesson
        rows.append(("could not show", line))
    for line in report.get("cautions", []):
        rows.append(("caution", line))
    print(f"\n{report['pipeline']} pipeline, sink={report['settings']['sink']}, faults={report['faults'] or 'none'}")
    for k, v in rows:
        print(f"  {k:<26} {v}")
    print(f"  run directory              {report['run_dir']}")


def cmd_run(a) -> int:
    from lab.config import make_config
    from lab.run.supervisor import Run

    if a.faults_from:
        if a.faults:
            raise LabError("give --faults or --faults-from, not both")
        from lab.faults.plan import plan_from_events

        a.faults = plan_from_events(a.faults_from)
    config = make_config(
        pipeline=a.pipeline, sink=a.sink, events=a.events, rate=a.rate, partitions=a.partitions,
        faults=a.faults, seed=a.seed, commit=a.commit, name=a.name or None, deadline_s=a.deadline,
        offsets=a.offsets, kafka_reader=a.kafka_reader, isolation=a.isolation, nodes=a.nodes, min_insync=a.min_insync,
        unclean=a.unclean, wal=a.wal, ack=a.ack, replication=a.replication, spark_master=a.master, spark_ui=a.spark_ui,
        batch_interval_s=a.batch_interval, max_batch_records=a.max_batch, query=a.query, window_s=a.window,
        session_gap_s=a.session_gap, watermark_s=a.watermark, state_store=a.state_store, late_fraction=a.late_fraction,
        late_by_s=a.late_by, checkpointing=a.checkpointing, flink_delivery=a.flink_delivery, slow_sink=a.slow_sink,
        backlog=a.backlog, storm_mode=a.storm_mode, samza_store_cache=a.samza_store_cache, consumers=a.consumers,
        dlq=a.dlq, on_pause=a.on_pause, elr=a.elr, trigger=a.trigger, trust_commit=a.trust_commit,
        txn_client=a.txn_client, delivery_timeout_s=a.delivery_timeout, acks=a.acks, retries=a.retries,
        idempotence=a.idempotence == "on",
        transactional=a.transactional == "on", producer_client=a.producer_client,
    )
    # With --json only the UI's address is echoed (stderr): stdout stays the one report.
    run = Run(config, on_event=partial(_echo_spark_ui if a.json else _echo_event, pipeline=config.pipeline))
    run.start()
    if not a.json:
        print(f"run {run.run_dir.name}: {config.events} events at {config.rate:g}/s, faults: {config.faults or 'none'}",
              flush=True)
    result = run.wait()
    if a.json:
        print(json.dumps(result.report))
    else:
        _print_table(result.report)
    return 0


def _echo_event(e: dict, pipeline: str) -> None:
    t = e.get("type")
    if t == ev.SPARK_UI:
        _echo_spark_ui(e, pipeline)
    elif t in (ev.FAULT, ev.FAULT_DEFERRED, ev.FAULT_NOT_APPLIED, ev.DRIVER_START, ev.DRIVER_EXIT, ev.DRAINED,
               ev.DEADLINE, ev.NO_MORE_BATCHES, ev.FINAL_STOP, ev.PRODUCER_DONE, ev.RUN_ERROR, ev.BROKER_RESTART,
               ev.TXN_ABORTED, ev.NODE_RESTART, ev.PARTITION_STATE, ev.DRIVER_REPLACED, ev.DRIVER_RESUME, ev.ZOMBIE_END,
               ev.PRODUCER_FENCED, ev.STORM_REPLAY_GAP, ev.STORM_REPLAY_REPOLL, ev.COMMITTED_WITH_FAILED_SENDS,
               ev.DEAD_LETTERED):
        detail = {k: v for k, v in e.items() if k not in ("t", "type", "source", "proxy")}
        print(f"  [{t}] {json.dumps(detail)}", file=sys.stderr, flush=True)


def _echo_spark_ui(e: dict, pipeline: str) -> None:
    """Print a driver's Spark UI address (``spark-ui``) and the tab to watch; other events are not printed."""
    if e.get("type") != ev.SPARK_UI:
        return
    from lab.spark.session import ui_hint

    print(f"  [{ev.SPARK_UI}] driver attempt {e.get('attempt')}: {e.get('url')}  ({ui_hint(pipeline)})",
          file=sys.stderr, flush=True)


def _service(a, what: str, start, stop, load, describe, hint: str = "") -> int:
    """``lab broker|cluster start|stop|status``: one shape for both services."""
    from lab.host.env import env_runs_dir

    runs_dir = env_runs_dir()
    if a.action == "start":
        print(f"{what} running: {describe(start(runs_dir))}")
        if hint:
            print(hint.format(info=load(runs_dir)))
    elif a.action == "stop":
        print(f"{what} stopped" if stop(runs_dir) else f"no {what} was running")
    else:
        info = load(runs_dir)
        if info is None:
            print(f"no {what} running")
            return 1
        print(f"{what} running: {describe(info)}")
    return 0


def cmd_broker(a) -> int:
    from lab.broker import shared as shared_broker

    def describe(i) -> str:
        product = " ".join(filter(None, (i.product, i.version)))
        if i.nodes:
            pids = ", ".join(f"broker {n.node} pid {n.broker_pid}" for n in i.nodes)
            return (f"bootstrap {i.bootstrap} ({product}, {len(i.nodes)} brokers: {pids}; controller pid "
                    f"{i.controller_pid})")
        return f"bootstrap {i.bootstrap} ({product} pid {i.broker_pid}, proxy pid {i.proxy_pid})"

    return _service(a, "broker", lambda d: shared_broker.start_detached(
        d, port=a.port, nodes=a.nodes if a.nodes is not None else os.environ.get("LAB_BROKER_NODES") or 1),
                    shared_broker.stop_detached, shared_broker.load_running, describe)


def cmd_fetch(a) -> int:
    from lab.host import jars

    names = [jars.jar_set(a.jar_set).name] if a.jar_set else list(jars.manifest())
    for name in names:
        r = jars.fetch(name, route=a.route)
        js = jars.jar_set(name)
        if r.fetched:
            size = sum(j.size for j in r.fetched) / 1e6
            print(f"{name}: fetched {len(r.fetched)} of {len(js.jars)} jars ({size:.1f} MB) by {r.route} "
                  f"in {r.seconds:.1f} s, verified, at {r.directory}")
        else:
            print(f"{name}: {len(js.jars)} jars cached and verified at {r.directory}")
    if not a.jar_set:
        from lab.broker.java_clients import TXN_PRODUCER
        from lab.samza.build import JOB
        from lab.share.build import STATE
        from lab.storm.build import TOPOLOGY

        # compiled from the cached jars, so a bundle's copy works offline
        for sources in (TOPOLOGY, JOB, STATE, TXN_PRODUCER):
            fresh = not sources.problems()
            classpath = sources.ensure(progress=print)
            print(f"{sources.name} classes: {'present' if fresh else 'compiled'} at {classpath.split(':')[0]}")
    if not a.jar_set and not a.no_class_archive:
        from lab.broker import archive as broker_archive
        from lab.spark import archive as class_archive

        # retry: `lab fetch` is where a failed build is tried again (lab.host.class_archive.ensure_archive)
        for label, who, make in (("class archive", "Spark drivers", class_archive.ensure),
                                 ("broker class archive", "Kafka brokers", broker_archive.ensure)):
            st = make(progress=print, retry=True)
            if st is None:
                print(f"{label}: off ({broker_archive.SWITCH}=off)")
            elif st.error:
                print(f"{label}: not built ({st.error}); {who} start without it, slower")
            else:
                print(f"{label}: {f'built in {st.seconds:.0f} s' if st.built else 'present'} at {st.path}")
    return 0


def cmd_cluster(a) -> int:
    from lab.spark import cluster

    return _service(a, "cluster", lambda d: cluster.start(d, workers=a.workers), cluster.stop, cluster.load_running,
                    lambda i: f"{i.master_url} (master pid {i.master_pid}, worker pids {i.worker_pids})",
                    hint="use it: export LAB_SPARK_MASTER={info.master_url}")


def cmd_matrix(a) -> int:
    from lab.matrix.grid import load_grid
    from lab.matrix.runner import run_matrix
    from lab.matrix.table import summary_lines

    if a.jobs < 1:
        raise LabError(f"--jobs must be >= 1, got {a.jobs}")
    grid = load_grid(a.grid)
    df = run_matrix(grid, a.out, jobs=a.jobs)
    print("\n".join(summary_lines(df)))
    print(f"results: {os.path.join(a.out, 'matrix.csv')} (and .parquet); report: lab report --out {a.out}")
    return 0


def cmd_report(a) -> int:
    from pathlib import Path

    from lab.matrix.report import build_html, read_results

    table = Path(a.out) / "matrix.csv"
    if not table.exists():
        raise LabError(f"no results table at {str(table)!r}; run `lab matrix --out {a.out}` first")
    path = build_html(read_results(table), a.html or Path(a.out) / "report.html")
    print(f"report written: {path}")
    return 0


def cmd_jupyter(a) -> int:
    from pathlib import Path

    from lab.host import env
    from lab.host.jupyter import serve

    root = env.project_root()
    if root is None:
        raise LabError("lab jupyter serves copies of the lab's notebooks/: run it from the lab's checkout")
    port = a.port if a.port is not None else int(env.number(os.environ, "LAB_JUPYTER_PORT", 8888))
    workspace = Path(a.workspace).resolve() if a.workspace else env.default_workspace()
    return serve(workspace, root / "notebooks", port=port, token=os.environ.get("LAB_JUPYTER_TOKEN") or None)


def cmd_predictions(a) -> int:
    from lab.audit import prediction_summary as ps
    from lab.host import env

    runs = ps.runs_directory(a.runs_dir or env.env_runs_dir())
    keep, which = None, ""
    if a.notebook is not None:
        root = env.project_root()
        if root is None:
            raise LabError("--notebook reads the lab's notebooks/: run lab predictions from the lab's checkout")
        books = ps.notebooks(root / "notebooks")
        number = ps.notebook_number(a.notebook, books)
        from lab.matrix.grid import load_grid

        asked = ps.questions(books[number].read_text(), [s.name for s in load_grid(None).scenarios])
        keep, which = partial(ps.asks, asked), f" of notebook {books[number].stem}"
        if not asked:
            print(f"notebook {books[number].stem} records no prediction in its runs: nothing to count")
            return 1
    recorded = ps.read_verdicts(runs)
    summary = ps.summarise(recorded.verdicts, keep, recorded.unreadable)
    if summary.tallies:
        # One line a scenario, columns aligned: what a learner reads out or pastes for the room.
        rows = summary.rows()
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        print(f"predictions{which} in {runs}:")
        for row in rows:
            print("  ".join([*(cell.ljust(w) for cell, w in zip(row, widths)), row[-1]]))
        print(summary.total())
    else:
        print(f"no predictions{which} recorded in {runs}: run a notebook's prediction cells first")
    if summary.unreadable:
        print(f"not read ({len(summary.unreadable)}, not a prediction): {', '.join(summary.unreadable)}")
    return 0 if summary.tallies else 1


def cmd_doctor(a) -> int:
    from lab.doctor import check_jupyter, run_checks

    ok = True
    for check in [*run_checks(), check_jupyter()]:
        print(f"{check.status}  {check.name:<8} {check.detail}")
        if not check.ok:
            ok = ok and check.optional
            if check.fix:
                print(f"      fix: {check.fix}")
    return 0 if ok else 1


def main(argv=None) -> int:
    a = _parser().parse_args(argv)
    try:
        commands = {"run": cmd_run, "broker": cmd_broker, "cluster": cmd_cluster, "matrix": cmd_matrix,
                    "report": cmd_report, "doctor": cmd_doctor, "fetch": cmd_fetch, "jupyter": cmd_jupyter,
                    "predictions": cmd_predictions}
        return commands[a.command](a)
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: every process of the run was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
