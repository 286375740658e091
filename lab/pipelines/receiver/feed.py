"""The receiver's Kafka consumer: feeds Spark's socket receiver and acknowledges to Kafka.

Spark's own receiver for the ``receiver`` pipeline is ``socketTextStream``:
it connects to a TCP port, stores every line it reads into blocks and reports
the blocks to the driver. Spark has no Kafka receiver any more, so the Kafka
side of the receiver lives here: a :class:`Feeder` thread inside the driver
process listens on ``127.0.0.1:<port>`` (every address of its host when
executors are elsewhere: :func:`lab.spark.session.driver_addresses`), reads the topic with a kafka-python
consumer (assigned partitions; offsets committed to the run's group id
without joining it, see :mod:`lab.kafka.tools`) and writes one line per
record to whichever receiver is connected::

    <event id> <seq> <partition> <offset>\\n

The lines and the accounting of what each connection handed over are in
:mod:`lab.pipelines.receiver.epoch`; the group's committed offsets in
:mod:`lab.pipelines.receiver.commits`.

Together, Spark's receiver and this feeder behave like the Kafka receivers of
Spark 1.x: the feeder is the receiver's consumer. It is a thread of the
driver, in the driver's process group, so a driver kill takes it, and it
forgets its uncommitted position whenever the receiver's connection drops.

Connections ("epochs")
----------------------
Each accepted connection is an *epoch*. An epoch starts from the offsets the
group has committed (read fresh from the broker each time), so whatever the
previous epoch handed over but had not committed is sent again: a receiver
that dies with its executor, a dropped connection and a restarted driver all
resume from the committed offsets. An epoch ends when the receiver closes
the connection (executor death, Spark stopping the receiver) or when the
feeder closes it (``receiver-restart``). The feeder's own close is graceful:
it finishes the line in progress, then sends FIN, so the receiver reads
every line it was handed before it sees the end of the stream.

Acknowledging (``--ack``)
-------------------------
``auto``    *unreliable receiver*, one that acknowledges on receipt: at each
            turn of its loop that handed records over the feeder commits, per
            partition, the offset after the last record it has handed over
            (written to the socket), stored by Spark or not. Records in the
            receiver's buffers when it dies are lost. (A 0.2 s timer, one
            block interval, made that loss a matter of its phase against the
            receiver's 200 ms blocks: 3 of 8 driver crashes at batch 3 with the
            WAL on lost nothing, the others 14-101 events; committed at once,
            8 of 8 lost 133-202, the block still filling and what sat in the socket.)
            New connections are not held; stored counts are kept only so a
            clean stop can wait for them (:meth:`Feeder.finish`).
``stored``  *reliable receiver*: the feeder commits a record only once Spark
            has reported it stored. The driver's ``StreamingListener`` passes
            every ``onBatchSubmitted`` to :meth:`Feeder.batch_allocated` as
            ``(batch time, numRecords)``. A batch allocates blocks the receiver
            has already stored (block manager with its replication, plus the
            write-ahead log when it is on) and reported to the driver, so
            ``numRecords`` says "this many more records of the stream are
            stored". The receiver stores lines in the order it reads them,
            which is the order the feeder wrote them, so within an epoch the
            stored records are exactly the first ``sum(numRecords)`` lines
            handed over; the feeder commits, per partition, the offset after
            the last of them.

Attributing counts to the right epoch
-------------------------------------
Counts carry no connection id, so the feeder makes the attribution exact by
holding a new connection (``stored`` only): it sends nothing on it until a
batch with a batch time *after* the connection was accepted has been
allocated. Spark allocates batch ``T`` at wall-clock time ``T`` or later, so
that batch and the ones before it hold every block the previous epochs
stored (a dead receiver reports nothing more; after a graceful close the
feeder also waits until the previous epoch's handed-over lines are all
counted, or :data:`HOLD_TIMEOUT_S`), and none of the new epoch's. Counts of
batches up to and including that batch belong to earlier epochs, or to a
previous driver's blocks recovered from the write-ahead log; counts of later
batches belong to the new epoch. The hold costs at most about one batch
interval per connection. Counts that would exceed what an epoch handed over
are capped and reported as a ``receiver-count-mismatch`` event (never seen
in the lab's runs; it would mean the ordering argument above failed).

Pacing
------
In Spark 1.x the Kafka consumer ran inside the receiver and handed a record
over only when ``store()`` accepted it. Here a TCP connection sits between
the two, and its kernel buffers would hold thousands of lines that count as
handed over while the receiver has not read them. So the feeder writes no
faster than the receiver's ``spark.streaming.receiver.maxRate`` (``rate``,
with :data:`PACE_BURST_S` of slack) and keeps a small send buffer
(:data:`SEND_BUFFER_BYTES`): what an unreliable receiver loses is then what
the receiver itself buffers, as in the Spark guide.

On failure
----------
Broker errors (an outage) never end the feeder: a failed commit is kept
and retried on every loop (nothing is committed out of order), fetches and
offset reads are retried, and each kind of error is written to the
timeline once per outage (:class:`lab.pipelines.receiver.commits.GroupOffsets`).
Socket errors end the epoch (the receiver reconnects on its own). A record
that is not a lab event ends the feeder with
:class:`lab.kafka.read.NotALabEvent` (the driver then fails). A feeder that
cannot bind its port raises :class:`lab.errors.LabError` from
:meth:`Feeder.start_listening`.
"""

from __future__ import annotations

import errno
import queue
import select
import socket
import threading
import time

from lab import events as ev
from lab.errors import LabError
from lab.pipelines.receiver.commits import GroupOffsets
from lab.pipelines.receiver.epoch import Epoch, close_quietly

#: Seconds a new connection is held waiting for the previous epoch's last counts.
HOLD_TIMEOUT_S = 10.0
#: Records polled from Kafka per refill of the send buffer.
POLL_RECORDS = 2000
#: The feeder's kernel send buffer: small, so "handed over" means "in the receiver's socket".
SEND_BUFFER_BYTES = 16 * 1024
#: Seconds of records the pacing lets the feeder run ahead of the receiver's rate.
PACE_BURST_S = 0.1
#: Seconds the loop waits in ``select`` when there is nothing to do.
TICK_S = 0.02
#: Unsent bytes below which the feeder polls Kafka again, so the socket never runs dry.
REFILL_BELOW_BYTES = 64 * 1024
#: Sent bytes after which the send buffer drops its sent prefix.
COMPACT_ABOVE_BYTES = 1 << 20


class Feeder(threading.Thread):
    """Serves the topic to Spark's socket receiver and commits offsets by ``ack``.

    Parameters
    ----------
    bootstrap : str
    topic : str
    partitions : int
    group_id : str
        The group the offsets are committed to (never joined).
    port : int
        Port on ``host`` (0: any free one; see :attr:`port` after
        :meth:`start_listening`). A recovered StreamingContext connects to
        the port its checkpoint names, so a restarted driver reuses it.
    ack : {"auto", "stored"}
    events : lab.events.EventLog
        Where connection events go (the run's timeline).
    on_commit : callable
        Called with the group's committed offsets ``{partition: next offset}`` after each
        successful commit: where a restarted receiver would read from (the pipeline's progress).
    rate : float, optional
        Records/s the receiver stores at most (``spark.streaming.receiver.maxRate``);
        the feeder hands over no faster (see the module docstring, "Pacing").
    isolation_level : {"read_uncommitted", "read_committed"}
        ``read_committed`` for a transactional producer: only committed events are handed over.
    host : str
        The address to listen on: ``127.0.0.1``, or ``0.0.0.0`` when the receiver runs in another
        container (:func:`lab.spark.session.driver_addresses`).

    Notes
    -----
    Delivery guarantee of the hand-over: per epoch, every record from the
    committed offsets on is written once, in offset order per partition;
    ``stored`` commits only stored records (at-least-once into Spark),
    ``auto`` commits what was written (at-most-once for records still in
    the receiver's buffers when it dies).
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, group_id: str, port: int, ack: str,
                 events, on_commit, rate: float | None = None, isolation_level: str = "read_uncommitted",
                 host: str = "127.0.0.1") -> None:
        super().__init__(name="lab-receiver-feeder", daemon=True)
        if ack not in ("auto", "stored"):
            raise LabError(f"unknown receiver ack mode {ack!r}; valid: auto, stored")
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.group_id = group_id
        self.host = host
        self.port = port
        self.ack = ack
        self.events = events
        self.on_commit = on_commit
        self.rate = rate
        self.isolation_level = isolation_level
        self._tokens = 0.0
        self._tokens_at = time.monotonic()
        self.error: BaseException | None = None
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._halt = threading.Event()
        self._server: socket.socket | None = None
        self._epoch: Epoch | None = None
        self._closed: Epoch | None = None
        self._epochs = 0
        self._last_batch_ms = -1
        self._drop_reason: str | None = None
        self._finishing = False
        self._finished = threading.Event()
        #: Once :meth:`finish` returned True: whether every line handed over was counted as allocated, exactly.
        self.finished_exact = False
        self._consumer = None
        self.group: GroupOffsets | None = None

    # -- called from other threads ---------------------------------------------
    def start_listening(self, attempts: int = 50) -> int:
        """Bind the port (retrying briefly: a killed driver's socket may linger) and return it.

        Raises
        ------
        LabError
            When the port stays taken.
        """
        last = None
        for _ in range(attempts):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((self.host, self.port))
            except OSError as e:
                s.close()
                last = e
                time.sleep(0.2)
                continue
            s.listen(4)
            s.setblocking(False)
            self._server = s
            self.port = s.getsockname()[1]
            return self.port
        raise LabError(f"the receiver feeder cannot listen on {self.host}:{self.port}: {last}")

    def batch_allocated(self, batch_time_ms: int, records: int) -> None:
        """Spark allocated batch ``batch_time_ms`` with ``records`` records of the stream (thread-safe)."""
        self._requests.put(("batch", int(batch_time_ms), int(records)))

    def drop_connection(self, reason: str) -> None:
        """Close the receiver's connection gracefully as soon as it has data in flight (thread-safe)."""
        self._requests.put(("drop", reason))

    def finish(self, timeout_s: float) -> bool:
        """Stop feeding: close the connection gracefully and wait until Spark has stored what it was handed.

        Used before a clean stop so that stopping the lab never drops lines
        sitting in the receiver's socket. Returns whether everything handed
        over was counted as stored within ``timeout_s``.
        """
        self._requests.put(("finish",))
        return self._finished.wait(timeout_s)

    def stop(self) -> None:
        """End the thread and close the sockets and the consumer; commits nothing more."""
        self._halt.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(10)

    # -- the thread ---------------------------------------------------------------
    def run(self) -> None:
        try:
            self._setup()
            while not self._halt.is_set():
                self._step()
        except BaseException as e:  # the driver checks .error and fails the attempt
            self.error = e
            self.events.write(ev.RECEIVER_FEEDER_ERROR, error=repr(e)[:300])
        finally:
            self._teardown()

    def _setup(self) -> None:
        from lab.kafka import tools as kafka_tools

        if self._server is None:
            self.start_listening()
        self._consumer = kafka_tools.consumer(self.bootstrap, **kafka_tools.READ_SETTINGS, group_id=self.group_id,
                                              max_poll_records=POLL_RECORDS, isolation_level=self.isolation_level)
        self.group = GroupOffsets(self._consumer, self.topic, self.partitions, self.events, self.on_commit)
        self._consumer.assign(self.group.tps)
        while not self._halt.is_set():
            if self.group.refresh():
                self.on_commit(dict(self.group.committed))
                return

    def _teardown(self) -> None:
        for e in (self._epoch, self._closed):
            if e is not None and e.conn is not None:
                e.close(graceful=False)
        if self._server is not None:
            close_quietly(self._server)
        if self._consumer is not None:
            try:
                self._consumer.close(autocommit=False)
            except Exception:
                pass

    def _step(self) -> None:
        self._handle_requests()
        self._maybe_release()
        self._maybe_drop()
        self._maybe_auto_commit()
        if self.group.pending:
            self.group.commit({})
        self._check_finished()
        e = self._epoch
        feeding = e is not None and e.conn is not None and e.released and not self._finishing
        if feeding and e.unsent_bytes() < REFILL_BELOW_BYTES:
            self._refill(e)
        reads = [self._server] + ([e.conn] if e is not None and e.conn is not None else [])
        writes = [e.conn] if feeding and e.has_unsent() else []
        try:
            readable, writable, _ = select.select(reads, writes, [], TICK_S)
        except (OSError, ValueError):
            readable, writable = [], []
        if self._server in readable:
            self._accept()
        e = self._epoch
        if e is not None and e.conn is not None:
            if e.conn in readable:
                self._check_peer(e)
            if e.conn is not None and e.conn in writable:
                self._send(e)

    # -- connections -------------------------------------------------------------
    @property
    def accepted(self) -> int:
        """Connections accepted so far (each an epoch)."""
        return self._epochs

    def _accept(self) -> None:
        try:
            conn, _ = self._server.accept()
        except (BlockingIOError, InterruptedError):
            return
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        conn.setblocking(False)
        if self._epoch is not None and self._epoch.conn is not None:
            # The receiver came back before its old connection was seen to drop.
            self._end_epoch(self._epoch, graceful=False, why="superseded by a new connection")
        self._epochs += 1
        held = self.ack == "stored" or self._finishing
        epoch = Epoch(self._epochs, conn, int(time.time() * 1000), released=False)
        self._epoch = epoch
        self.events.write(ev.RECEIVER_CONNECT, epoch=epoch.number, held=held)

    def _release(self, e: Epoch, batch_ms: int | None) -> None:
        """Start feeding epoch ``e`` from the committed offsets: uncommitted progress is forgotten.

        Stays held when the committed offsets cannot be read (broker outage);
        the next loop tries again.
        """
        self.group.commit({})
        if self.group.pending:
            return
        if not self.group.refresh():
            return
        for tp in self.group.tps:
            self._consumer.seek(tp, self.group.committed[tp.partition])
        e.start = dict(self.group.committed)
        e.released = True
        e.release_ms = batch_ms if batch_ms is not None else e.accept_ms
        self.events.write(ev.RECEIVER_FEED, epoch=e.number, resume_from={str(p): o for p, o in sorted(e.start.items())},
                          after_batch_time=batch_ms)

    def _maybe_release(self) -> None:
        e = self._epoch
        if e is None or e.released or e.conn is None or self._finishing:
            return
        if self.ack == "auto":
            self._release(e, None)  # an unreliable receiver does not care what was stored
            return
        if self._last_batch_ms <= e.accept_ms:
            return
        prev = self._closed
        prev_done = prev is None or not prev.graceful or prev.stored >= prev.handed_over
        if not prev_done and time.monotonic() - e.accept_mono < HOLD_TIMEOUT_S:
            return
        if not prev_done:
            self.events.write(ev.RECEIVER_HOLD_TIMEOUT, epoch=e.number, previous_epoch=prev.number,
                              handed_over=prev.handed_over, stored=prev.stored)
        self._release(e, self._last_batch_ms)

    def _maybe_drop(self) -> None:
        e = self._epoch
        if self._drop_reason is None or e is None or e.conn is None or not e.released or e.handed_over == 0:
            return
        reason, self._drop_reason = self._drop_reason, None
        self._end_epoch(e, graceful=True, why=reason)

    def _end_epoch(self, e: Epoch, graceful: bool, why: str) -> None:
        if e.conn is None:
            return
        unsent = e.close(graceful)
        self._closed = e
        if self._epoch is e:
            self._epoch = None
        self.events.write(ev.RECEIVER_DISCONNECT, epoch=e.number, graceful=e.graceful, reason=why,
                          handed_over=e.handed_over, stored=e.stored, unsent_dropped=unsent,
                          committed={str(p): o for p, o in sorted(self.group.committed.items())})

    def _check_peer(self, e: Epoch) -> None:
        try:
            data = e.conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            self._end_epoch(e, graceful=False, why=f"connection error: {errno.errorcode.get(err.errno, err)}")
            return
        if not data:
            self._end_epoch(e, graceful=False, why="the receiver closed the connection")

    def _send(self, e: Epoch) -> None:
        try:
            n = e.conn.send(e.out[e.out_pos:e.out_pos + (1 << 18)])
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            self._end_epoch(e, graceful=False, why=f"connection error: {errno.errorcode.get(err.errno, err)}")
            return
        e.mark_sent(n)

    def _refill(self, e: Epoch) -> None:
        budget = POLL_RECORDS
        if self.rate:
            now = time.monotonic()
            self._tokens = min(self.rate * PACE_BURST_S + 1, self._tokens + (now - self._tokens_at) * self.rate)
            self._tokens_at = now
            budget = min(budget, int(self._tokens))
            if budget < 1:
                time.sleep(min(TICK_S, (1 - self._tokens) / self.rate))
                return
        try:
            polled = self._consumer.poll(timeout_ms=int(TICK_S * 1000), max_records=budget)
        except Exception as err:  # kafka-python raises connection errors from poll during an outage
            self.group.trouble("fetching", err)
            return
        self.group.ok("fetching")
        if not polled:
            return
        if e.out_pos > COMPACT_ABOVE_BYTES:
            e.compact()
        if self.rate:
            self._tokens -= sum(len(r) for r in polled.values())
        for tp, records in polled.items():
            e.add_records(tp.partition, records)

    # -- acknowledgements ------------------------------------------------------------
    def _handle_requests(self) -> None:
        while True:
            try:
                req = self._requests.get_nowait()
            except queue.Empty:
                return
            if req[0] == "batch":
                self._on_batch(req[1], req[2])
            elif req[0] == "drop":
                self._drop_reason = req[1]
            elif req[0] == "finish":
                self._finishing = True
                if self._epoch is not None and self._epoch.conn is not None:
                    if self._epoch.released:
                        self._end_epoch(self._epoch, graceful=True, why="the driver is stopping")

    def _on_batch(self, batch_ms: int, records: int) -> None:
        self._last_batch_ms = max(self._last_batch_ms, batch_ms)
        e, prev = self._epoch, self._closed
        if e is not None and e.released and e.release_ms is not None and batch_ms > e.release_ms:
            target = e
        elif prev is not None and prev.release_ms is not None and batch_ms > prev.release_ms:
            target = prev
        else:
            return  # blocks of earlier epochs or of a previous driver (write-ahead log recovery)
        if records <= 0:
            return
        stored = target.stored + records
        if stored > target.handed_over:
            if self.ack == "stored":  # auto mode does not hold connections, so its counts are approximate
                self.events.write(ev.RECEIVER_COUNT_MISMATCH, epoch=target.number, batch_time=batch_ms,
                                  counted=stored, handed_over=target.handed_over)
            stored = target.handed_over
        target.stored = stored
        if self.ack == "stored":
            self.group.commit(target.offsets_through(target.stored))

    def _check_finished(self) -> None:
        if not self._finishing or self._finished.is_set():
            return
        prev = self._closed
        if (self._epoch is None or not self._epoch.released) and (prev is None or prev.stored >= prev.handed_over
                                                                  or not prev.graceful):
            # Exact: a reliable receiver's counts, its connection closed gracefully and every line counted.
            self.finished_exact = self.ack == "stored" and (prev is None or (prev.graceful
                                                                             and prev.stored >= prev.handed_over))
            self._finished.set()

    def _maybe_auto_commit(self) -> None:
        e = self._epoch
        if self.ack != "auto" or e is None or not e.released:
            return
        self.group.commit(e.offsets_through(e.handed_over))
