"""The ``storm`` pipeline: Apache Storm 2.8 on the lab's topic, audited like every other pipeline.

The driver (this module) starts the topology (``lab/storm/java``, compiled by
:mod:`lab.storm.build`) in a JVM of its own that runs Storm's LocalCluster: Nimbus,
a supervisor and one worker in one process, in the driver's process group, so
``driver-crash`` is one ``killpg`` of both. Storm reads the run's topic with its
Kafka spout (``storm-kafka-client``); the JVM asks the driver to write each batch
(the bridge below), so the sink, the timeline and the named points are the same
as every pipeline's. Storm keeps its cluster state and Trident's transaction state
in the run's ZooKeeper on 127.0.0.1 (:mod:`lab.storm.zookeeper`), which the
supervisor starts before the first driver and which outlives every crash.

Modes (``--storm-mode``)
------------------------
``unacked``  kafka-spout → parse-bolt → sink-bolt with no acker: the spout
             commits each poll's offsets to the run's group (``lab-<run id>``)
             before it emits them (``ProcessingGuarantee.AT_MOST_ONCE``).
``acked``    the same tree, every emit anchored to the spout's tuple, one
             acker: the spout commits (every :data:`lab.storm.settings.COMMIT_PERIOD_MS`)
             only offsets whose tuple trees completed, and re-emits a tuple that
             failed or timed out (``AT_LEAST_ONCE``, exponential back-off from 0.2 s).
``trident``  ``KafkaTridentSpoutTransactional`` into a ``partitionPersist``
             state: Trident numbers each batch (its txid), stores the batch's
             offsets per partition in ZooKeeper before it emits it, and
             commits the txid only after the state has; a txid replayed after a
             crash carries the same offsets, so the same records.

Bridge protocol
---------------
The JVM writes ``@lab {json}`` lines on its standard output (:class:`lab.host.bridge.JvmBridge`;
its logs go to ``storm/topology-N.log``); the driver answers on the JVM's standard
input, one JSON line per ``write``:

* ``submitted``: the topology is submitted (``storm-topology``).
* ``ready``: the sink bolt (or Trident's state) is prepared: ``driver-ready``
  (the registry's ``ready_when_running``; the run's producer starts then).
* ``write`` (``rows``: ``[partition, offset, value]``; trident: ``txid``): a batch.
  The driver writes it (``batch-start``, the sink, ``batch-done``) and answers
  ``{"batch": N, "fail": [indices]}``; the sink bolt then acks every tuple but
  those, which it fails (``storm-ack``). Trident's state returns once answered.
* ``acked`` (``storm-ack``), ``committed`` (trident: ``storm-commit``, the txid
  Trident committed after the state).

A batch's sink key is ``trident-<txid>`` in trident mode, so the transactional
sink skips a replayed txid it has committed, else ``storm-<attempt>-<batch>``.
``batch-start`` says how many of the batch's records are at offsets the run's
drivers had already written (``replayed``): Storm's replays, seen in the sink.

Named points: ``mid-output`` (half of the batch written; the transactional sink
has committed none of it), ``after-output-before-commit`` (the batch written, its
tuples neither acked nor, in trident mode, its txid committed).

Delivery guarantee
------------------
``unacked``: at most once across driver crashes: a crash loses every record the
spout had polled (and committed) that the sink bolt had not written, about one
batch interval of events. ``acked``: at least once: a crash replays what was
acked since the spout's last offset commit, and a failed tuple (``bolt-fail``)
is replayed after the sink has written it; with ``--sink idempotent`` the replays
leave one row an event. ``trident`` with ``--sink transactional``: exactly once: a
txid's rows commit with the txid in one database transaction, and a replayed txid
the sink has committed is skipped; with ``append`` a replayed txid is stored
again. Each is measured by the audit, never assumed.

On failure
----------
A JVM that ends on its own ends the driver with the topology log's last line;
the supervisor restarts it. Missing jars or classes are fetched and compiled
before the run starts (:mod:`lab.spark.session`'s ``prepare_drivers``); a sink
write that raises ends the driver, whose restart the spout replays to.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from lab import events as ev
from lab.errors import DriverConfigError, LabError
from lab.events import read_progress
from lab.host import processes
from lab.host.bridge import JvmBridge
from lab.kafka.read import record_row
from lab.pipelines.driver import DriverContext
from lab.sinks.reader import open_sink
from lab.storm import settings as storm_settings
from lab.storm.build import TOPOLOGY
from lab.storm.zookeeper import INFO_FILE

#: The topology JVM's log configuration: log4j2 to standard error (the attempt's log), WARN but for the lab's lines.
LOG_CONFIG = Path(__file__).resolve().parent.parent / "storm" / "log4j2.xml"
#: Seconds the driver waits for the topology's first line before it gives up (measured: submitted 2.9 s,
#: sink bolt ready 6.6 s after the JVM started, on 2 cores).
START_TIMEOUT_S = 120.0


class _Writer:
    """Writes each batch the topology asks for: the lab's side of the bridge."""

    def __init__(self, ctx: DriverContext, sink, positions: dict[int, int]) -> None:
        self.ctx = ctx
        self.sink = sink
        self.mode = ctx.config.storm.storm_mode
        self.batch = ctx.last_batch() + 1
        self.positions = dict(positions)  # next offset per partition past everything the run's drivers wrote

    def write(self, message: dict) -> dict:
        ctx, batch, txid = self.ctx, self.batch, message.get("txid")
        rows, ranges, replayed = [], {}, 0
        for partition, offset, value in message["rows"]:
            rows.append(record_row(partition, offset, value.encode()))
            start, until = ranges.get(partition, (offset, offset + 1))
            ranges[partition] = (min(start, offset), max(until, offset + 1))
            replayed += offset < self.positions.get(partition, 0)
        extra = {"txid": txid} if txid is not None else {}
        ctx.batch_start(batch, ranges, len(rows), replayed=replayed, **extra)
        key = f"trident-{txid}" if txid is not None else f"storm-{ctx.attempt}-{batch}"
        outcome = self.sink.write_batch(rows, key, on_midway=lambda: ctx.point("mid-output", batch))
        ctx.point("after-output-before-commit", batch)
        fail: list[int] = []
        fault = ctx.fault_due("bolt-fail", batch) if self.mode == "acked" else None
        if fault is not None:
            fail = list(range(min(fault.count or len(rows), len(rows))))
        for partition, (_, until) in ranges.items():
            self.positions[partition] = max(self.positions.get(partition, 0), until)
        ctx.batch_done(batch, len(rows), outcome=outcome, failed=len(fail), **extra)
        ctx.progress(self.positions, batch)
        self.batch += 1
        return {"batch": batch, "fail": fail}


def run(ctx: DriverContext) -> None:
    """Run the topology until the supervisor asks to stop (SIGTERM)."""
    cfg = ctx.config
    try:
        zookeeper = json.loads((ctx.run_dir / INFO_FILE).read_text())
    except FileNotFoundError:
        raise DriverConfigError(f"the storm pipeline needs the run's ZooKeeper ({INFO_FILE} in the run directory), "
                                "which the supervisor starts") from None
    classpath = TOPOLOGY.ensure()
    work = ctx.run_dir / "storm"
    work.mkdir(exist_ok=True)
    spec = storm_settings.topology_spec(cfg, run_id=ctx.run_id, attempt=ctx.attempt, bootstrap=ctx.bootstrap,
                                        zookeeper=zookeeper, local_dir=str(work / f"local-{ctx.attempt}"))
    spec_path = work / f"attempt-{ctx.attempt}.json"
    spec_path.write_text(json.dumps(spec, indent=2))
    sink = open_sink(ctx.run_dir)
    writer = _Writer(ctx, sink, {int(p): o for p, o in read_progress(ctx.run_dir).get("positions", {}).items()})
    began = time.monotonic()
    topology = JvmBridge("the Storm topology", [*storm_settings.JVM_FLAGS, f"-Dlog4j2.configurationFile={LOG_CONFIG}",
                                                 "-cp", classpath, TOPOLOGY.main_class, spec_path],
                         work / f"topology-{ctx.attempt}.log", cwd=work)
    ready = False
    try:
        ctx.phase("jvm")
        while not ctx.stopping:
            message = topology.message(timeout=0.2)
            if message is None:
                if not ready and time.monotonic() - began > START_TIMEOUT_S:
                    raise LabError(f"the Storm topology was not ready within {START_TIMEOUT_S:g} s: "
                                   f"{processes.last_log_line(topology.log_path)}")
                continue
            op = message.get("op")
            if op == "write":
                topology.answer(writer.write(message))
            elif op == "acked":
                ctx.events.write(ev.STORM_ACK, batch=message.get("batch"), acked=message.get("acked"),
                                 failed=message.get("failed"), attempt=ctx.attempt)
            elif op == "committed":
                ctx.events.write(ev.STORM_COMMIT, txid=message.get("txid"), attempt=ctx.attempt)
            elif op == "replay-gap":
                ctx.events.write(ev.STORM_REPLAY_GAP, txid=message.get("txid"), partition=message.get("partition"),
                                 resumes_at=message.get("resumes_at"), attempt=ctx.attempt)
            elif op == "replay-repoll":
                ctx.events.write(ev.STORM_REPLAY_REPOLL, txid=message.get("txid"), partition=message.get("partition"),
                                 polls=message.get("polls"), offsets=message.get("offsets"), attempt=ctx.attempt)
            elif op == "submitted":
                ctx.events.write(ev.STORM_TOPOLOGY, storm_mode=cfg.storm.storm_mode, attempt=ctx.attempt,
                                 spout=("KafkaTridentSpoutTransactional" if cfg.storm.storm_mode == "trident"
                                        else "KafkaSpout"), took_s=round(time.monotonic() - began, 3))
                ctx.phase("query")
            elif op == "ready" and not ready:
                ready = True
                ctx.ready()
    finally:
        topology.kill()  # its state that matters is in Kafka, ZooKeeper and the sink
        sink.close()
