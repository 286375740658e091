"""The ``kafka-eos`` pipeline: no Spark, Kafka's own exactly-once consume-transform-produce.

A kafka-python consumer reads the run's topic; each poll's records, transformed
(:func:`transform`: the event's JSON with a ``processed`` field), go to the same
partition of the output topic ``<topic>.out`` (:func:`lab.sinks.topic.output_topic`,
created by the driver with the input's partition count, replication factor and
topic configs) inside one Kafka transaction, together with the consumed offsets.

Protocol, per batch
-------------------
1. ``poll()`` the input at ``read_committed``. The partitions are ``assign()``ed
   (no group membership, as in :mod:`lab.pipelines.plain`); a driver starts at
   the run group's (``lab-<run id>``) committed offsets, else at the earliest.
2. ``begin_transaction()``, then ``send()`` every transformed record.
3. ``send_offsets_to_transaction(positions, "lab-<run id>")``: the group's new
   offsets (with the batch number as their metadata) join the transaction.
4. ``commit_transaction()``: the output records and the offsets become visible
   together, or, if the transaction is aborted, neither.

The producer (:mod:`lab.pipelines.shared.eos_producer`) is kafka-python's, or with ``--txn-client java`` Kafka's
Java client in a JVM beside the driver (:mod:`lab.broker.java_producer`): the same calls, checks and bounds;
kafka-python keeps one epoch for all of a driver's transactions (transactions v1), the Java client gets a new
one at each transaction's end (v2), as the report's ``transactions_in_log`` shows.

The producer's ``transactional_id`` is fixed per run (``lab-<run id>-eos``), so a
restarted driver's ``init_transactions()`` names the dead driver's id: the
transaction coordinator bumps the producer epoch (fencing the dead producer)
and aborts its open transaction before the new driver reads anything. The
driver writes an ``eos-init`` event each time: the id, the producer id and
epoch, how long ``init_transactions()`` took, and which earlier attempt
initialised the same id. Measured on Apache Kafka 4.1.1: the same producer id,
epoch 0 for the first driver and 2 for its restart (one bump aborts the open
transaction, one is the new producer's); ``init_transactions()`` took
0.2-0.4 s, with or without a transaction to abort.

State: ``--query key-count`` (Samza's changelog)
------------------------------------------------
The driver keeps a running count per event key, as a Samza task keeps a
logged store (:mod:`lab.sinks.changelog`): a local store, a SQLite file per
driver attempt (``state/attempt-N.sqlite``; a new attempt is a new host and
starts empty), backed by the compacted changelog ``<topic>.changelog`` the
driver creates (``cleanup.policy=compact``, the input's partition count).

* Restore, once, after ``init_transactions()`` (so the dead driver's
  changelog writes are aborted) and before step 1: read the changelog
  ``read_committed`` from the beginning to its end offsets, last value per
  key wins, into the empty store; the ``changelog-restore`` event
  (``records``, ``keys``, ``bytes``, ``took_s``).
* In step 2, right after ``begin_transaction()`` and before the output: each
  changed key's new count (key: the event key; value: JSON ``count``,
  ``batch``, ``attempt``) to the changelog partition of the input record that
  carried it. The output records are those of ``passthrough``.
* After step 4: the new counts into the local store (an aborted batch never
  reaches it).

Measured (Apache Kafka 4.1.1, 3 partitions, 64 keys, batches of 100, a kill
at ``after-output-before-commit``): 3,000 events, kill at batch 3: restore of
57 records (19 keys, 2.1 KB) in 0.13 s, 64 of 64 keys exact, the changelog
666 records ``read_committed`` and 685 ``read_uncommitted`` (the killed
batch's 19 aborted writes). Restore time against changelog size: 0 records
0.13-0.16 s (the consumer's set-up), 556 records (21 KB) 0.15 s, 5,342
(210 KB, 30,000 events, kill at batch 250) 0.30 s, 19,238 (771 KB, 100,000
events, kill at batch 900) 0.70 s: about 30 µs a record. Within a run the
changelog is never compacted (Kafka's cleaner skips the active segment, 1 GiB
by default), so a restore reads every update, not one record per key.

Named points: ``mid-output`` (half of the batch sent in the open transaction
and flushed: those records, and with ``key-count`` all the batch's changelog
writes, are in the log), ``after-output-before-commit`` (every record sent
and flushed, the offsets sent to the transaction, no commit yet).

Delivery guarantee
------------------
Exactly once for a ``read_committed`` reader of the output topic, across driver
crashes at any place: a batch's records count only when its transaction
commits, and then its offsets are committed with them; an aborted batch is read
again from the offsets of the last committed one. A ``read_uncommitted`` reader
gets at least once: the aborted copies stay in the log (the report's
``read_uncommitted_*`` counts, :mod:`lab.sinks.topic`). Measured, 600 events,
batches of 100, a kill at batch 2: ``mid-output`` gave 600 records
``read_committed`` and 650 ``read_uncommitted`` (the 50 sent before the kill);
``after-output-before-commit`` 600 and 700. With ``key-count`` the state is
exactly once too: a batch's changelog writes commit or abort with its output
and its offsets, so the committed changelog holds the counts of exactly the
batches whose offsets are committed, and a restore resumes them where the
offsets resume (the report's ``changelog`` section: every key exact). It needs
a broker that honours transactions and isolation levels, as Apache Kafka does.

On failure
----------
Killed anywhere (``driver-crash``): the supervisor restarts the driver, whose
``init_transactions()`` aborts the open transaction, as above, and (``key-count``)
restores a new store from the committed changelog. A broker that is
away holds the open batch up: its sends and its commit are retried within
the delivery timeout and the transaction timeout (:mod:`lab.pipelines.shared.eos_producer`;
measured: with ``broker-outage@at=2s:for=3s``, ``broker-crash@at=2s:for=3s`` and
``ack-loss@at=1s:count=5``, 3,000 events each, exactly once, no restart). A batch that
fails with a Kafka error the producer can recover from (a send that ran out of
its delivery timeout while the broker was away) is aborted, recorded as
``batch-error``, and read again from the last committed offsets. Every send's
future is checked after ``flush()`` and before the offsets and the commit: a
failed send aborts the batch (``batch-error`` with ``failed_sends``), because
kafka-python 3.0.12 would commit the transaction without it
(:mod:`lab.kafka.transactions`; ``--trust-commit`` skips the check to show
that, and writes ``committed-with-failed-sends``). ``send_offsets_to_transaction()``,
``commit_transaction()`` and ``abort_transaction()`` are bounded by
:data:`TXN_CALL_S`; past it the driver ends (``batch-error`` with action
``exit``) and its restart settles the transaction. A fenced
producer (``ProducerFencedError``: another driver with the same id took over;
recorded as ``producer-fenced``), or an abort that does not complete within
:data:`ABORT_RETRY_S`, ends the driver; the supervisor restarts it and its
``init_transactions()`` cleans up. A paused driver replaced meanwhile
(``driver-pause`` with ``--on-pause replace``) comes back as a zombie in the
middle of its transaction: its next send is refused, as fenced, and it ends
without writing (measured: exactly once, the zombie gone 0.2 s after its SIGCONT).
A record that is not a lab event ends the driver with
:class:`lab.kafka.read.NotALabEvent`, naming its partition and offset.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from lab import events as ev
from lab.events import read_events
from lab.kafka import tools as kafka_tools
from lab.kafka.read import event_fields
from lab.kafka.transactions import CallTimedOut, SendFailed, Sends, bounded, transactional_id
from lab.pipelines.driver import DriverContext
from lab.pipelines.shared.eos_producer import (
    MAX_BLOCK_MS,
    REQUEST_TIMEOUT_MS,
    epoch as _epoch,
    fenced as _fenced,
    kafka_python_version,
    producer as _producer,
)
from lab.sinks import changelog as changelog_state
from lab.sinks.topic import output_topic

#: The bound on each of send_offsets_to_transaction(), commit_transaction() and abort_transaction(), which
#: kafka-python 3.0.12 leaves unbounded (lab.kafka.transactions); the Java client bounds them by max.block.ms.
TXN_CALL_S = MAX_BLOCK_MS / 1000
#: Seconds an abort is retried while the broker is away before the driver gives up and exits.
ABORT_RETRY_S = 60.0
#: The query that keeps a running count per key in a changelog-backed store (:mod:`lab.sinks.changelog`).
KEY_COUNT = "key-count"


def transform(value: bytes, partition: int, offset: int, batch: int, attempt: int) -> bytes:
    """The output record for one input record: the event's JSON, unchanged, plus a ``processed`` field.

    ``processed`` says which batch and driver attempt wrote the copy and which
    input record it came from, so an aborted copy read ``read_uncommitted`` can
    be told from the committed one. ``id``, ``seq`` and ``key`` stay first, so
    :func:`lab.kafka.read.event_fields` reads the output as it reads the input.

    Raises
    ------
    NotALabEvent
        ``value`` is not a lab event (the message names ``partition@offset``).
    """
    event_fields(value, partition, offset)
    event = json.loads(value)
    event["processed"] = {"by": "kafka-eos", "batch": batch, "attempt": attempt, "source": [partition, offset]}
    return json.dumps(event, separators=(",", ":")).encode()


def batch_metadata(batch: int) -> str:
    """The metadata committed with a batch's offsets (its number)."""
    return f"batch={batch}"


def batch_from_metadata(metadata: str | None) -> int:
    """The batch number :func:`batch_metadata` wrote, or -1 for anything else (no commit yet, another writer)."""
    key, _, number = (metadata or "").partition("=")
    return int(number) if key == "batch" and number.isdigit() else -1


def _init(ctx: DriverContext, producer, txn_id: str) -> None:
    """init_transactions(), timed, and the ``eos-init`` event saying which earlier attempt had the same id."""
    before = [e for e in read_events(ctx.run_dir)
              if e["type"] == ev.EOS_INIT and e.get("transactional_id") == txn_id]
    began = time.monotonic()
    producer.init_transactions()  # bounded by MAX_BLOCK_MS: KafkaTimeoutError, and the driver ends
    took = time.monotonic() - began
    pid, epoch = _epoch(producer)
    client = getattr(producer, "client", None) or f"kafka-python {kafka_python_version()}"
    ctx.events.write(ev.EOS_INIT, transactional_id=txn_id, client=client, producer_id=pid, epoch=epoch,
                     took_s=round(took, 4),
                     attempt=ctx.attempt, same_id_as_attempt=before[-1].get("attempt") if before else None,
                     previous_epoch=before[-1].get("epoch") if before else None)


def _restore(ctx: DriverContext, changelog: str) -> changelog_state.LocalStore:
    """This attempt's new, empty store, restored from the committed changelog; the ``changelog-restore`` event."""
    store = changelog_state.LocalStore(changelog_state.store_path(ctx.run_dir, ctx.attempt))
    got = changelog_state.restore(store, ctx.bootstrap, changelog)
    ctx.events.write(ev.CHANGELOG_RESTORE, attempt=ctx.attempt, topic=changelog, **got)
    return store


@dataclass(frozen=True)
class _Names:
    """What every attempt of a run names alike: the group, the transactional id, the output topic and the changelog."""

    group: str
    txn_id: str
    out: str
    changelog: str | None  # only with --query key-count

    @classmethod
    def of(cls, ctx: DriverContext) -> _Names:
        """The names of ``ctx``'s run."""
        cfg = ctx.config
        return cls(f"lab-{ctx.run_id}", transactional_id(ctx.run_id), output_topic(cfg.topic),
                   changelog_state.changelog_topic(cfg.topic) if cfg.query == KEY_COUNT else None)


def _create_topics(ctx: DriverContext, names: _Names) -> None:
    """The output topic and (``key-count``) the compacted changelog, with the input's partition count."""
    cfg = ctx.config
    # On a cluster the output is replicated and configured as the input is: what the audit reads must
    # not be less durable than what was read.
    kafka_tools.create_topic(ctx.bootstrap, names.out, cfg.partitions, replication=cfg.cluster.nodes,
                             configs=cfg.topic_configs)
    if names.changelog is not None:
        kafka_tools.create_topic(ctx.bootstrap, names.changelog, cfg.partitions, replication=cfg.cluster.nodes,
                                 configs={**cfg.topic_configs, **changelog_state.CHANGELOG_CONFIGS})


def run(ctx: DriverContext) -> None:
    """Consume, transform and produce in transactions until the supervisor asks to stop (SIGTERM).

    Set-up: the topics, the producer's ``init_transactions()`` (fencing the dead driver), the
    store restored from the changelog (``key-count``), the consumer at the committed offsets.
    Then one transaction per poll (:meth:`_Transactions.transact`) while no SIGTERM has come; a
    batch under way when it comes is finished first. Then the clients close.

    Delivery guarantee: exactly once for a ``read_committed`` reader of the output topic (module docstring).

    Raises
    ------
    CallTimedOut, KafkaError, SendFailed
        As :meth:`_Transactions.transact` raises them, or a set-up call past its bound (the
        supervisor restarts the driver).
    NotALabEvent
        A record that is not a lab event (the message names its partition and offset).
    """
    names = _Names.of(ctx)
    _create_topics(ctx, names)
    producer = _producer(ctx.bootstrap, names.txn_id, int(ctx.config.kafka.delivery_timeout_s * 1000),
                         ctx.config.kafka.txn_client)
    consumer = store = None
    try:
        # Before the consumer asks for the group's offsets: a read_committed consumer's offset fetch
        # (kafka-python sets require_stable) is refused while the dead driver's transaction holds
        # offsets for the group (after-output-before-commit), until that transaction ends.
        _init(ctx, producer, names.txn_id)
        if names.changelog is not None:
            # After init_transactions(): the dead driver's changelog writes are aborted by then, so the
            # read_committed end offsets hold exactly the batches whose offsets are committed.
            store = _restore(ctx, names.changelog)
        consumer = kafka_tools.consumer(ctx.bootstrap, group_id=names.group, enable_auto_commit=False,
                                        max_poll_records=ctx.config.max_batch_records, isolation_level="read_committed")
        batches = _Transactions.resume(ctx, names, producer, consumer, store)
        while not ctx.stopping:
            batches.transact_next_poll()
    finally:
        if consumer is not None:
            consumer.close(autocommit=False)
        if store is not None:
            store.close()
        producer.close(timeout=5)


class _Transactions:
    """One driver attempt's batches: each poll's records, transformed, in one transaction with their offsets.

    Holds what the batches share: the clients, the ``key-count`` store, the next
    batch's number and the offsets of the last committed batch, which an aborted
    batch is read again from.
    """

    def __init__(self, ctx: DriverContext, names: _Names, producer, consumer, store, tps, committed: dict[int, int],
                 batch: int) -> None:
        self.ctx, self.cfg, self.names = ctx, ctx.config, names
        self.producer, self.consumer, self.store, self.tps = producer, consumer, store, tps
        self.committed, self.batch = committed, batch
        # After the delivery timeout every send of the transaction has completed, acknowledged or failed.
        self.flush_s = ctx.config.kafka.delivery_timeout_s + REQUEST_TIMEOUT_MS / 1000

    @classmethod
    def resume(cls, ctx: DriverContext, names: _Names, producer, consumer, store) -> _Transactions:
        """Assign every partition of the input, and go on after the last committed batch.

        The consumer's positions are the group's committed offsets (else the earliest);
        the next batch's number follows the highest of the timeline's and the one
        the committed offsets carry as metadata (:func:`batch_metadata`).
        """
        from kafka import TopicPartition

        tps = [TopicPartition(ctx.config.topic, p) for p in range(ctx.config.partitions)]
        consumer.assign(tps)
        committed = _positions(consumer, tps)
        batch = max([ctx.last_batch(), *(batch_from_metadata(getattr(
            consumer.committed(tp, metadata=True, timeout_ms=MAX_BLOCK_MS), "metadata", None)) for tp in tps)]) + 1
        return cls(ctx, names, producer, consumer, store, tps, committed, batch)

    def positions(self) -> dict[int, int]:
        """The consumer's position on each partition, bounded (:func:`_positions`)."""
        return _positions(self.consumer, self.tps)

    def transact_next_poll(self) -> None:
        """Poll once: the records, if any, are the next batch, in one transaction; without records, progress again."""
        records = kafka_tools.poll_records(self.consumer, self.cfg.max_batch_records)
        if not records:
            self.ctx.progress(self.positions(), self.batch - 1)
            return
        committed = self.transact(self.batch, records)
        if committed is not None:  # an aborted batch: the next poll reads it again
            self._done(len(records), *committed)

    # lesson: kafka-eos
    def transact(self, batch: int, records) -> tuple[dict[int, int], dict[str, int], Sends] | None:
        """Batch ``batch`` in one transaction with its offsets: ``(offsets, key counts, sends)`` once committed.

        Delivery guarantee: the output records, the changelog writes and the offsets become
        visible together, or none of them. A failed send, or a Kafka error the producer
        recovers from, aborts the transaction (``batch-error``) and rewinds the consumer to
        the last committed offsets: None, and the next poll reads the batch again.

        Raises
        ------
        CallTimedOut
            A transactional call past :data:`TXN_CALL_S` (``batch-error``, action ``exit``).
        KafkaError, SendFailed
            This producer fenced by a newer one with its id (``producer-fenced``), or the abort failed.
        """
        from kafka import OffsetAndMetadata
        from kafka.errors import KafkaError

        ctx, producer, names = self.ctx, self.producer, self.names
        ctx.batch_start(batch, _ranges(records), len(records), transactional_id=names.txn_id)
        sends = Sends()  # this transaction's futures: it commits only if every one succeeded
        try:
            producer.begin_transaction()
            counts = ({} if self.store is None else
                      _send_changes(producer, sends, names.changelog, self.store, records, batch, ctx.attempt))
            self._send_output(sends, records, batch)
            # commit_transaction() would flush too; flushing here makes the named point below mean
            # what it says. Measured without it: a kill there found 50 of 100 records in the log.
            producer.flush(timeout=self.flush_s)
            if not self.cfg.kafka.trust_commit:
                # Every send acknowledged, or no commit: kafka-python commits a transaction one of
                # whose sends ran out of its delivery timeout (lab.kafka.transactions).
                sends.check()
            done = self.positions()
            offsets = {tp: OffsetAndMetadata(done[tp.partition], batch_metadata(batch), -1) for tp in self.tps}
            bounded(lambda: producer.send_offsets_to_transaction(offsets, names.group), TXN_CALL_S,
                    "send_offsets_to_transaction()")
            ctx.point("after-output-before-commit", batch)
            bounded(producer.commit_transaction, TXN_CALL_S, "commit_transaction()")
        except CallTimedOut as e:
            # The transaction's state is unknown (the call may still complete): this driver ends, and
            # its restart's init_transactions() completes or aborts the transaction.
            ctx.events.write(ev.BATCH_ERROR, batch=batch, error=str(e), attempt=ctx.attempt, action="exit")
            raise
        except (KafkaError, SendFailed) as e:
            if _fenced(e.error if isinstance(e, SendFailed) else e):
                # A newer driver owns the id (a restart, or the replacement of this one while it was paused):
                # this one must stop writing. Its open transaction was aborted when the newer one started.
                ctx.events.write(ev.PRODUCER_FENCED, batch=batch, attempt=ctx.attempt, error=repr(e)[:300])
                raise
            failed = {"failed_sends": e.failed, "sends": e.sent} if isinstance(e, SendFailed) else {}
            ctx.events.write(ev.BATCH_ERROR, batch=batch, error=str(e)[:300] if failed else repr(e)[:300],
                             attempt=ctx.attempt, action="abort-and-rewind", **failed)
            _abort(producer)
            for tp in self.tps:
                self.consumer.seek(tp, self.committed[tp.partition])
            return None
        return done, counts, sends

    def _send_output(self, sends: Sends, records, batch: int) -> None:
        """Send each record's transformed copy (:func:`transform`) to its partition of the output topic.

        ``mid-output`` comes once half of them are sent and flushed (and, unless
        ``--trust-commit``, acknowledged): in the log, inside the open transaction.
        """
        half = (len(records) + 1) // 2  # at least one record in the log at mid-output
        for i, r in enumerate(records):
            value = transform(r.value, r.partition, r.offset, batch, self.ctx.attempt)
            sends.add(self.producer.send(self.names.out, value=value, key=r.key, partition=r.partition))
            if i + 1 == half:
                self.producer.flush(timeout=self.flush_s)  # KafkaTimeoutError past it
                if not self.cfg.kafka.trust_commit:
                    sends.check()  # acknowledged: in the log, inside the open transaction
                self.ctx.point("mid-output", batch)
    # end lesson: kafka-eos

    def _done(self, rows: int, done: dict[int, int], counts: dict[str, int], sends: Sends) -> None:
        """After the commit of the batch: its key counts into the store, ``batch-done`` and progress; the next
        number."""
        if self.cfg.kafka.trust_commit:
            _committed_unchecked(self.ctx, sends, self.batch)
        if self.store is not None:
            self.store.put(counts, self.batch)  # only now: an aborted batch must never reach the store
        self.committed = done
        self.ctx.batch_done(self.batch, rows)
        self.ctx.progress(done, self.batch)
        self.batch += 1


def _ranges(records) -> dict[int, tuple[int, int]]:
    """Each partition's offsets in a poll's records, as ``(first, last + 1)``."""
    ranges = {}
    for r in records:
        start, _ = ranges.get(r.partition, (r.offset, r.offset))
        ranges[r.partition] = (start, r.offset + 1)
    return ranges


def _positions(consumer, tps) -> dict[int, int]:
    """The consumer's position on each partition, each look-up bounded by :data:`MAX_BLOCK_MS`.

    kafka-python's ``position()`` waits without a bound by default; one that finds no
    offset in time returns ``None``, and the driver ends rather than guess.
    """
    from kafka.errors import KafkaTimeoutError

    got = {tp.partition: consumer.position(tp, timeout_ms=MAX_BLOCK_MS) for tp in tps}
    missing = sorted(p for p, offset in got.items() if offset is None)
    if missing:
        raise KafkaTimeoutError(f"no position for partitions {missing} within {MAX_BLOCK_MS} ms")
    return got


def _committed_unchecked(ctx: DriverContext, sends: Sends, batch: int) -> None:
    """With ``--trust-commit``: after a commit, the ``committed-with-failed-sends`` event if any send had failed.

    Looked at only after the commit, so it changes nothing the client decided: it is
    the evidence of what the client's commit let through.
    """
    try:
        sends.check()
    except SendFailed as e:
        ctx.events.write(ev.COMMITTED_WITH_FAILED_SENDS, batch=batch, attempt=ctx.attempt, failed_sends=e.failed,
                         sends=e.sent, error=repr(e.error)[:300] if e.error is not None else "not completed")


def _send_changes(producer, sends: Sends, changelog: str, store, records, batch: int, attempt: int) -> dict[str, int]:
    """Send each key's new count to the changelog in the open transaction; return them for the store.

    Sent before the batch's output, so a kill at ``mid-output`` too finds the
    batch's changelog writes in the log, to be aborted with the transaction.
    Each key goes to the partition of the input record that carried it.
    """
    keys = [event_fields(r.value, r.partition, r.offset)[2] for r in records]
    partition_of = dict(zip(keys, (r.partition for r in records)))
    counts = changelog_state.batch_changes(keys, store.counts(keys))
    for key, count in counts.items():
        sends.add(producer.send(changelog, key=key.encode(), value=changelog_state.change_value(count, batch, attempt),
                                partition=partition_of[key]))
    return counts


def _abort(producer) -> None:
    """Abort the open transaction, retried while the broker is away; raise when it cannot be done.

    Each attempt is bounded by :data:`TXN_CALL_S` (:class:`lab.kafka.transactions.CallTimedOut` ends the driver).
    """
    deadline = time.monotonic() + ABORT_RETRY_S
    while True:
        try:
            bounded(producer.abort_transaction, TXN_CALL_S, "abort_transaction()")
            return
        except Exception as e:  # kafka-python raises several types for a broker that is away
            if not getattr(e, "retriable", False) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
