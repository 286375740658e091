"""One consumer of the share pipeline's group: ``python -m lab.pipelines.share_consumer RUN_DIR INDEX``.

The share driver (:mod:`lab.pipelines.share`) starts ``--consumers`` of these, in its
process group, and starts a new one when one dies. Each is a confluent-kafka
``ShareConsumer`` in the run's share group, subscribed to the run's topic: the broker
hands each poll records of any partition, one by one, each *acquired* by this
consumer with a lock of :data:`lab.share.settings.LOCK_MS` and a delivery count
(1 for a first delivery; one more each time the broker gives the record again).

Protocol, per poll with records (one lab batch; batch numbers come from one counter
for all consumers, ``share/batch``, under a lock):

1. ``batch-start`` (``consumer``, ``replayed``: records whose delivery count is above 1),
   and one line per record in ``share/deliveries-<index>-<pid>.jsonl``:
   partition, offset, delivery count, sequence number, and its fate (``written``,
   ``held`` by a consumer that died, ``poison``).
2. A ``consumer-crash`` fault (``fault`` on the timeline, written by the supervisor)
   is claimed by the first consumer with records after it (``share/claims/<index>-<time>``,
   created exclusively): it writes ``consumer-killed`` with the records it holds and
   SIGKILLs itself, before any output. The records stay acquired until the broker
   releases them (their lock ends, or their session: measured in the report).
3. ``--commit before-output``: accept every record and ``commit_sync``; point
   ``after-commit-before-output``.
4. A poison record (:func:`lab.faults.plan.poison_seqs`: the first of key ``k<K>`` for ``poison@key=K``; or the
   ``seq`` of a pressed ``poison`` fault on the timeline, read in step 2 before the check) in the batch ends it
   before its write, as a record that cannot be read ends a consumer that reads its whole batch
   before writing it (``record_row`` above): ``poison-killed`` (with its delivery count), then a SIGKILL of this
   consumer; nothing of the batch is written, so every record of it comes again and none twice. (Measured before:
   with the rows ahead of the poison written, a busy machine's larger batches put records of other partitions ahead
   of it, and those came twice: 16 of 1,500 in one run of exercise 09.2.) Otherwise the batch's rows are written to
   the sink (point ``mid-output`` halfway).
5. Point ``after-output-before-commit``; ``after-output``: accept each record and
   ``commit_sync`` (a partition the broker refuses is ``ack-refused``: the locks ended,
   the records are no longer this consumer's); ``auto``: the next poll accepts them
   (implicit acknowledgement). ``batch-done``.

Delivery guarantee
------------------
``after-output`` and ``auto``: at-least-once. A consumer that dies after its output and before its
acknowledgement leaves its records to be delivered again (delivery count + 1), and
written again. ``before-output``: at-most-once: a consumer that dies between its
acknowledgement and its output loses those records. A record delivered
:data:`lab.share.settings.DELIVERY_LIMIT` times and never acknowledged is archived by
the broker: neither delivered nor lost, dropped by the group's policy (the audit's
``archived``).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
from pathlib import Path

from lab import events as ev
from lab.faults.plan import Fault, poison_seqs
from lab.kafka.read import record_row
from lab.pipelines.driver import DriverContext
from lab.sinks.reader import open_sink

#: Seconds a poll waits for records.
POLL_S = 0.2
#: Seconds a stopping consumer's last commit and close may take.
CLOSE_S = 10.0


def share_dir(run_dir: Path) -> Path:
    """The share pipeline's files in a run directory."""
    path = Path(run_dir) / "share"
    path.mkdir(exist_ok=True)
    return path


def next_batch(run_dir: Path) -> int:
    """The next batch number of the run, from the counter every consumer of every driver shares."""
    path = share_dir(run_dir) / "batch"
    with open(share_dir(run_dir) / "batch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            last = int(path.read_text())
        except (OSError, ValueError):
            last = -1
        path.write_text(str(last + 1))
        return last + 1


def last_batch(run_dir: Path) -> int:
    """The last batch number handed out (-1 before the first)."""
    try:
        return int((share_dir(run_dir) / "batch").read_text())
    except (OSError, ValueError):
        return -1


class _Crashes:
    """The timeline's ``consumer-crash`` faults, each claimed by exactly one consumer; and its pressed ``poison``
    faults, each naming a record every consumer then treats as poison (:func:`lab.run.effects.poison_next`)."""

    def __init__(self, ctx: DriverContext, poison: dict) -> None:
        self.ctx = ctx
        self.tail = ev.EventTail(ctx.run_dir)
        self.due: list[tuple[int, float]] = []
        self.poison, self.pressed = poison, set()
        self.claims = share_dir(ctx.run_dir) / "claims"
        self.claims.mkdir(exist_ok=True)

    def claim(self) -> int | None:
        """A crash fault this consumer now owns, or None (and the pressed poison records, into ``poison``)."""
        for e in self.tail.read_new():
            if e.get("type") == ev.FAULT and e.get("kind") == "consumer-crash":
                self.due.append((int(e.get("index", -1)), e["t"]))
            elif e.get("type") == ev.FAULT and e.get("kind") == "poison" and e.get("seq") is not None:
                self.poison[int(e["seq"])] = Fault(kind="poison", key=e.get("key"), nth=e.get("nth"),
                                                   index=int(e.get("index", -1)))
                self.pressed.add(int(e["seq"]))
        while self.due:
            index, t = self.due.pop(0)
            if self.first(f"{index}-{t}"):  # the time too: every panel press has index -1
                return index
        return None

    def first(self, name: str) -> bool:
        """Whether this consumer is the first of the run to claim ``name`` (an exclusive create)."""
        try:
            os.close(os.open(self.claims / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False


def _die() -> None:
    """SIGKILL this consumer: nothing is acknowledged, closed or flushed, as in a real crash."""
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def run(ctx: DriverContext, index: int) -> None:
    """Consume until SIGTERM (protocol in the module docstring)."""
    from confluent_kafka import AcknowledgeType, ShareConsumer

    from lab.share.settings import group_name

    cfg = ctx.config
    explicit = cfg.kafka.commit != "auto"
    consumer = ShareConsumer({
        "bootstrap.servers": ctx.bootstrap,
        "group.id": group_name(ctx.run_id),
        "client.id": f"lab-share-{index}",
        "share.acknowledgement.mode": "explicit" if explicit else "implicit",
        "log_level": 3,  # errors only: librdkafka's "Preview" warning at every start says nothing of the run
    })
    consumer.subscribe([cfg.topic])
    poison = {seq: f for f in cfg.fault_plan if f.kind == "poison" for seq in poison_seqs(f, cfg.seed, cfg.events)}
    crashes = _Crashes(ctx, poison)
    sink = open_sink(ctx.run_dir)
    log = open(share_dir(ctx.run_dir) / f"deliveries-{index}-{os.getpid()}.jsonl", "a")
    ctx.events.write(ev.CONSUMER_START, consumer=index, pid=os.getpid(), attempt=ctx.attempt)

    def note(records, fates) -> None:
        for (p, o, n, row), fate in zip(records, fates):
            log.write(json.dumps({"p": p, "o": o, "n": n, "seq": row[1], "id": row[0],
                                  "c": index, "fate": fate}) + "\n")
        log.flush()

    def accept(messages) -> None:
        for m in messages:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        refused = {tp.partition: str(err) for tp, err in (consumer.commit_sync() or {}).items() if err is not None}
        if refused:
            ctx.events.write(ev.ACK_REFUSED, consumer=index, partitions=refused, attempt=ctx.attempt)

    try:
        # lesson: share-consumer
        while not ctx.stopping:
            messages = [m for m in consumer.poll(POLL_S) if m.error() is None]
            if not messages:
                continue
            batch = next_batch(ctx.run_dir)
            records = [(m.partition(), m.offset(), m.delivery_count(), record_row(m.partition(), m.offset(), m.value()))
                       for m in messages]
            ranges: dict[int, tuple[int, int]] = {}
            for p, o, _, _ in records:
                lo, hi = ranges.get(p, (o, o + 1))
                ranges[p] = (min(lo, o), max(hi, o + 1))
            ctx.batch_start(batch, ranges, len(records), consumer=index,
                            replayed=sum(1 for r in records if (r[2] or 1) > 1))
            crash = crashes.claim()
            if crash is not None:
                note(records, ["held"] * len(records))
                ctx.events.write(ev.CONSUMER_KILLED, index=crash, consumer=index, pid=os.getpid(), batch=batch,
                                 held=[[p, o, n] for p, o, n, _ in records])
                _die()
            if explicit and cfg.kafka.commit == "before-output":
                accept(messages)
                ctx.point("after-commit-before-output", batch)
            bad = next((i for i, r in enumerate(records) if r[3][1] in poison), None)
            if bad is not None:
                p, o, n, row = records[bad]
                fault = poison[row[1]]
                note(records, ["held"] * bad + ["poison"] + ["held"] * (len(records) - bad - 1))
                # The plan's fault fires when it kills its first consumer; a pressed one fired at the press.
                if row[1] not in crashes.pressed and crashes.first(f"poison-{fault.index}"):
                    ctx.events.write(ev.FAULT, index=fault.index, kind="poison", batch=batch, point=None, key=fault.key,
                                     count=fault.count)
                ctx.events.write(ev.POISON_KILLED, index=fault.index, consumer=index, pid=os.getpid(), batch=batch,
                                 partition=p, offset=o, delivery_count=n, seq=row[1], key=messages[bad].key().decode())
                _die()
            sink.write_batch([r[3] for r in records], f"share-{batch}-{index}",
                             on_midway=lambda batch=batch: ctx.point("mid-output", batch))
            note(records, ["written"] * len(records))
            ctx.point("after-output-before-commit", batch)
            if explicit and cfg.kafka.commit == "after-output":
                accept(messages)
            ctx.batch_done(batch, len(records), consumer=index)
        # end lesson: share-consumer
    finally:
        # A clean stop: an implicit consumer's last records are accepted by the close.
        consumer.close()
        sink.close()
        log.close()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m lab.pipelines.share_consumer RUN_DIR INDEX", file=sys.stderr)
        return 2
    ctx = DriverContext(argv[0])
    ctx.install_signal_handlers()
    run(ctx, int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
