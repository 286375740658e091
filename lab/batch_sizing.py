"""A run's batch limits and defaults: how often batches come and how many records one may hold.

Pure: :func:`lab.config.make_config` applies them to a :class:`lab.config.RunConfig`.
"""

from __future__ import annotations

#: The shortest batch interval: the receivers' block interval (``spark.streaming.blockInterval``).
MIN_BATCH_INTERVAL_S = 0.2

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
