"""The ``receiver`` pipeline's ``window-count``: a running count per key in Spark Streaming's state.

``updateStateByKey`` keeps ``(running count, change)`` per key, checkpointed
with the DStream graph and recovered by ``StreamingContext.getOrCreate``
(:func:`with_running_counts`); the driver writes the changed counts as window
rows over the whole run (:func:`split_tagged`). A line is counted by its key
(:func:`lab.pipelines.receiver.epoch.line_key`, the event's key in a received line).

Delivery guarantee: the state is as the DStream checkpoint keeps it; the
output is as the sink makes it (:mod:`lab.pipelines.receiver.pipeline`).
"""

from __future__ import annotations

from lab.pipelines.receiver.epoch import line_key

# Module-level functions: the DStream checkpoint pickles them by reference, so a restarted
# driver's getOrCreate finds them again.
LINE, COUNT = "line", "count"


def _key_one(line: str) -> tuple[str, int]:
    return line_key(line), 1


def _add_counts(new: list[int], state: tuple[int, int] | None) -> tuple[int, int]:
    """``updateStateByKey``'s function: the state is ``(running count, this batch's change)``."""
    added = sum(new)
    return (state[0] if state else 0) + added, added


def _changed(kv) -> bool:
    return kv[1][1] > 0


def _tag_line(line: str) -> tuple[str, str]:
    return LINE, line


def _tag_count(kv) -> tuple[str, tuple]:
    return COUNT, kv


def with_running_counts(lines):
    """The receiver's ``window-count``: the batch's lines and the keys whose running count changed, in one DStream.

    ``updateStateByKey`` keeps ``(running count, change)`` per key in Spark
    Streaming's state, checkpointed with the DStream graph and recovered by
    ``StreamingContext.getOrCreate``. One output operation then gets both
    the batch's lines (``("line", line)``, for the lab's bookkeeping) and the
    changed counts (``("count", (key, (count, change)))``); split them with
    :func:`split_tagged`.
    """
    counts = lines.map(_key_one).updateStateByKey(_add_counts)
    return lines.map(_tag_line).union(counts.filter(_changed).map(_tag_count))


def split_tagged(items) -> tuple[list[str], list[tuple]]:
    """``(lines, window rows)`` from :func:`with_running_counts`'s collected items.

    Window rows are :data:`lab.sinks.spec.WindowRow` over the whole run: window
    ``[0, 0)`` (no event-time window: a running count per key).
    """
    lines = [v for tag, v in items if tag == LINE]
    rows = sorted((0, 0, key, count, change) for tag, (key, (count, change)) in
                  ((t, v) for t, v in items if t == COUNT))
    return lines, rows
