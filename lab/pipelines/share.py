"""The ``share`` pipeline: consumers in one Kafka share group (KIP-932, "queues for Kafka"), each record acknowledged.

A share group hands out records, not partitions: any consumer may get any record
of any partition. The broker *acquires* each record it gives a consumer, with a
lock (:data:`lab.share.settings.LOCK_MS`), and counts its deliveries; the consumer
accepts (done), releases (give it to another) or rejects (done, not processed) it.
A record whose lock ends unacknowledged, because its consumer died, paused or left,
is delivered again with its delivery count one higher; past the group's
``share.delivery.count.limit`` (:data:`lab.share.settings.DELIVERY_LIMIT`) the broker
archives it: dropped by policy, neither delivered nor lost.

The client: confluent-kafka's ``ShareConsumer`` (librdkafka's share consumer,
explicit or implicit acknowledgement, each message's ``delivery_count()``),
measured against Kafka 4.4.0. kafka-python has no share consumer.
confluent-kafka's AdminClient has no share-group calls, so the group's start
offsets come from Kafka's own Admin in a small JVM (:mod:`lab.share.build`).

Protocol (this driver)
----------------------
1. With ``--dlq on``, create the run's dead-letter topic (:func:`lab.share.dlq.create_topic`). Set the run's share
   group ``lab-<run id>`` (:func:`lab.share.settings.group_configs`) with confluent-kafka's AdminClient:
   ``share-group``.
2. Start the state reader (``LabShareState``, every second): per partition the end offset
   less the group's lag (:func:`lab.share.state.settled`) is the run's progress
   (``progress.json``): the run drains once the group has no record left that is not
   acknowledged or archived. (The group's start offset alone lags: measured, it stayed
   hundreds of records short with every record accepted and committed.)
3. Start ``--consumers`` consumer processes (:mod:`lab.pipelines.share_consumer`, protocol there),
   in this driver's process group: a ``driver-crash`` is one ``killpg`` of all of them.
   A consumer that ends (a ``consumer-crash``, a poison record) is ``consumer-exit``, and
   a new one with its index starts :data:`RESTART_S` later.
4. With ``--dlq on``, look at the dead-letter topic with every state message (:class:`lab.share.dlq.Watch`): one
   ``moved-to-dlq`` per record the broker moved there (once per run: a restarted driver skips those on the
   timeline already), and once more, to the topic's end, when stopping. The timeline's word only; the audit reads
   the topic itself.
5. On SIGTERM: SIGTERM to every consumer (each finishes its poll, acknowledges and
   closes), :data:`STOP_GRACE_S`, then SIGKILL.

Delivery guarantee
------------------
As :mod:`lab.pipelines.share_consumer` says: at-least-once with ``--commit after-output`` or ``auto``,
at-most-once with ``before-output``; records archived after the delivery limit are
counted apart (the audit's ``archived``), or with ``--dlq on`` moved to the dead-letter
topic (``dead-lettered``). A zombie (``driver-pause`` with ``--on-pause replace``) holds
no record once its locks end: its acknowledgements are refused (``ack-refused``) and the
records it wrote were delivered to the others too.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from lab import events as ev
from lab.errors import LabError
from lab.host import processes
from lab.pipelines.driver import DriverContext
from lab.pipelines.share_consumer import last_batch, share_dir
from lab.share import dlq as share_dlq, settings as share_settings
from lab.share.state import settled, state_reader

#: Seconds before a dead consumer's replacement starts (a supervisor's restart, as for drivers).
RESTART_S = 0.5
#: Seconds stopping consumers get to acknowledge and close before they are killed.
STOP_GRACE_S = 10.0
#: Milliseconds between the state reader's looks at the group's state.
STATE_INTERVAL_MS = 1000


def set_group(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """Set the share group's configs (a GROUP config resource; incremental, so nothing else changes).

    Raises
    ------
    LabError
        When the broker refuses (e.g. a value outside its bounds), with the broker's words.
    """
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource], request_timeout=15).values():
        try:
            future.result(timeout=30)
        except Exception as e:  # KafkaException carrying the broker's error
            raise LabError(f"the broker refused share group {group}'s configs {configs}: {e}") from None


class _Consumers:
    """The consumer processes, by index: started, watched, restarted, stopped."""

    def __init__(self, ctx: DriverContext, count: int) -> None:
        self.ctx = ctx
        self.procs: dict[int, subprocess.Popen] = {}
        self.restart_at: dict[int, float] = {i: 0.0 for i in range(count)}
        self.logs = share_dir(ctx.run_dir)

    def _start(self, index: int) -> None:
        log = open(self.logs / f"consumer-{index}-{self.ctx.attempt}.log", "ab")
        self.procs[index] = subprocess.Popen(
            [sys.executable, "-m", "lab.pipelines.share_consumer", str(self.ctx.run_dir), str(index)],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, preexec_fn=processes.kill_when_parent_exits)
        log.close()

    def step(self) -> None:
        now = time.monotonic()
        for index, at in list(self.restart_at.items()):
            if now >= at:
                del self.restart_at[index]
                self._start(index)
        for index, proc in list(self.procs.items()):
            code = proc.poll()
            if code is None:
                continue
            del self.procs[index]
            self.ctx.events.write(ev.CONSUMER_EXIT, consumer=index, pid=proc.pid, code=code, restart_in_s=RESTART_S,
                                  attempt=self.ctx.attempt,
                                  **({} if code in (0, -signal.SIGKILL) else
                                     {"last_log_line": processes.last_log_line(
                                         self.logs / f"consumer-{index}-{self.ctx.attempt}.log")}))
            self.restart_at[index] = now + RESTART_S

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.procs.values():
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class _DeadLetters:
    """What the broker moved to the run's dead-letter topic, each said once on the timeline (``moved-to-dlq``)."""

    def __init__(self, ctx: DriverContext, group: str) -> None:
        self.ctx = ctx
        self.watch = share_dlq.Watch(ctx.bootstrap, ctx.config.topic, group)
        self.said = {e["dlq_offset"] for e in ev.read_events(ctx.run_dir) if e.get("type") == ev.DEAD_LETTERED}

    def step(self, letters=None) -> None:
        for d in self.watch.new() if letters is None else letters:
            if d.dlq_offset not in self.said:
                self.said.add(d.dlq_offset)
                self.ctx.events.write(ev.DEAD_LETTERED, partition=d.partition, offset=d.offset,
                                      delivery_count=d.delivery_count, dlq_offset=d.dlq_offset, message=d.message,
                                      attempt=self.ctx.attempt)

    def finish(self) -> None:
        """Say what the topic holds now and was not said yet (a move in the last second before the stop)."""
        try:
            self.step(share_dlq.read_dead_letters(self.ctx.bootstrap, self.ctx.config.topic, self.watch.group,
                                                  timeout_s=5.0))
        except LabError:
            pass  # the audit reads the topic itself; the timeline only misses a line
        finally:
            self.watch.close()


def run(ctx: DriverContext) -> None:
    """Run the share group's consumers until the supervisor asks to stop (SIGTERM)."""
    cfg = ctx.config
    group = share_settings.group_name(ctx.run_id)
    configs = share_settings.group_configs(cfg)
    if cfg.kafka.dlq == "on":
        share_dlq.create_topic(ctx.bootstrap, cfg.topic)
    set_group(ctx.bootstrap, group, configs)
    ctx.events.write(ev.SHARE_GROUP, group=group, configs=configs, consumers=cfg.kafka.consumers, attempt=ctx.attempt)
    state = state_reader(ctx.bootstrap, group, share_dir(ctx.run_dir) / f"state-{ctx.attempt}.log",
                         interval_ms=STATE_INTERVAL_MS)
    consumers = _Consumers(ctx, cfg.kafka.consumers)
    moved = _DeadLetters(ctx, group) if cfg.kafka.dlq == "on" else None
    positions: dict[int, int] = {}
    try:
        while not ctx.stopping:
            consumers.step()
            try:
                m = state.message(timeout=0.1)
            except LabError:
                if ctx.stopping:
                    break
                raise
            if m and m.get("op") == "state":
                start = settled(m)
                positions = {p: max(positions.get(p, 0), start.get(p, 0)) for p in range(cfg.partitions)}
                ctx.progress(positions, last_batch(ctx.run_dir))
                if moved is not None:
                    moved.step()
    finally:
        consumers.stop()
        state.kill()
        if moved is not None:
            moved.finish()

