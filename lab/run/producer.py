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
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from dataclasses import dataclass, replace

from lab import events as ev
from lab.config import RunConfig
from lab.events import EventLog
from lab.audit.ledger import Ledger, LedgerEntry
from lab.faults.catalogue import event_keys
from lab.kafka.transactions import CallTimedOut, bounded

#: The bound on the transactional producer's commit and abort, which kafka-python leaves unbounded: a commit
#: held by a broker that is away for a while (broker-crash for=3s: about 9 s, measured on kafka-eos) still ends
#: within it; past it the producer thread ends, its open transaction's sends ``unknown``.
TXN_CALL_S = 30.0


def event_ids(seed: int, count: int) -> list[str]:
    """The ids of a run's events, in sequence order (same seed, same ids)."""
    rng = random.Random(seed)
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(count)]


class LateEvents:
    """Which events the producer stamps with an old event time (``--late-fraction``, ``--late-by``).

    Drawn from their own random stream of the run's seed, so keys and ids are
    the same with and without late events.
    """

    def __init__(self, seed: int, fraction: float, late_by_s: float) -> None:
        self.rng = random.Random(seed + 2)
        self.fraction = fraction
        self.late_by_ms = int(round(late_by_s * 1000))

    def event_time_ms(self, now: float) -> int:
        """The event time of the next event (ms since the epoch): ``now``, or ``late_by`` before it."""
        stamp = int(now * 1000)
        if self.fraction and self.rng.random() < self.fraction:
            return stamp - self.late_by_ms
        return stamp


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
    bootstrap : str
        Broker address (the lab's proxy for the embedded broker).
    ledger_path : path
    events : EventLog

    Notes
    -----
    On failure of a send the event is recorded as ``failed`` or ``unknown``
    (see :mod:`lab.audit.ledger`) and the producer goes on. :meth:`stop` flushes
    what can be flushed within its timeout; sends still in flight then are
    recorded as ``unknown``.
    """

    def __init__(self, config: RunConfig, bootstrap: str, ledger_path, events: EventLog) -> None:
        self.config = config
        self.bootstrap = bootstrap
        self.ledger_path = ledger_path
        self.events = events
        self.stats = ProducerStats(planned=config.events)
        self._lock = threading.Lock()
        self._done_entries: list[LedgerEntry] = []
        self._in_flight: dict[int, LedgerEntry] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Transactional mode: every send's outcome stays here until its transaction ends (committed only if
        # none failed).
        self._held: list[LedgerEntry] | None = [] if config.producer.transactional else None
        self._abort_left = 0  # transactions still to abort (the txn-abort fault)

    # -- lifecycle -------------------------------------------------------
    def start(self) -> "LedgeredProducer":
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

    @property
    def running(self) -> bool:
        return bool(self._thread and self._thread.is_alive())

    # -- the thread --------------------------------------------------------
    def _make_producer(self):
        from kafka import KafkaProducer
        from kafka.serializer import Serializer

        class _Json(Serializer):
            def serialize(self, topic, headers, data):
                return json.dumps(data, separators=(",", ":")).encode()

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

    def _on_ack(self, seq: int, md) -> None:
        with self._lock:
            entry = self._in_flight.pop(seq, None)
            if entry is None:
                return
            offset = md.offset if md.offset is not None and md.offset >= 0 else None
            # acks=0 gives no proof of storage. With acks >= 1 an acknowledgement without an offset
            # is still a "stored" (Tansu answers a deduplicated idempotent retry with offset -1);
            # the supervisor places it from the topic before the audit.
            status = "acked" if (offset is not None or self.config.producer.acks != "0") else "unknown"
            note = "acknowledged without an offset" if status == "acked" and offset is None else None
            done = replace(entry, status=status, partition=md.partition, kafka_offset=offset, error=note, done_at=time.time())
            if self._held is not None:
                self._held.append(done)
                return
            self._done_entries.append(done)
            if status == "acked":
                self.stats.acked += 1
            else:
                self.stats.unknown += 1

    def _on_error(self, seq: int, exc: BaseException) -> None:
        with self._lock:
            entry = self._in_flight.pop(seq, None)
            if entry is None:
                return
            status = "failed" if _is_definite_rejection(exc) else "unknown"
            done = replace(entry, status=status, error=repr(exc)[:300], done_at=time.time())
            if self._held is not None:
                self._held.append(done)  # its transaction is aborted, not committed (_end_transaction)
                return
            self._done_entries.append(done)
            if status == "failed":
                self.stats.failed += 1
            else:
                self.stats.unknown += 1

    def _end_transaction(self, producer) -> None:
        """Commit the open transaction only if every send in it was acknowledged, else abort it (or when asked).

        Its records count as acknowledged only if it commits. Aborted (``txn-abort``, or a send of it
        failed), its acknowledged sends are ``aborted``: in the log, never returned to ``read_committed``
        readers; a send that failed keeps its own status. When the commit fails and the abort after it
        succeeds, ``failed``; when the outcome cannot be known (an abort that failed too, or a call that did
        not return in :data:`TXN_CALL_S`), ``unknown``.
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
            with self._lock:
                failed = [e for e in self._held if e.status != "acked"]
            if abort or failed:
                step = "abort_transaction()"
                bounded(producer.abort_transaction, TXN_CALL_S, step)
                outcome, error = "aborted", ("transaction aborted (txn-abort)" if abort else
                                             f"transaction aborted: {len(failed)} of its sends failed, the first "
                                             f"{failed[0].error}"[:300])
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
        """Give the ended transaction's held sends their outcome and count them (a failed send keeps its own)."""
        with self._lock:
            held, self._held = self._held, []
            for e in held:
                status = outcome if e.status == "acked" else e.status
                self._done_entries.append(replace(e, status=status, error=error or e.error, done_at=time.time()))
                if status == "acked":
                    self.stats.acked += 1
                elif status == "failed":
                    self.stats.failed += 1
                elif status == "aborted":
                    self.stats.aborted += 1
                else:
                    self.stats.unknown += 1
        if abort and outcome == "aborted":
            self.events.write(ev.TXN_ABORTED, sends=len(held), first_seq=min((e.seq for e in held), default=None),
                              last_seq=max((e.seq for e in held), default=None))

    def _drain_to(self, ledger: Ledger) -> None:
        with self._lock:
            batch, self._done_entries = self._done_entries, []
        ledger.record(batch)

    def _run(self) -> None:
        cfg = self.config
        ledger = Ledger(self.ledger_path)
        producer = None
        ids = event_ids(cfg.seed, cfg.events)
        keys = event_keys(cfg.seed, cfg.events)
        late = LateEvents(cfg.seed, cfg.event_time.late_fraction, cfg.event_time.late_by_s)
        self.events.write(ev.PRODUCER_START, planned=cfg.events, rate=cfg.rate, **cfg.producer.__dict__)
        try:
            producer = self._make_producer()
            txn = cfg.producer.transaction_size if cfg.producer.transactional else 0
            if txn:
                producer.init_transactions()
            t0 = time.monotonic()
            last_flush = t0
            for seq in range(cfg.events):
                if self._stop.is_set():
                    break
                if txn and seq % txn == 0:
                    if seq:
                        self._end_transaction(producer)
                    producer.begin_transaction()
                if cfg.rate > 0:
                    delay = t0 + seq / cfg.rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                key = keys[seq]
                now = time.time()
                event_time_ms = late.event_time_ms(now)
                value = {"id": ids[seq], "seq": seq, "key": key, "event_time_ms": event_time_ms, "produced_at": now}
                entry = LedgerEntry(seq, ids[seq], key, "unknown", None, None, None, now, None, event_time_ms)
                with self._lock:
                    self._in_flight[seq] = entry
                try:
                    fut = producer.send(cfg.topic, key=key, value=value)
                except Exception as exc:  # nothing left the client: a definite failure
                    with self._lock:
                        self._in_flight.pop(seq, None)
                        self._done_entries.append(replace(entry, status="failed", error=repr(exc)[:300], done_at=time.time()))
                        self.stats.failed += 1
                    continue
                self.stats.sent += 1
                fut.add_callback(lambda md, s=seq: self._on_ack(s, md))
                fut.add_errback(lambda e, s=seq: self._on_error(s, e))
                if time.monotonic() - last_flush > 0.2:
                    self._drain_to(ledger)
                    last_flush = time.monotonic()
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
            with self._lock:
                # Still in flight after flush and close, or acknowledged inside a transaction that
                # never committed: the outcome is unknowable.
                for entry in self._held or []:
                    self._done_entries.append(replace(entry, status="unknown", error="transaction not committed"))
                    self.stats.unknown += 1
                if self._held:
                    self._held.clear()
                for seq, entry in self._in_flight.items():
                    self._done_entries.append(entry)
                    self.stats.unknown += 1
                self._in_flight.clear()
            self._drain_to(ledger)
            ledger.close()
            self.stats.done = True
            self.events.write(
                ev.PRODUCER_DONE, sent=self.stats.sent, acked=self.stats.acked,
                failed=self.stats.failed, unknown=self.stats.unknown, aborted=self.stats.aborted,
            )
