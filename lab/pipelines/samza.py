"""The ``samza`` pipeline: Apache Samza 1.8's local state and changelog on the lab's topic, audited per key.

The driver (this module) starts the job (``lab/samza/java``, compiled by
:mod:`lab.samza.build`) in a JVM of its own, in the driver's process group, so
``driver-crash`` is one ``killpg`` of both. The job is standalone
(``LocalApplicationRunner`` with the ``PassthroughJobCoordinator``: one processor,
one task per input partition, no ZooKeeper; :mod:`lab.samza.settings` states every
setting). Each task keeps a running count per event key in a RocksDB store
(``counts``) whose every change Samza writes to the changelog ``<topic>.changelog``,
and sends each event to ``<topic>.out`` with a ``processed`` field (its key's new
count); the auditor reads that topic (:mod:`lab.sinks.topic`) and, for
``key-count``, the changelog (:mod:`lab.sinks.changelog`, the report's ``changelog``).

Protocol
--------
1. Create ``<topic>.out`` with the input's partitions (Samza would let the broker
   create it with one) and write ``samza/attempt-N.properties``; the store lives
   under ``samza/state-N``, the attempt's own: a restarted driver is a new host,
   its store empty until Samza restores it from the changelog.
2. Start the job (:class:`lab.host.bridge.JvmBridge`); its log goes to ``samza/job-N.log``. Its ``@lab`` lines:
   ``restored`` (per task, once Samza restored its store, before the task's first
   event: ``changelog-restore`` with the keys the store holds), ``ready`` (the first
   task is initialised: ``driver-ready``, the registry's ``ready_when_running``),
   ``window`` (every ``--batch-interval``, per task with events: the offsets it
   processed, a lab batch: ``batch-start``, ``batch-done``, ``progress.json``); the task waits for
   the driver's ``ok``, so the driver may stop at the named point first.
3. Samza checkpoints by itself every :data:`lab.samza.settings.COMMIT_MS`: it flushes
   the producer and the store (the changelog), then writes the input offsets to its
   checkpoint topic. On SIGTERM the driver writes ``stop`` to the job's input and goes on
   answering windows: each task asks for a checkpoint at its next window, and once all
   have, the container shuts down; the driver waits :data:`STOP_GRACE_S` for it, then kills it.

Delivery guarantee
------------------
As Samza documents it: at-least-once processing, so the output topic gets every
event at least once: a crash replays from the last checkpoint what was processed
after it, and those events are sent again (duplicates). The state is restored from
the changelog up to the checkpoint (Samza 1.8's transactional state), so a replayed
event counts once in the store, and every key's final count in the changelog equals
the acknowledged events of that key. Both are measured: the audit of the output
topic and the report's ``changelog`` section.

Named point: ``after-output-before-commit`` (a window's events processed, their counts in
the store and the events sent to the output producer; no checkpoint since). There is no
``mid-output``: the job handles one event at a time.

On failure
----------
A JVM that ends on its own ends the driver with the job log's last line; the
supervisor restarts it. A missing jar or uncompiled job is fetched and compiled
before the run starts (:mod:`lab.spark.session`'s ``prepare_drivers``).
"""

from __future__ import annotations

import time
from pathlib import Path

from lab import events as ev
from lab.errors import LabError
from lab.events import read_progress
from lab.host import processes
from lab.host.bridge import JvmBridge
from lab.kafka import tools as kafka_tools
from lab.pipelines.driver import DriverContext
from lab.samza import settings as samza_settings
from lab.samza.build import JOB
from lab.sinks.changelog import changelog_topic
from lab.sinks.topic import output_topic

#: The job JVM's log configuration (log4j2 to standard error, the attempt's log).
LOG_CONFIG = Path(__file__).resolve().parent.parent / "samza" / "log4j2.xml"
#: Seconds the driver waits for the job's first task before it gives up (measured: 5-8 s on 2 cores).
START_TIMEOUT_S = 120.0
#: Seconds a stopping job gets to checkpoint and shut down (a checkpoint, two windows and Samza's shutdown: about 3 s).
STOP_GRACE_S = 20.0


class _Windows:
    """The lab's side of the job's windows: each is a batch of one task's partition."""

    def __init__(self, ctx: DriverContext) -> None:
        self.ctx = ctx
        self.batch = ctx.last_batch() + 1
        self.positions = {int(p): o for p, o in read_progress(ctx.run_dir).get("positions", {}).items()}

    def window(self, m: dict) -> None:
        ctx, batch, p = self.ctx, self.batch, m["partition"]
        replayed = max(0, min(self.positions.get(p, 0), m["until"]) - m["from"])
        ctx.batch_start(batch, {p: (m["from"], m["until"])}, m["rows"], replayed=replayed)
        ctx.point("after-output-before-commit", batch)
        self.positions[p] = max(self.positions.get(p, 0), m["until"])
        ctx.batch_done(batch, m["rows"])
        ctx.progress(self.positions, batch)
        self.batch += 1


def run(ctx: DriverContext) -> None:
    """Run the job until the supervisor asks to stop (SIGTERM), then stop it with a checkpoint."""
    cfg = ctx.config
    out = output_topic(cfg.topic)
    kafka_tools.create_topic(ctx.bootstrap, out, cfg.partitions, replication=cfg.cluster.nodes,
                             configs=cfg.topic_configs)
    classpath = JOB.ensure()
    work = ctx.run_dir / "samza"
    work.mkdir(exist_ok=True)
    job = samza_settings.job_config(cfg, run_id=ctx.run_id, attempt=ctx.attempt, bootstrap=ctx.bootstrap,
                                    state_dir=str(work / f"state-{ctx.attempt}"), output=out)
    props = work / f"attempt-{ctx.attempt}.properties"
    props.write_text(samza_settings.properties_text(job))
    windows = _Windows(ctx)
    began = time.monotonic()
    bridge = JvmBridge("the Samza job", [*samza_settings.JVM_FLAGS, f"-Dlog4j.configurationFile={LOG_CONFIG}",
                                         "-cp", classpath, JOB.main_class, props],
                       work / f"job-{ctx.attempt}.log", cwd=work)
    ready = stop_sent = None
    ctx.phase("jvm")
    try:
        while bridge.alive:
            if ctx.stopping and stop_sent is None:
                bridge.answer("stop")  # each task checkpoints at its next window, then the container shuts down
                stop_sent = time.monotonic()
            if stop_sent is not None and time.monotonic() - stop_sent > STOP_GRACE_S:
                break
            try:
                m = bridge.message(timeout=0.2)
            except LabError:
                if stop_sent is not None:
                    break  # it shut down as asked
                raise
            if m is None:
                if ready is None and time.monotonic() - began > START_TIMEOUT_S:
                    raise LabError(f"the Samza job started no task within {START_TIMEOUT_S:g} s: "
                                   f"{processes.last_log_line(bridge.log_path)}")
                continue
            if m["op"] == "window":
                windows.window(m)
                bridge.answer("ok")
            elif m["op"] == "restored":
                ctx.events.write(ev.CHANGELOG_RESTORE, attempt=ctx.attempt, topic=changelog_topic(cfg.topic),
                                 task=m.get("task"), partition=m.get("partition"), keys=m.get("keys"),
                                 counted=m.get("counted"), records=None, bytes=None, took_s=m.get("took_s"))
            elif m["op"] == "ready" and ready is None:
                ready = time.monotonic()
                ctx.ready()
    finally:
        bridge.kill()
