"""The receiver feeder's side of the run's consumer group: committed offsets, forward-only commits, broker trouble.

The feeder (:mod:`lab.pipelines.receiver.feed`) commits offsets to the run's
group id without ever joining the group (``assign()``, see
:mod:`lab.kafka.tools`), and every new connection starts from what the group
has committed. :class:`GroupOffsets` is that bookkeeping:

* :meth:`GroupOffsets.commit` commits only forward moves, per partition.
  A commit that fails (a broker outage) is kept as *pending* and retried on
  the next call, merged with whatever came since, so nothing is committed
  out of order and nothing is skipped.
* :meth:`GroupOffsets.refresh` reads the committed offsets from the broker;
  a partition without a commit starts at its beginning offset.
* After every successful commit, ``on_commit(offsets)`` gets the committed
  offsets: the next offset per partition a restarted receiver would read
  (the pipeline's progress).

On failure
----------
Broker errors never raise from here: each kind (``committing``, ``fetching``,
``reading committed offsets``) is written to the timeline once per outage
(``receiver-broker-error``, then ``receiver-broker-ok``), with a short
back-off, and the caller tries again on its next loop.
"""

from __future__ import annotations

import time

from lab import events as ev

#: Seconds the feeder backs off after a broker error before its next try.
TROUBLE_BACKOFF_S = 0.2


class GroupOffsets:
    """Committed offsets of ``topic`` in the group of ``consumer`` (an assigned kafka-python consumer with a group id).

    Parameters
    ----------
    consumer
        The feeder's consumer: ``group_id`` set, partitions assigned, never subscribed.
    topic : str
    partitions : int
    events : lab.events.EventLog
        Where broker trouble is reported.
    on_commit : callable
        Called with ``{partition: next offset}`` after each successful commit.
    """

    def __init__(self, consumer, topic: str, partitions: int, events, on_commit) -> None:
        from kafka import TopicPartition

        self.consumer = consumer
        self.topic = topic
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.events = events
        self.on_commit = on_commit
        self.committed: dict[int, int] = {}
        self.pending: dict[int, int] = {}
        self._troubles: set[str] = set()

    def commit(self, offsets: dict[int, int]) -> None:
        """Commit ``offsets`` (only forward moves) together with any pending ones; a failure stays pending."""
        from kafka import OffsetAndMetadata, TopicPartition

        for p, o in offsets.items():
            if o > max(self.committed.get(p, -1), self.pending.get(p, -1)):
                self.pending[p] = o
        if not self.pending:
            return
        try:
            self.consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
                                  for p, o in self.pending.items()})
        except Exception as err:
            self.trouble("committing", err)
            return
        self.ok("committing")
        self.committed.update(self.pending)
        self.pending = {}
        self.on_commit(dict(self.committed))

    def refresh(self) -> bool:
        """Set :attr:`committed` from the group; ``False`` (reported as trouble) when the broker does not answer."""
        try:
            self.committed = self._read()
        except Exception as err:
            self.trouble("reading committed offsets", err)
            return False
        self.ok("reading committed offsets")
        return True

    def _read(self) -> dict[int, int]:
        out = {}
        beginning = None
        for tp in self.tps:
            offset = self.consumer.committed(tp)
            if offset is None:
                if beginning is None:
                    beginning = self.consumer.beginning_offsets(self.tps)
                offset = beginning[tp]
            out[tp.partition] = int(offset)
        return out

    def trouble(self, what: str, err: BaseException) -> None:
        """Record a broker error once per outage (not once per retry) and back off briefly."""
        if what not in self._troubles:
            self._troubles.add(what)
            self.events.write(ev.RECEIVER_BROKER_ERROR, during=what, error=repr(err)[:200])
        time.sleep(TROUBLE_BACKOFF_S)

    def ok(self, what: str) -> None:
        """``what`` works again: end its outage in the timeline."""
        if what in self._troubles:
            self._troubles.discard(what)
            self.events.write(ev.RECEIVER_BROKER_OK, during=what)
