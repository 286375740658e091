"""The ``plain`` pipeline: no Spark, the lab's baseline.

A kafka-python consumer reads the topic, writes each poll's records to the
sink as one batch, and commits offsets to the run's consumer group
(``lab-<run id>``) in the order ``--commit`` says.

Group membership
----------------
The consumer ``assign()``s the topic's partitions and commits offsets to the
run's group without joining it. Subscribing (a static group member, so a
restarted driver takes its predecessor's place at once) was measured on
Apache Kafka 4.1.1: back in its group 0.7 s after a restart, but in 1 run of
18 the kafka-python 3.0.12 consumer, after rejoining, stopped heartbeating
and never fetched again (stuck in ``poll``), so the run never drained. The
committed offsets, and so the guarantee below, are the same either way.

Delivery guarantee
------------------
``auto``           commit on a timer inside ``poll()``: a crash replays what
                   was output since the last timer commit (duplicates).
``after-output``   at-least-once: a crash between output and commit
                   replays that batch.
``before-output``  at-most-once: a crash between commit and output loses
                   that batch.

Named points: ``after-commit-before-output`` (``before-output`` only),
``mid-output``, ``after-output-before-commit``.

On failure
----------
A record that is not a lab event ends the driver with
:class:`lab.kafka.read.NotALabEvent`, naming its partition and offset. A
commit the broker cannot take (it is down: ``broker-crash``, ``broker-outage``)
is retried every 0.5 s for up to :data:`COMMIT_RETRY_S`: the batch counts
as done only once its commit is in, so the guarantee above holds across a
broker restart. Longer, the driver exits and the supervisor restarts it.
"""

from __future__ import annotations

import time

from lab.kafka import tools as kafka_tools
from lab.kafka.read import record_row
from lab.pipelines.driver import DriverContext
from lab.sinks.reader import open_sink

#: Seconds a commit is retried while the broker is away. Measured: the embedded Kafka restarts on
#: its data in 3.7-5.3 s after a SIGKILL; a broker-outage lasts what its plan says (default 5 s).
COMMIT_RETRY_S = 60.0

def run(ctx: DriverContext) -> None:
    """Consume until the supervisor asks to stop (SIGTERM)."""
    from kafka import OffsetAndMetadata, TopicPartition

    cfg = ctx.config
    consumer = kafka_tools.consumer(
        ctx.bootstrap,
        group_id=f"lab-{ctx.run_id}",
        enable_auto_commit=cfg.kafka.commit == "auto",
        auto_commit_interval_ms=1000,
        max_poll_records=cfg.max_batch_records,
        isolation_level=cfg.isolation_level,
    )
    tps = [TopicPartition(cfg.topic, p) for p in range(cfg.partitions)]
    consumer.assign(tps)
    sink = open_sink(ctx.run_dir)
    batch = ctx.last_batch() + 1

    def positions() -> dict[int, int]:
        return {tp.partition: consumer.position(tp) for tp in tps}

    def commit() -> None:
        offsets = {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in tps}
        deadline = time.monotonic() + COMMIT_RETRY_S
        while True:
            try:
                consumer.commit(offsets)
                return
            except Exception as e:  # kafka-python raises several types for a broker that is away
                away = getattr(e, "retriable", False) or type(e).__name__ in _RETRIED
                if not away or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    try:
        while not ctx.stopping:
            records = kafka_tools.poll_records(consumer, cfg.max_batch_records)
            if not records:
                ctx.progress(positions(), batch - 1)
                continue
            rows, ranges = [], {}
            for r in records:
                rows.append(record_row(r.partition, r.offset, r.value))
                start, _ = ranges.get(r.partition, (r.offset, r.offset))
                ranges[r.partition] = (start, r.offset + 1)
            ctx.batch_start(batch, ranges, len(rows))
            if cfg.kafka.commit == "before-output":
                commit()
                ctx.point("after-commit-before-output", batch)
            sink.write_batch(rows, f"plain-{batch}", on_midway=lambda batch=batch: ctx.point("mid-output", batch))
            ctx.point("after-output-before-commit", batch)
            if cfg.kafka.commit == "after-output":
                commit()
            ctx.batch_done(batch, len(rows))
            ctx.progress(positions(), batch)
            batch += 1
        if cfg.kafka.commit != "before-output":
            commit()
    finally:
        consumer.close(autocommit=False)
        sink.close()


#: Exceptions of kafka-python a commit is retried on besides those it marks ``retriable``: the broker
#: is away (a connection that broke, none reachable, no answer in time). A commit the group refuses
#: (``CommitFailedError``: this member was replaced) is not retried: the driver exits, and its restart
#: reads from the group's last commit, as the guarantee says.
_RETRIED = ("KafkaConnectionError", "NoBrokersAvailable", "KafkaTimeoutError", "NodeNotReadyError")
