"""A run's batch limits and defaults: how often batches come and how many records one may hold.

Pure: :func:`lab.config.make_config` applies them to a :class:`lab.config.RunConfig`.
"""

from __future__ import annotations

#: The shortest batch interval: the receivers' block interval (``spark.streaming.blockInterval``).
MIN_BATCH_INTERVAL_S = 0.2

#: The batch interval when none is given, for every pipeline but flink. Spark's pipelines cap a batch's
#: records (``max_batch_records``), so the interval sets how fast a backlog drains: with batches of 500 once a
#: second, a run at 500 events/s never catches up on what a restart left (measured, the 3,000-event structured
#: crash scenario: 20.6-21.2 s, against 17.4-18.6 s with 0.5 s; the default grid has run at 0.5 s since it
#: was measured with every classification unchanged).
DEFAULT_BATCH_INTERVAL_S = 0.5
#: flink's ``batch_interval_s`` is its checkpoint interval, which its notebook and tests time their crashes by.
FLINK_CHECKPOINT_INTERVAL_S = 1.0

#: A batch's default record cap for runs up to ``SMALL_BATCH * BATCHES_PER_RUN`` events.
SMALL_BATCH = 500
#: Larger runs get ``events / BATCHES_PER_RUN`` records a batch by default.
BATCHES_PER_RUN = 20


def default_max_batch(events: int) -> int:
    """``--max-batch``'s default: 500 records, or a twentieth of the run's events when that is more.

    Small runs keep their few readable batches (3,000 events: batches of 500);
    a large one keeps up with its producer (measured: 200,000 events at full
    speed, with batches of 500 once a second, delivered 42,500 in 120 s; with
    10,000 it drains). A cap, not a size: a batch takes what has arrived, up to it.
    """
    return max(SMALL_BATCH, -(-int(events) // BATCHES_PER_RUN))


def default_batch_interval(pipeline: str) -> float:
    """``--batch-interval``'s default: :data:`DEFAULT_BATCH_INTERVAL_S`, or flink's checkpoint interval."""
    return FLINK_CHECKPOINT_INTERVAL_S if pipeline == "flink" else DEFAULT_BATCH_INTERVAL_S
