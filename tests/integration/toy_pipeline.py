"""A toy pipeline, added as a contributor would add one: its spec and its driver, no other module edited.

It reads every partition from the start on each attempt (it commits nothing) and writes each record to the
sink: with the idempotent sink a replay is stored once, so a driver crash costs nothing but rewrites.
"""

from __future__ import annotations

from lab.faults.catalogue import points_in_order
from lab.kafka import tools as kafka_tools
from lab.kafka.read import record_row
from lab.registry import PipelineSpec
from lab.sinks.reader import open_sink

SPEC = PipelineSpec(
    name="toy", module=__name__, engine="kafka", summary="a test's pipeline: reads from the start, commits nothing",
    label=lambda sink, settings, query: f"toy, {sink} sink", points=points_in_order("mid-output"),
)


def run(ctx) -> None:
    from kafka import TopicPartition

    cfg = ctx.config
    consumer = kafka_tools.consumer(ctx.bootstrap, group_id=None, enable_auto_commit=False,
                                    max_poll_records=cfg.max_batch_records, isolation_level=cfg.isolation_level)
    tps = [TopicPartition(cfg.topic, p) for p in range(cfg.partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    sink, batch = open_sink(ctx.run_dir), ctx.last_batch() + 1
    try:
        while not ctx.stopping:
            records = kafka_tools.poll_records(consumer, cfg.max_batch_records)
            positions = {tp.partition: consumer.position(tp) for tp in tps}
            if not records:
                ctx.progress(positions, batch - 1)
                continue
            ranges = {}
            for r in records:
                start, _ = ranges.get(r.partition, (r.offset, r.offset))
                ranges[r.partition] = (start, r.offset + 1)
            ctx.batch_start(batch, ranges, len(records))
            sink.write_batch([record_row(r.partition, r.offset, r.value) for r in records], f"toy-{batch}",
                             on_midway=lambda batch=batch: ctx.point("mid-output", batch))
            ctx.batch_done(batch, len(records))
            ctx.progress(positions, batch)
            batch += 1
    finally:
        consumer.close(autocommit=False)
        sink.close()
