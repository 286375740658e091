"""The ``plain`` pipeline: no Spark, the lab's baseline.

A kafka-python consumer reads the topic partitions (assigned, not
subscribed: see :mod:`lab.kafka_tools`), writes each poll's records to the
sink as one batch, and commits offsets to the run's consumer group in the
order ``--commit`` says.

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
:class:`lab.kafka_read.NotALabEvent`, naming its partition and offset.
"""

from __future__ import annotations

from lab import kafka_tools
from lab.driver import DriverContext
from lab.kafka_read import record_row
from lab.sinks import open_sink


def run(ctx: DriverContext) -> None:
    """Consume until the supervisor asks to stop (SIGTERM)."""
    from kafka import OffsetAndMetadata, TopicPartition

    cfg = ctx.config
    consumer = kafka_tools.consumer(
        ctx.bootstrap,
        group_id=f"lab-{ctx.run_id}",
        enable_auto_commit=cfg.commit == "auto",
        auto_commit_interval_ms=1000,
        max_poll_records=cfg.max_batch_records,
        isolation_level=cfg.producer.isolation_level,
    )
    tps = [TopicPartition(cfg.topic, p) for p in range(cfg.partitions)]
    consumer.assign(tps)
    sink = open_sink(ctx.run_dir)
    batch = ctx.last_batch() + 1

    def positions() -> dict[int, int]:
        return {tp.partition: consumer.position(tp) for tp in tps}

    def commit() -> None:
        consumer.commit({tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in tps})

    try:
        while not ctx.stopping:
            polled = consumer.poll(timeout_ms=200, max_records=cfg.max_batch_records)
            records = [r for tp in sorted(polled, key=lambda t: t.partition) for r in polled[tp]]
            if not records:
                ctx.progress(positions(), batch - 1)
                continue
            rows, ranges = [], {}
            for r in records:
                rows.append(record_row(r.partition, r.offset, r.value))
                start, _ = ranges.get(r.partition, (r.offset, r.offset))
                ranges[r.partition] = (start, r.offset + 1)
            ctx.batch_start(batch, ranges, len(rows))
            if cfg.commit == "before-output":
                commit()
                ctx.point("after-commit-before-output", batch)
            sink.write_batch(rows, f"plain-{batch}", on_midway=lambda: ctx.point("mid-output", batch))
            ctx.point("after-output-before-commit", batch)
            if cfg.commit == "after-output":
                commit()
            ctx.batch_done(batch, len(rows))
            ctx.progress(positions(), batch)
            batch += 1
        if cfg.commit != "before-output":
            commit()
    finally:
        consumer.close(autocommit=False)
        sink.close()
