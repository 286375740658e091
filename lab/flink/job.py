"""The Flink job of the ``flink`` pipeline; runs in the Flink environment's Python, never in the lab's.

``<flink python> lab/flink/job.py SPEC.json`` (started by :mod:`lab.pipelines.flink`
in the driver's own process group, so a crash of the driver is one ``killpg`` of
this process, its JVM and the JVM's children). It imports PyFlink and the
standard library only: the Flink environment pins its own pandas, pyarrow and
py4j, which the lab's do not match (:mod:`lab.flink.env`).

The job
-------
A ``KafkaSource`` reads the run's topic (one source subtask per partition, the
offsets committed to the run's group when a checkpoint completes), ``rebalance()``
sends every source subtask's records to each of ``parallelism`` sink subtasks
(each sink subtask has an input channel per source subtask, so checkpoint barriers
must be aligned across channels, or not), and a ``KafkaSink`` writes the values
unchanged to ``<topic>.out``. No Python function runs in the job: every operator is
Flink's own Java code, so no Python worker starts (measured: the job's first
checkpoint completes about 2 s after submission).

Settings, all stated (the spec's keys, written by the driver):

* ``checkpointing``: ``aligned`` (exactly-once mode: an operator with several
  inputs blocks each input whose barrier arrived until all have),
  ``unaligned`` (exactly-once mode, barriers overtake in-flight records, which go
  into the checkpoint), ``at-least-once`` (barriers are not aligned: records behind
  an early barrier are processed before the snapshot, and replayed after a restore).
* ``delivery``: the ``KafkaSink``'s guarantee: ``exactly-once`` (one Kafka
  transaction per checkpoint, committed when the checkpoint completes; a restore
  aborts the dead job's open transactions) or ``at-least-once`` (records sent as
  they come, flushed at each checkpoint).
* ``restore``: the retained checkpoint to resume from (``execution.state-recovery.path``),
  or ``None`` for the group's committed offsets, else the earliest.

Files
-----
Writes ``SPEC.info.json`` (job id, PID) once the job is submitted. On SIGTERM it
stops the job with a savepoint (``stop_with_savepoint``): the sink commits what the
final savepoint covers, so a graceful stop loses nothing. Exits 0 after a stop, 3
when the job ends on its own (failed or finished), with the job's status on stderr.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def configuration(spec: dict):
    """The job's ``Configuration``: checkpoints, recovery, REST on loopback, the connector jar."""
    from pyflink.common import Configuration

    conf = Configuration()
    # lesson: flink-job
    settings = {
        "execution.runtime-mode": "STREAMING",
        "parallelism.default": str(spec["parallelism"]),
        "execution.checkpointing.interval": f"{spec['interval_ms']} ms",
        "execution.checkpointing.mode": "AT_LEAST_ONCE" if spec["checkpointing"] == "at-least-once" else "EXACTLY_ONCE",
        "execution.checkpointing.unaligned.enabled": str(spec["checkpointing"] == "unaligned").lower(),
        # 0: unaligned from the first barrier, never an aligned start that times out into unaligned.
        "execution.checkpointing.aligned-checkpoint-timeout": "0 ms",
        "execution.checkpointing.dir": "file://" + spec["checkpoint_dir"],
        "execution.checkpointing.savepoint-dir": "file://" + spec["savepoint_dir"],
        # A killed job never gets to clean up; a cancelled or stopped one must not delete what a restart reads.
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "execution.checkpointing.num-retained": "3",
        # A pause of one interval after each completed checkpoint: every epoch (a lab batch) lasts at least that
        # long, so a crash planned half an interval into it (mid-output) always comes before the next checkpoint.
        # Measured without it: after an aligned checkpoint that took 1.4 s, the overdue ones followed 0.2 s apart.
        "execution.checkpointing.min-pause": f"{spec['interval_ms']} ms",
        "execution.checkpointing.max-concurrent-checkpoints": "1",
        # end lesson: flink-job
        "state.backend.type": "hashmap",
        # The Kafka source's offsets stay inline in each checkpoint's _metadata, where the driver reads them
        # (lab.flink.settings.checkpoint_offsets); the source's whole state is under 3 KB.
        "state.storage.fs.memory-threshold": "20 kb",
        # Flink's REST API caches checkpoint statistics for 3 s by default; the timeline wants them sooner.
        "rest.cache.checkpoint-statistics.timeout": "200 ms",
        "web.refresh-interval": "200",
        # A failure inside the job ends it: the lab's supervisor restarts the driver from the newest retained
        # checkpoint, so every recovery is one the timeline shows, never a silent internal restart.
        "restart-strategy.type": "none",
        "rest.address": "127.0.0.1",
        "rest.bind-address": "127.0.0.1",
        "rest.bind-port": "0",
        "jobmanager.bind-host": "127.0.0.1",
        "taskmanager.bind-host": "127.0.0.1",
        "taskmanager.host": "127.0.0.1",
        "pipeline.jars": "file://" + spec["connector_jar"],
        "pipeline.name": f"lab-{spec['run_id']}",
    }
    if spec.get("tmp_dir"):
        settings["io.tmp.dirs"] = spec["tmp_dir"]
    if spec.get("restore"):
        settings["execution.state-recovery.path"] = "file://" + spec["restore"]
    for key, value in settings.items():
        conf.set_string(key, value)
    return conf


def build(env, spec: dict) -> None:
    """Source → rebalance → sink, as the module docstring says."""
    from pyflink.common import WatermarkStrategy
    from pyflink.common.serialization import SimpleStringSchema
    from pyflink.datastream.connectors.base import DeliveryGuarantee
    from pyflink.datastream.connectors.kafka import (
        KafkaOffsetResetStrategy,
        KafkaOffsetsInitializer,
        KafkaRecordSerializationSchema,
        KafkaSink,
        KafkaSource,
    )

    source = (KafkaSource.builder()
              .set_bootstrap_servers(spec["bootstrap"])
              .set_topics(spec["topic"])
              .set_group_id(spec["group"])
              .set_starting_offsets(KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST))
              .set_value_only_deserializer(SimpleStringSchema())
              .set_property("isolation.level", spec["isolation"])
              .set_property("commit.offsets.on.checkpoint", "true")
              .set_property("partition.discovery.interval.ms", "-1")
              .build())
    # lesson: flink-sink
    guarantee = (DeliveryGuarantee.EXACTLY_ONCE if spec["delivery"] == "exactly-once"
                 else DeliveryGuarantee.AT_LEAST_ONCE)
    sink = (KafkaSink.builder()
            .set_bootstrap_servers(spec["bootstrap"])
            .set_record_serializer(KafkaRecordSerializationSchema.builder()
                                   .set_topic(spec["out_topic"])
                                   .set_value_serialization_schema(SimpleStringSchema())
                                   .build())
            .set_delivery_guarantee(guarantee)
            .set_transactional_id_prefix(spec["txn_prefix"])
            # The connector's default (1 h) is above the broker's transaction.max.timeout.ms (15 min), which
            # refuses it. A dead job's transaction is aborted by the restart well before this.
            .set_property("transaction.timeout.ms", str(spec["transaction_timeout_ms"]))
            .set_property("acks", "all")
            .set_property("enable.idempotence", "true"))
    if spec.get("slow_sink"):
        # One record per produce request and one request in flight, each waiting for the broker's ack: the sink
        # becomes the job's bottleneck, so back-pressure fills the network buffers in front of it.
        # A small buffer.memory makes send() block once a few hundred records wait: without it the producer takes
        # every record into its 32 MB buffer, nothing backs up, and the checkpoint's flush is what waits.
        for key, value in (("batch.size", "0"), ("linger.ms", "0"), ("max.in.flight.requests.per.connection", "1"),
                           ("buffer.memory", "32768"), ("max.block.ms", "60000")):
            sink = sink.set_property(key, value)
    sink = sink.build()
    # end lesson: flink-sink
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka-source") \
        .set_parallelism(spec["partitions"])
    stream.rebalance().sink_to(sink).name("kafka-sink").set_parallelism(spec["parallelism"])


def kill_when_parent_exits() -> None:
    """Ask the kernel to SIGKILL this process when its parent exits (Linux only; elsewhere nothing).

    :func:`lab.host.processes.kill_when_parent_exits` again: this file runs by path on the Flink environment's Python,
    which has no ``lab`` package to import it from.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def jvm_dies_with_job() -> None:
    """Start PyFlink's JVM so that it dies with this process (PyFlink starts it with ``Popen`` and no such tie).

    Without it, a job killed with its driver (``kill -9`` of ``lab run``) left its mini-cluster JVM running,
    reparented to init.
    """
    from pyflink import pyflink_gateway_server as gateway

    popen = gateway.Popen

    def tied(*args, preexec_fn=None, **kwargs):
        def before_exec():
            if preexec_fn:
                preexec_fn()
            kill_when_parent_exits()

        return popen(*args, preexec_fn=before_exec, **kwargs)

    gateway.Popen = tied


def main(spec_path: str) -> int:
    from pyflink.datastream import StreamExecutionEnvironment

    jvm_dies_with_job()

    spec = json.loads(open(spec_path).read())
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    env = StreamExecutionEnvironment.get_execution_environment(configuration(spec))
    build(env, spec)
    client = env.execute_async(f"lab-{spec['run_id']}")
    job_id = str(client.get_job_id())
    info = {"job_id": job_id, "pid": os.getpid(), "submitted_at": time.time()}
    tmp = spec_path + ".info.tmp"
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, spec_path + ".info.json")
    while not stop:
        status = str(client.get_job_status().result())
        if status in ("FAILED", "FINISHED", "CANCELED"):
            print(f"flink job {job_id} ended on its own: {status}", file=sys.stderr)
            return 3
        time.sleep(0.2)
    # PyFlink 2.2's JobClient.stop_with_savepoint calls a Java overload that no longer exists (Py4JException).
    from pyflink.java_gateway import get_gateway
    canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    path = client._j_job_client.stopWithSavepoint(False, "file://" + spec["savepoint_dir"], canonical).get()
    print(f"flink job {job_id} stopped with savepoint {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
