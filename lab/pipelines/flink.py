"""The ``flink`` pipeline: Apache Flink's checkpoints on the lab's topic, audited like every other pipeline.

The driver (this module, in the lab's environment) starts the job
(:mod:`lab.flink.job`) on the Flink environment's Python (:mod:`lab.flink.env`)
in its own process group, so ``driver-crash`` is one ``killpg`` of the driver,
the job's Python, its JVM (a Flink mini-cluster: JobManager and TaskManager in
one process) and anything they started. The job reads the run's topic with
Flink's ``KafkaSource`` and writes every value unchanged to ``<topic>.out`` with
``KafkaSink``; the auditor reads that topic ``read_committed`` (:mod:`lab.sinks.topic`).

Protocol
--------
1. Pick the newest retained checkpoint under ``checkpoint/`` (a ``chk-N``
   directory with its ``_metadata``: Flink writes that file last, when the
   checkpoint completes) and write ``flink-start``: the checkpoint restored
   (``None`` on a first start: the group's committed offsets, else the earliest)
   and the output topic's end offsets, i.e. what earlier attempts left there.
2. Start the job (``flink/attempt-N.json`` is its spec; its log goes to
   ``flink/logs-N/``). Once it is submitted: ``flink-job`` with its REST address
   (Flink logs ``Rest endpoint listening at``; bound to 127.0.0.1, port 0), then
   ``driver-ready`` (the registry's ``ready_when_running``: the run's producer starts
   at the first one, so events arrive while the job runs) and, once its source
   subtasks have their partitions, ``flink-source`` with the offsets they start
   from (from the log: after a restore, the checkpoint's).
3. Every :data:`POLL_S`: each checkpoint that ended (REST history) becomes a
   ``flink-checkpoint`` event; each completed one ends a lab batch (``batch-done``,
   its ranges from the checkpoint's offsets and the group's committed ones, which the
   source commits when a checkpoint completes) and starts the next (``batch-start``);
   ``progress.json`` is the group's committed offsets. A batch is therefore the epoch
   between two completed checkpoints, numbered on across restarts, except that a
   checkpoint covering none of the records waiting in the topic (a source not yet
   reading: a job's first seconds on a loaded machine) leaves the batch open.
4. On SIGTERM the job is stopped with a savepoint (the sink commits what it
   covers), then the driver records the final offsets and returns.

Named point: ``mid-output`` of batch N, half a checkpoint interval after batch N
started: records of the epoch are in the output topic (at-least-once sink) or in
the sink's open transaction (exactly-once sink), none covered by a checkpoint.

Delivery guarantee
------------------
What the run's settings give, measured by the audit, never assumed:
``--checkpointing aligned`` or ``unaligned`` with the exactly-once sink: exactly
once for a ``read_committed`` reader across driver crashes (the restore aborts the
dead job's transactions and replays from the checkpoint's offsets). With the
at-least-once sink (``--checkpointing at-least-once`` by default): every record the
dead job wrote after the restored checkpoint's offsets is written again, so a
crash duplicates exactly those (:mod:`lab.audit.flink_replay` predicts the number from
this timeline and the report compares it with the audit's).

On failure
----------
A job that ends on its own (a task failure: ``restart-strategy: none``) ends the
driver with the job's last log line; the supervisor restarts it from the newest
checkpoint. A missing Flink environment or connector is a
:class:`~lab.errors.DriverConfigError` naming ``make flink`` (the supervisor
checks both before the run starts).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from lab import events as ev
from lab.errors import DriverConfigError, LabError
from lab.flink import env as flink_env, settings as flink_settings
from lab.host import jars
from lab.host.processes import kill_when_parent_exits
from lab.kafka import tools as kafka_tools
from lab.pipelines.driver import DriverContext
from lab.sinks.topic import output_topic

#: Seconds between two looks at the job (its checkpoints, the group's offsets, the process).
POLL_S = 0.2
#: Measured: the job is submitted 3-7 s after its Python starts (the JVM and the mini-cluster); this
#: bounds a start that hangs.
JOB_START_TIMEOUT_S = 120.0
#: The supervisor SIGKILLs the group 20 s after its SIGTERM; the stop with a savepoint measured about 3 s.
STOP_TIMEOUT_S = 17.0
JOB_SCRIPT = Path(__file__).resolve().parent.parent / "flink" / "job.py"
_REST = re.compile(r"Rest endpoint listening at (\S+?):(\d+)")


def completed_checkpoints(checkpoint_dir: Path) -> list[tuple[str, int, float]]:
    """``(path, id, mtime)`` of every completed checkpoint under ``checkpoint_dir`` (``<job>/chk-<id>/_metadata``)."""
    out = []
    for meta in checkpoint_dir.glob("*/chk-*/_metadata"):
        try:
            out.append((str(meta.parent), int(meta.parent.name.split("-", 1)[1]), meta.stat().st_mtime))
        except (ValueError, OSError):
            continue
    return out


def _log_text(log_dir: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(log_dir.glob("*.log")))


def _get_json(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None  # the job is starting or stopping: the next poll asks again


def _committed(consumer, tps) -> dict[int, int]:
    out = {}
    for tp in tps:
        off = consumer.committed(tp)
        if off is not None:
            out[tp.partition] = off
    return out


def job_jvm_args(user_args: str, tuning: str, tmp_dir: Path) -> str:
    """PyFlink's ``JVM_ARGS`` for the job's JVM: the user's own, then ``LAB_FLINK_JVM_OPTIONS``, then its tmpdir
    (pure)."""
    return " ".join(a for a in (user_args.strip(), tuning.strip(), f"-Djava.io.tmpdir={tmp_dir}") if a)


def _start_job(ctx: DriverContext, spec: dict, attempt_dir: Path) -> tuple[subprocess.Popen, Path]:
    spec_path = attempt_dir.parent / f"attempt-{ctx.attempt}.json"
    # Flink's working files (the mini-cluster's blobs, the RPC system's jar, spill and shuffle directories) go to
    # the attempt's own directory, removed by the driver (_remove_working_files): in the system's, every run left
    # about 11 MB (5 entries) there for good, since a killed job never removes them.
    tmp_dir = attempt_dir / "tmp"
    tmp_dir.mkdir(exist_ok=True)
    spec = {**spec, "tmp_dir": str(tmp_dir)}
    spec_path.write_text(json.dumps(spec, indent=1))
    from lab.host.java import java_env
    from lab.host.start_tuning import StartTuning

    jvm_args = job_jvm_args(os.environ.get("JVM_ARGS", ""), StartTuning.from_env().flink_jvm_options, tmp_dir)
    env = {**os.environ, **java_env(), "FLINK_LOG_DIR": str(attempt_dir), "JVM_ARGS": jvm_args,
           # PyFlink starts a gRPC server on every interface for Python workers unless told they are processes;
           # the job runs no Python function, so none is needed (and the lab binds to 127.0.0.1 only).
           "_python_worker_execution_mode": "process"}
    with open(attempt_dir.parent / f"attempt-{ctx.attempt}.out", "ab") as out:
        # Same process group as the driver (no new session): a crash's killpg takes the job and its JVM. The job
        # dies with the driver too (PR_SET_PDEATHSIG), and its JVM with the job (lab.flink.job.jvm_dies_with_job):
        # after `kill -9` of `lab run`, the driver died with it but the job and its JVM ran on, reparented to init.
        child = subprocess.Popen([str(flink_env.python_path()), str(JOB_SCRIPT), str(spec_path)],
                                 env=env, stdout=out, stderr=subprocess.STDOUT, cwd=str(attempt_dir),
                                 preexec_fn=kill_when_parent_exits)
    return child, spec_path


def _await_job(ctx: DriverContext, child: subprocess.Popen, spec_path: Path, attempt_dir: Path) -> tuple[str, str]:
    """Wait for the job's id and REST address; raise when its process ends first or it takes too long."""
    info_path = Path(str(spec_path) + ".info.json")
    began = time.monotonic()
    rest = None
    while time.monotonic() - began < JOB_START_TIMEOUT_S:
        if ctx.stopping:
            raise _Stopped()
        if child.poll() is not None:
            raise RuntimeError(f"the Flink job's process exited ({child.returncode}) before its job ran: "
                               f"{_last_line(spec_path)}")
        if rest is None:
            m = _REST.search(_log_text(attempt_dir))
            rest = m and f"http://{m[1]}:{m[2]}"
        if info_path.exists() and rest:
            return json.loads(info_path.read_text())["job_id"], rest
        time.sleep(0.1)
    raise RuntimeError(f"the Flink job did not start within {JOB_START_TIMEOUT_S:.0f} s; see {attempt_dir}")


class _Stopped(Exception):
    """SIGTERM came while the job was starting."""


def _last_line(spec_path: Path) -> str:
    out = spec_path.with_suffix(".out")
    lines = [ln for ln in (out.read_text(errors="replace").splitlines() if out.exists() else []) if ln.strip()]
    return lines[-1][:300] if lines else "(no output)"


def run(ctx: DriverContext) -> None:
    """Run the Flink job until SIGTERM, reporting its checkpoints as batches (module docstring)."""
    from kafka import TopicPartition

    cfg = ctx.config
    try:
        flink_env.check_ready()
    except LabError as e:
        raise DriverConfigError(str(e)) from None
    run_dir, out = ctx.run_dir, output_topic(cfg.topic)
    attempt_dir = run_dir / "flink" / f"logs-{ctx.attempt}"
    attempt_dir.mkdir(parents=True, exist_ok=True)
    checkpoint_dir = run_dir / "checkpoint"
    kafka_tools.create_topic(ctx.bootstrap, out, cfg.partitions, replication=cfg.cluster.nodes,
                             configs=cfg.topic_configs)
    restore = flink_settings.newest_checkpoint(completed_checkpoints(checkpoint_dir))
    out_ends = kafka_tools.end_offsets(ctx.bootstrap, out, cfg.partitions)
    spec = flink_settings.job_spec(cfg, run_id=ctx.run_id, bootstrap=ctx.bootstrap,
                                   checkpoint_dir=str(checkpoint_dir), savepoint_dir=str(run_dir / "savepoints"),
                                   restore=restore and restore[0], connector_jar=str(jars.ensure(flink_env.JAR_SET)[0]))
    tps = [TopicPartition(cfg.topic, p) for p in range(cfg.partitions)]
    consumer = kafka_tools.consumer(ctx.bootstrap, group_id=f"lab-{ctx.run_id}", enable_auto_commit=False)
    try:
        # Where the job will read from: the restored checkpoint's offsets, else the group's (else the earliest).
        restored = _offsets_in(Path(restore[0]), cfg.topic) if restore else {}
        begin = {tp.partition: 0 for tp in tps} | _committed(consumer, tps) | restored
        ctx.events.write(ev.FLINK_START, attempt=ctx.attempt, restore=restore and restore[0],
                         restore_checkpoint=restore and restore[1], start_offsets={str(p): o for p, o in begin.items()},
                         out_end_offsets={str(p): o for p, o in out_ends.items()},
                         checkpointing=cfg.flink.checkpointing, delivery=spec["delivery"],
                         interval_ms=spec["interval_ms"])
        began = time.monotonic()
        _remove_working_files(run_dir)  # earlier attempts': their JVMs went with their driver's process group
        child, spec_path = _start_job(ctx, spec, attempt_dir)
        try:
            job_id, rest = _await_job(ctx, child, spec_path, attempt_dir)
            ctx.events.write(ev.FLINK_JOB, job_id=job_id, rest=rest, took_s=round(time.monotonic() - began, 3),
                             attempt=ctx.attempt)
            ctx.ready()  # faults may target it from now on; the first one's also starts the run's producer
            ctx.phase("query")
            _watch(ctx, child, spec_path, job_id, rest, attempt_dir, consumer, tps, begin)
        except _Stopped:
            return
        finally:
            _stop(child)
            _remove_working_files(run_dir)
    finally:
        consumer.close(autocommit=False)


def _remove_working_files(run_dir: Path) -> None:
    """Remove Flink's working files (``flink/logs-N/tmp``: blobs, spill, the RPC jar; about 11 MB an attempt).

    Called before an attempt starts its job (an earlier attempt's JVM went with its driver's process group)
    and after it stopped it (a job killed after the stop timeout may leave its JVM running until the driver's
    group ends: deleting files under it is harmless). The logs beside them stay.
    """
    for tmp in (run_dir / "flink").glob("logs-*/tmp"):
        shutil.rmtree(tmp, ignore_errors=True)


def _watch(ctx, child, spec_path, job_id, rest, attempt_dir, consumer, tps, begin: dict[int, int]) -> None:
    cfg = ctx.config
    half_interval = cfg.batch_interval_s / 2
    job_dir = ctx.run_dir / "checkpoint" / job_id
    done: set[int] = set()      # checkpoints of this job already ended as a batch
    reported: set[int] = set()  # checkpoints already in the timeline (REST)
    prev = dict(begin)
    batch = ctx.last_batch() + 1
    ctx.batch_start(batch, {p: (o, o) for p, o in prev.items()}, 0)
    started, pointed, source_said = time.monotonic(), False, False
    while not ctx.stopping:
        if child.poll() is not None:
            raise RuntimeError(f"the Flink job ended on its own (exit {child.returncode}): {_last_line(spec_path)}")
        if not source_said:  # the log is read until every partition's split is in it, then never again
            splits = flink_settings.split_offsets(_log_text(attempt_dir), cfg.topic)
            if len(splits) == len(tps):
                source_said = True
                if all(o >= 0 for o in splits.values()):  # markers (a first start) are resolved by the reader later
                    ctx.events.write(ev.FLINK_SOURCE, offsets={str(p): o for p, o in sorted(splits.items())},
                                     attempt=ctx.attempt)
        _report_checkpoints(ctx, rest, job_id, reported)
        new = sorted((cid, path) for path, cid, _ in completed_checkpoints(job_dir.parent)
                     if Path(path).parent == job_dir and cid not in done)
        if new:
            cid, path = new[-1]
            done.update(c for c, _ in new)
            # What a restart from this checkpoint reads: its own offsets (the group's commit comes later, and
            # only once the source's next fetch returns: up to 10 s when no record arrives).
            now = prev | _committed(consumer, tps) | _offsets_in(Path(path), cfg.topic)
            rows = sum(now[p] - prev[p] for p in now)
            # A checkpoint that covers none of the records waiting in the topic does not end the batch. On a
            # loaded machine a job's source read its first records only after checkpoint 2: a crash "mid-output"
            # of batch 2 then killed a job that had read nothing (its restore held no offsets, and at-least-once
            # barriers duplicated nothing). With nothing waiting, checkpoints go on ending batches, so a plan at
            # a batch past the data still comes.
            if rows or not _waiting(consumer, tps, prev):
                if not pointed:  # never skip a planned crash: the point comes before the batch it belongs to ends
                    ctx.point("mid-output", batch)
                ctx.batch_done(batch, rows, checkpoint=cid, ranges={str(p): [prev[p], now[p]] for p in sorted(now)})
                ctx.progress(now, batch)
                prev, batch = now, batch + 1
                ctx.batch_start(batch, {p: (o, o) for p, o in prev.items()}, 0)
                started, pointed = time.monotonic(), False
        elif not pointed and time.monotonic() - started >= half_interval:
            pointed = True
            ctx.point("mid-output", batch)  # blocks here when a crash is planned at it
        time.sleep(POLL_S)
    _stop(child)
    _report_checkpoints(ctx, rest, job_id, reported)
    ctx.progress(prev | _committed(consumer, tps), batch - 1)


def _waiting(consumer, tps, positions: dict[int, int]) -> bool:
    """Whether the topic holds records past ``positions`` (per partition) that the job has not read yet."""
    ends = consumer.end_offsets(tps)
    return any(ends.get(tp, 0) > positions.get(tp.partition, 0) for tp in tps)


def _offsets_in(checkpoint: Path, topic: str) -> dict[int, int]:
    try:
        return flink_settings.checkpoint_offsets((checkpoint / "_metadata").read_bytes(), topic)
    except OSError:
        return {}  # retained checkpoints rotate: an old one may be gone already


def _report_checkpoints(ctx, rest: str, job_id: str, reported: set[int]) -> None:
    """A ``flink-checkpoint`` event for each checkpoint that ended since the last call (REST statistics)."""
    history = (_get_json(f"{rest}/jobs/{job_id}/checkpoints") or {}).get("history") or []
    for entry in sorted(history, key=lambda e: e.get("id", 0)):
        if entry.get("status") in ("COMPLETED", "FAILED") and entry.get("id") not in reported:
            reported.add(entry["id"])
            ctx.events.write(ev.FLINK_CHECKPOINT, **flink_settings.checkpoint_event(entry), attempt=ctx.attempt)


def _stop(child: subprocess.Popen) -> None:
    """Stop the job with a savepoint (SIGTERM to its Python), or kill it when that takes too long."""
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()  # its JVM goes with the driver's group when the supervisor ends it
        child.wait()
