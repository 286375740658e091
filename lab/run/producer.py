"""The ledgered producer: events with unique ids, every outcome written down.

Runs in a background thread of the control process (the notebook kernel or
the ``lab`` CLI) so a pipeline consumes while it produces. Each event has a
unique id (a UUID drawn from the run's seed, so the same seed gives the same
ids), a per-run sequence number, a key drawn from 64 keys so records
spread over the partitions, and an event time in milliseconds
(``event_time_ms``, kept in the ledger): the send's wall-clock time, or,
for the ``--late-fraction`` of late events, ``--late-by`` seconds before it.

Delivery guarantee
------------------
Whatever the producer settings say: with ``acks=all`` and idempotence on,
each acknowledged event is in the topic once; with idempotence off, a retry
after a lost acknowledgement writes it twice (the ledger still records one
acknowledged send, at the offset of the copy that was acknowledged).

Transactional (``--transactional on``): a transaction is committed only after
every send in it was acknowledged; if one failed, it is aborted and its
acknowledged events are ``aborted`` (a ``read_committed`` reader never returns them).
kafka-python 3.0.12 would commit it without the failed send
(:mod:`lab.kafka.transactions`). The flush and the commit are bounded.

The client (``--producer-client``): kafka-python, the lessons' client, by default; ``confluent``
(:mod:`lab.kafka.confluent_producer`) sends the same events with the same settings, several times as fast, its
outcomes ledgered by the same rules; the guarantees above hold for both. Per event the loop does what the send
needs and no more: one formatted value, one tuple per outcome, the ledger written by a thread of its own
(``bench/producers.py``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from functools import partial
from operator import itemgetter

from lab import events as ev
from lab.audit.ledger import Ledger, LedgerEntry, LedgerWriter
from lab.config import RunConfig
from lab.events import EventLog
from lab.faults.catalogue import event_keys
from lab.kafka.transactions import CallTimedOut, bounded
from lab.run.produced_events import EVENT_JSON, LateEvents, event_ids, seq_of

#: The bound on the transactional producer's commit and abort, which kafka-python leaves unbounded: a commit
#: held by a broker that is away for a while (broker-crash for=3s: about 9 s, measured on kafka-eos) still ends
#: within it; past it the producer thread ends, its open transaction's sends ``unknown``.
TXN_CALL_S = 30.0
#: How often the producer thread writes what completed to the ledger (seconds).
DRAIN_S = 0.2
#: The longest a poison press holds the send loop (seconds): the press writes one event meanwhile.
HOLD_S = 5.0

#: A JSON encoder made once (``json.dumps`` with separators makes a new one per call): for dict values.
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode
#: A batch of rows is written in sequence order (a stable sort: a send's rows keep their order): SQLite appends
#: to the table's B-tree instead of inserting between rows, as delivery reports come in per partition (2.4
#: against 2.0 us a row; the sort 0.08).
_BY_SEQ = itemgetter(0)
#: Where a ledger row (a plain tuple in :class:`lab.audit.ledger.LedgerEntry`'s order) holds its status.
_STATUS = LedgerEntry._fields.index("status")


@dataclass
class ProducerStats:
    """Live counters, safe to read from any thread."""

    planned: int = 0
    sent: int = 0
    acked: int = 0
    failed: int = 0
    unknown: int = 0
    aborted: int = 0
    done: bool = False
    error: str | None = None


def _is_definite_rejection(exc: BaseException) -> bool:
    """True when the broker certainly did not store the record.

    A broker error response that is not retriable is a definite "no". Any
    other failure (timeouts, dropped connections, retries exhausted) may
    hide a write that happened, so it is recorded as unknown.
    """
    from kafka.errors import BrokerResponseError

    return isinstance(exc, BrokerResponseError) and not getattr(exc, "retriable", False)


class LedgeredProducer:
    """Produce ``config.events`` events at ``config.rate`` and ledger every outcome.

    Parameters
    ----------
    config : RunConfig
        ``config.producer.producer_client`` chooses the client: ``kafka-python`` (:meth:`_make_producer`)
        or ``confluent`` (:meth:`_make_confluent`).
    bootstrap : str
        Broker address (the lab's proxy for the embedded broker).
    ledger_path : path
    events : EventLog

    Notes
    -----
    On failure of a send the event is recorded as ``failed`` or ``unknown``
    (see :mod:`lab.audit.ledger`) and the producer goes on. :meth:`stop` flushes
    what can be flushed within its timeout; sends still in flight then are
    recorded as ``unknown``. Delivery guarantee: the producer settings' (module docstring), whichever client.
    """

    def __init__(self, config: RunConfig, bootstrap: str, ledger_path, events: EventLog) -> None:
        self.config = config
        self.bootstrap = bootstrap
        self.ledger_path = ledger_path
        self.events = events
        self.stats = ProducerStats(planned=config.events)
        self._lock = threading.Lock()
        # Sends on their way: seq -> (sent_at, event_time_ms). A send's outcome pops it (dict operations are
        # atomic, so kafka-python's sender thread and this one never both finish a send); whatever is left at the
        # end is unknown.
        self._pending: dict[int, tuple[float, int]] = {}
        # Finished ledger rows (tuples in LedgerEntry's order), handed to the ledger's writer by the producer thread
        # every DRAIN_S. Appended from any thread; taken from the front, so a row appended meanwhile stays.
        self._done: list[tuple] = []
        # Outside transactions, acknowledged sends with an offset, the most common row, go here instead, without
        # their status and error (Ledger.record_acked). Each send has one row in all, in one of the two lists.
        self._acked: list[tuple] = []
        self._ids: list[str] = []
        self._keys: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Transactional mode: every send's outcome stays here until its transaction ends (committed only if
        # none failed). The same list object for the whole run: the delivery callbacks append to it.
        self._held: list[tuple] | None = [] if config.producer.transactional else None
        self._abort_left = 0  # transactions still to abort (the txn-abort fault)
        self._txn_first = 0  # the open transaction's first send
        # A poison press (hold_unsent): the send loop's next sequence number, and the one it waits at until the
        # press's fault event is written (release).
        self._next_seq = 0
        self._hold_at = self._last_held = -1
        self._released = threading.Event()

    # -- lifecycle -------------------------------------------------------
    def start(self) -> LedgeredProducer:
        """Start sending (once: a second call does nothing)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lab-producer", daemon=True)
            self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        if self._thread:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def stop(self, timeout: float = 10.0) -> None:
        """Stop sending; flush; record whatever is still in flight as unknown."""
        self._stop.set()
        self.join(timeout)

    def abort_next(self, count: int) -> dict:
        """Abort the next ``count`` transactions instead of committing them (the ``txn-abort`` fault).

        Their sends are recorded as ``aborted``: not owed to the sink, and a
        ``read_committed`` reader never returns them (where the broker honours it).
        """
        if self._held is None:
            from lab.errors import LabError

            raise LabError("txn-abort needs a transactional producer: --transactional on")
        with self._lock:
            self._abort_left += count
            return {"aborting": self._abort_left}

    def hold_unsent(self, ahead: int) -> tuple[int, str, int]:
        """Stop the send loop before sequence number ``next + ahead`` (``next``: the send it is at) until
        :meth:`release`, or :data:`HOLD_S`; return that number, its key, and its place among its key's events
        (from 1: the ``nth`` a fault plan names it by).

        For a press that poisons an event not yet sent: the event naming it is written while the loop waits, so
        the record reaches no consumer before the event does. One hold at a time (the run serializes presses).

        Raises
        ------
        LabError
            When no event is left to send past ``ahead``, or the producer has stopped.
        """
        from lab.errors import LabError

        for _ in range(3):
            # Past an earlier press's event too: a producer stalled between two presses names a new one.
            seq = max(self._next_seq + ahead, self._last_held + 1)
            if self.stats.done or not self.running or seq >= self.config.events:
                raise LabError(f"poison: the producer has sent {self.stats.sent} of {self.config.events} events, "
                               "no event is left to poison; press it earlier, or run more --events")
            self._released.clear()
            self._hold_at = seq
            if self._next_seq < seq:  # the loop sets _next_seq before it compares: it will stop at seq
                self._last_held = seq
                key = self._keys[seq]
                return seq, key, self._keys[:seq + 1].count(key)
        self.release()
        raise LabError("poison: the producer ran past every event chosen; press again")

    def release(self) -> None:
        """Let the send loop go on past a :meth:`hold_unsent` hold."""
        self._hold_at = -1
        self._released.set()

    @property
    def running(self) -> bool:
        return bool(self._thread and self._thread.is_alive())

    # -- the thread --------------------------------------------------------
    def _make_producer(self):
        from kafka import KafkaProducer
        from kafka.serializer import Serializer

        class _Json(Serializer):
            def serialize(self, topic, headers, data):
                # The send loop gives event_value()'s bytes; a dict is encoded as json.dumps would.
                return data if isinstance(data, bytes) else _ENCODE(data).encode()

        class _Utf8(Serializer):
            def serialize(self, topic, headers, data):
                return data.encode()

        # lesson: producer-settings
        p = self.config.producer
        return KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks=p.acks if p.acks == "all" else int(p.acks),
            retries=p.retries,
            enable_idempotence=p.idempotence,
            max_in_flight_requests_per_connection=p.max_in_flight,
            request_timeout_ms=p.request_timeout_ms,
            delivery_timeout_ms=self._delivery_timeout_ms(),
            linger_ms=p.linger_ms,
            max_block_ms=10000,
            retry_backoff_ms=100,
            reconnect_backoff_ms=100,
            reconnect_backoff_max_ms=1000,
            transactional_id=f"lab-{self.config.name}-{self.config.seed}" if p.transactional else None,
            key_serializer=_Utf8(),
            value_serializer=_Json(),
        )
        # end lesson: producer-settings

    def _delivery_timeout_ms(self) -> int:
        """How long a send may take, retries included: 30 s, or one request and its linger when that is longer."""
        p = self.config.producer
        return max(30000, p.request_timeout_ms + p.linger_ms + 1)

    def _make_confluent(self):
        """The confluent-kafka producer: :meth:`_make_producer`'s settings in librdkafka's names
        (:func:`lab.kafka.confluent_producer.confluent_config`), the same ``transactional.id``."""
        from lab.kafka.confluent_producer import ConfluentProducer, confluent_config

        cfg = self.config
        txn_id = f"lab-{cfg.name}-{cfg.seed}" if cfg.producer.transactional else None
        return ConfluentProducer(confluent_config(cfg.producer, self.bootstrap, txn_id, self._delivery_timeout_ms()),
                                 call_s=TXN_CALL_S)

    # -- outcomes: one ledger row each ----------------------------------------
    def _ack_row(self, seq: int, sent: tuple[float, int], partition, offset) -> tuple:
        """The ledger row of an acknowledged send (``partition``, ``offset`` as the client reported them)."""
        offset = offset if offset is not None and offset >= 0 else None
        # acks=0 gives no proof of storage. With acks >= 1 an acknowledgement without an offset
        # (offset -1) is still a "stored"; the supervisor places it from the topic before the audit.
        status = "acked" if (offset is not None or self.config.producer.acks != "0") else "unknown"
        note = "acknowledged without an offset" if status == "acked" and offset is None else None
        return (seq, self._ids[seq], self._keys[seq], status, partition, offset, note, sent[0], time.time(), sent[1])

    def _error_row(self, seq: int, sent: tuple[float, int], status: str, exc) -> tuple:
        """The ledger row of a send that failed (``status``: ``failed`` or ``unknown``)."""
        return (seq, self._ids[seq], self._keys[seq], status, None, None, repr(exc)[:300], sent[0], time.time(),
                sent[1])

    def _kafka_python_report(self):
        """kafka-python's callback for a send (``partial(report, seq)``, both as callback and errback): its row.

        Called in kafka-python's sender thread with the ``RecordMetadata`` or the exception.
        """
        pending, ack_row, error_row = self._pending, self._ack_row, self._error_row
        ids, keys, now = self._ids, self._keys, time.time
        finished, acked = (self._held, None) if self._held is not None else (self._done, self._acked.append)

        def report(seq: int, result) -> None:
            sent = pending.pop(seq, None)
            if sent is None:  # already recorded as unknown at the end
                return
            if isinstance(result, BaseException):
                finished.append(error_row(seq, sent, "failed" if _is_definite_rejection(result) else "unknown", result))
            elif acked and result.offset is not None and result.offset >= 0:  # the common case, as _ack_row has it
                acked((seq, ids[seq], keys[seq], result.partition, result.offset, sent[0], now(), sent[1]))
            else:
                finished.append(ack_row(seq, sent, result.partition, result.offset))

        return report

    def _confluent_report(self):
        """confluent-kafka's delivery callback (``on_delivery``, one function for every send): its row.

        Called in the thread that polls (this producer's). The send is found by the sequence number in
        its value (:func:`lab.run.produced_events.seq_of`): one callable for every send, no object made per send for it.
        """
        from lab.kafka.confluent_producer import is_definite_rejection

        pending, ack_row, error_row = self._pending, self._ack_row, self._error_row
        ids, keys, now = self._ids, self._keys, time.time
        finished, acked = (self._held, None) if self._held is not None else (self._done, self._acked.append)
        append = finished.append

        def report(err, msg, again: bool = True) -> None:
            seq = sent = None
            try:
                value = msg.value()
                seq = seq_of(value)
                sent = pending.pop(seq, None)
                if sent is None:
                    return
                if err is not None:
                    append(error_row(seq, sent, "failed" if is_definite_rejection(err) else "unknown", err))
                    return
                offset = msg.offset()
                if acked and offset >= 0:  # the common case, as _ack_row has it
                    acked((seq, ids[seq], keys[seq], msg.partition(), offset, sent[0], now(), sent[1]))
                else:
                    append(ack_row(seq, sent, msg.partition(), offset))
            except Exception as exc:
                # Never into confluent-kafka: it goes on serving the batch's reports with the exception still set.
                # confluent-kafka 2.16.1 calls this with one already set for the first report after a fatal error
                # (measured: transactional, ack-loss): the first call into C raises it; caught, the state is clean.
                if sent is not None:
                    pending[seq] = sent
                if again:
                    return report(err, msg, False)
                self.events.write(ev.PRODUCER_ERROR, error=f"delivery report not read: {exc!r}"[:300])  # unknown

        return report

    def _end_transaction(self, producer) -> None:
        """Commit the open transaction only if every send in it was acknowledged, else abort it (or when asked).

        Its records count as acknowledged only if it commits. Aborted (``txn-abort``, or a send of it
        failed), its acknowledged sends are ``aborted``: in the log, never returned to ``read_committed``
        readers; a send that failed keeps its own status. When the commit fails and the abort after it
        succeeds, ``failed``; when the outcome cannot be known (an abort that failed too, or a call that did
        not return in :data:`TXN_CALL_S`), ``unknown``. The same for both clients.
        """
        with self._lock:
            abort = self._abort_left > 0
            self._abort_left -= int(abort)
        step = "flush()"
        try:
            # Every send completes first (acknowledged, or failed by its delivery timeout), so the check
            # below sees them all and the aborted events are really in the topic (a read_uncommitted reader
            # returns them) before the abort marker.
            # After the delivery timeout every send has completed.
            producer.flush(timeout=self._delivery_timeout_ms() / 1000 + 5.0)
            failed = [LedgerEntry._make(row) for row in list(self._held) if row[_STATUS] != "acked"]
            # A send of this transaction that has no outcome yet is no acknowledgement either: never committed past.
            silent = sum(1 for seq in list(self._pending) if seq >= self._txn_first)
            if abort or failed or silent:
                step = "abort_transaction()"
                bounded(producer.abort_transaction, TXN_CALL_S, step)
                why = (f"{len(failed)} of its sends failed, the first {failed[0].error}" if failed else
                       f"{silent} of its sends had no outcome after the flush")
                outcome, error = "aborted", ("transaction aborted (txn-abort)" if abort else
                                             f"transaction aborted: {why}"[:300])
            else:
                step = "commit_transaction()"
                bounded(producer.commit_transaction, TXN_CALL_S, step)
                outcome, error = "acked", None
        except CallTimedOut as exc:
            # The client is mid-call: no other transactional call may follow; the producer thread ends here.
            self._finish_transaction("unknown", str(exc))
            raise
        except Exception as exc:
            outcome, error = "unknown", f"{step} failed: {exc!r}"[:300]
            try:
                bounded(producer.abort_transaction, TXN_CALL_S, "abort_transaction()")
                outcome = "failed"  # aborted: read_committed readers never see it
            except CallTimedOut as timed_out:
                self._finish_transaction("unknown", f"{error}; then {timed_out}"[:300])
                raise
            except Exception:
                pass
        self._finish_transaction(outcome, error, abort)

    def _finish_transaction(self, outcome: str, error: str | None, abort: bool = False) -> None:
        """Give the ended transaction's held sends their outcome (a failed send keeps its own); counted when written."""
        # One row per send of the transaction (a few per millisecond at most, behind a flush each): readable over fast.
        held = [LedgerEntry._make(r) for r in _take(self._held)]
        now = time.time
        self._done.extend([r._replace(status=outcome if r.status == "acked" else r.status, error=error or r.error,
                                      done_at=now()) for r in held])
        if abort and outcome == "aborted":
            self.events.write(ev.TXN_ABORTED, sends=len(held), first_seq=min((r.seq for r in held), default=None),
                              last_seq=max((r.seq for r in held), default=None))

    def _drain_to(self, ledger: Ledger | LedgerWriter) -> None:
        """Hand the finished rows to the ledger in sequence order, and count them (this thread alone counts)."""
        s = self.stats
        acked = _take(self._acked)
        if acked:
            acked.sort(key=_BY_SEQ)
            ledger.record_acked(acked)
            s.acked += len(acked)
        batch = _take(self._done)
        if not batch:
            return
        batch.sort(key=_BY_SEQ)
        ledger.record(batch)
        statuses = [r[_STATUS] for r in batch]
        s.acked += statuses.count("acked")
        s.failed += statuses.count("failed")
        s.unknown += statuses.count("unknown")
        s.aborted += statuses.count("aborted")

    def _run(self) -> None:
        cfg = self.config
        ledger = LedgerWriter(self.ledger_path)  # written by a thread of its own while this one sends
        producer = None
        self._ids = event_ids(cfg.seed, cfg.events)
        self._keys = event_keys(cfg.seed, cfg.events)
        late = LateEvents(cfg.seed, cfg.event_time.late_fraction, cfg.event_time.late_by_s)
        self.events.write(ev.PRODUCER_START, planned=cfg.events, rate=cfg.rate, **cfg.producer.__dict__)
        confluent = cfg.producer.producer_client == "confluent"
        try:
            producer = self._make_confluent() if confluent else self._make_producer()
            txn = cfg.producer.transaction_size if cfg.producer.transactional else 0
            if txn:
                producer.init_transactions()
            self._send(producer, ledger, late, txn, confluent)
            if txn:
                self._end_transaction(producer)
            else:
                producer.flush(timeout=max(5.0, cfg.producer.request_timeout_ms / 1000 * (cfg.producer.retries + 1)))
        except Exception as exc:
            self.stats.error = repr(exc)
            self.events.write(ev.PRODUCER_ERROR, error=repr(exc))
        finally:
            if producer is not None:
                try:
                    producer.close(timeout=5)
                except Exception:
                    pass
            # Still in flight after flush and close, or acknowledged inside a transaction that
            # never committed: the outcome is unknowable.
            self._done.extend([LedgerEntry._make(r)._replace(status="unknown", error="transaction not committed")
                               for r in _take(self._held or [])])
            for seq in list(self._pending):
                sent = self._pending.pop(seq, None)
                if sent is not None:
                    self._done.append((seq, self._ids[seq], self._keys[seq], "unknown", None, None, None, sent[0],
                                       None, sent[1]))
            failure = None
            for step in (partial(self._drain_to, ledger), ledger.close):  # close waits for the writer: every row
                try:                                                        # is in the file before producer-done
                    step()
                except Exception as exc:  # the ledger could not be written: said, and the run still ends
                    failure = failure or exc
            if failure is not None:
                self.stats.error = self.stats.error or repr(failure)
                self.events.write(ev.PRODUCER_ERROR, error=f"ledger: {failure!r}"[:300])
            self.stats.done = True
            self.events.write(
                ev.PRODUCER_DONE, sent=self.stats.sent, acked=self.stats.acked,
                failed=self.stats.failed, unknown=self.stats.unknown, aborted=self.stats.aborted,
            )

    # -- the send loop: the per-event work kept to what the send needs ----------------------------------
    def _paced(self, seq: int, t0: float, producer, txn: int) -> None:
        """Before send ``seq``: the transaction boundary, and the wait a ``--rate`` asks for."""
        if txn and seq % txn == 0:
            if seq:
                self._end_transaction(producer)
            producer.begin_transaction()
            self._txn_first = seq
        rate = self.config.rate
        if rate > 0:
            delay = t0 + seq / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def _send(self, producer, ledger: LedgerWriter, late: LateEvents, txn: int, confluent: bool) -> None:
        """Send every event. kafka-python: each send's future reports its outcome in the client's sender thread
        (:meth:`_kafka_python_report`); confluent-kafka: delivery reports come in this thread's ``poll`` calls
        (:meth:`_confluent_report`)."""
        from lab.kafka.confluent_producer import POLL_EVERY

        cfg, stats, stop, pending, done = self.config, self.stats, self._stop, self._pending, self._done
        topic, ids, keys, paced = cfg.topic, self._ids, self._keys, bool(txn or cfg.rate > 0)
        report = self._confluent_report() if confluent else self._kafka_python_report()
        clock, now_s, exact_time, poll_every = time.monotonic, time.time, not late.fraction, 1 if paced else POLL_EVERY
        send, value_of = producer.produce if confluent else producer.send, EVENT_JSON.__mod__  # event_value(), inlined
        t0 = clock()
        next_drain = t0 + DRAIN_S
        for seq in range(cfg.events):
            if stop.is_set():
                break
            self._next_seq = seq
            if seq == self._hold_at:  # a poison press names this event now (hold_unsent)
                self._released.wait(HOLD_S)
            if paced:
                self._paced(seq, t0, producer, txn)
            key = keys[seq]
            now = now_s()
            event_time_ms = int(now * 1000) if exact_time else late.event_time_ms(now)
            pending[seq] = (now, event_time_ms)
            value = value_of((ids[seq], seq, key, event_time_ms, now)).encode()
            try:
                if confluent:
                    try:
                        send(topic, value, key, on_delivery=report)
                    except BufferError:  # the local queue is full: backpressure, wait for room
                        producer.produce_waiting(topic, value, key, on_delivery=report)
                else:
                    fut = send(topic, key=key, value=value)
            except Exception as exc:  # refused by the client (confluent: or no room for BLOCK_S): nothing left it
                if pending.pop(seq, None) is not None:
                    done.append((seq, ids[seq], key, "failed", None, None, repr(exc)[:300], now, now_s(),
                                 event_time_ms))
                continue
            stats.sent += 1
            if not confluent:
                cb = partial(report, seq)  # one object for both outcomes
                fut.add_callback(cb)
                fut.add_errback(cb)
            elif not seq % poll_every:
                producer.poll(0)
            if clock() >= next_drain:
                self._drain_to(ledger)
                next_drain = clock() + DRAIN_S


def _take(rows: list) -> list:
    """Remove and return the rows now in ``rows``; a row another thread appends meanwhile stays in it."""
    n = len(rows)
    taken = rows[:n]
    del rows[:n]
    return taken
