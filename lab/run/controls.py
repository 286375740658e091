"""What the fault injector may do to a run: the one object the supervisor hands it (:mod:`lab.run.injector`).

Protocol
--------
The supervisor owns the processes; the injector owns the plan and decides when a fault fires;
:mod:`lab.run.effects` says what each kind does, through these hands only. Each method acts on the
run as it is at that moment: the current driver, the broker as its last restart left it.

Every kill is a real ``SIGKILL`` (or ``SIGSTOP`` for a pause) of a process group the run started;
every restart starts the same JVM again on its data. None of them touches the ledger or the sink:
what a fault costs is for the audit to count.
"""

from __future__ import annotations

import json
import signal
import time

from lab import events as ev
from lab.broker import cluster as kafka_cluster, embedded as broker_mod, shared as shared_broker
from lab.engines.groups import ENGINES
from lab.events import read_events
from lab.host import processes
from lab.sinks.topic import output_topic


class RunControls:
    """The injector's hands on one run (a :class:`lab.run.supervisor.Run`, once its broker is up).

    Attributes
    ----------
    control_host : str
        The host of the proxies' control ports: 127.0.0.1 for the embedded broker's, or the one
        ``LAB_KAFKA_PROXY`` names.
    client_controls : tuple of int
        The control ports of the proxies clients reach the brokers through (none: no proxy).
    replication_controls : tuple of int
        A cluster's replication proxies (followers fetch through them: ``follower-lag``).
    """

    def __init__(self, run) -> None:
        self._run = run
        self._output_reader = None  # a consumer kept for output_records(), made on first use
        broker = run.broker
        self.control_host = broker.control_host
        ports = broker.control_ports
        self.client_controls = tuple(ports) or ((broker.control_port,) if broker.control_port is not None else ())
        self.replication_controls = tuple(n.replication_control_port for n in broker.nodes)

    # -- the output --------------------------------------------------------------
    def output_records(self) -> int:
        """Records in the run's output topic's log now (the sum of its end offsets; 0 before the driver made it).

        One consumer, kept for the run (:meth:`close`): an ``output=N`` trigger looks every 0.2 s.
        """
        from kafka import TopicPartition

        from lab.kafka import tools as kafka_tools

        topic = output_topic(self._run.config.topic)
        try:
            if self._output_reader is None:
                self._output_reader = kafka_tools.bulk_consumer(self._run.broker.bootstrap, "read_uncommitted",
                                                                allow_auto_create_topics=False)
            parts = self._output_reader.partitions_for_topic(topic)
            if not parts:
                return 0
            return sum(self._output_reader.end_offsets([TopicPartition(topic, p) for p in parts]).values())
        except Exception:  # the broker restarting, the topic being made: looked at again next time
            return 0

    def close(self) -> None:
        """Close what :meth:`output_records` opened."""
        if self._output_reader is not None:
            self._output_reader.close()
            self._output_reader = None

    # -- the driver ----------------------------------------------------------
    def driver_up(self) -> bool:
        """A driver runs, is not being restarted, and has said it is ready."""
        return self._run.driver_up()

    def kill_driver(self) -> int | None:
        """driver-crash: SIGKILL the driver's group (and its Spark Python daemons); it restarts after the delay."""
        return self._run.crash_driver()

    def pause_driver(self, duration_s: float) -> dict:
        """driver-pause: SIGSTOP the driver's group; continued (or set aside for a replacement) by the supervisor."""
        return self._run.pause_driver(duration_s)

    def kill_executor(self) -> int | None:
        """executor-crash: SIGKILL one executor JVM of the current driver (its engine finds it); its PID or None."""
        run = self._run
        pid = run.driver_pid()
        targets = [e for e in read_events(run.run_dir) if e["type"] == ev.EXECUTOR_TARGET]
        return ENGINES[run.config.spec.engine].kill_executor(pid, run.config, targets, run.run_dir)

    # -- the brokers ---------------------------------------------------------
    def kill_broker(self) -> int | None:
        """broker-crash: SIGKILL the broker JVM's process group (the injector schedules the restart)."""
        pid = self._run.broker.broker_pid
        processes.kill_group(pid, signal.SIGKILL, 5)
        return pid

    def restart_broker(self) -> None:
        """Start the killed broker JVM again on its data, behind the same proxy; record where it is."""
        began = time.monotonic()
        self._record_broker(broker_mod.restart_embedded_broker(self._run.broker))
        self._run.events.write(ev.BROKER_RESTART, pid=self._run.broker.broker_pid,
                               took_s=round(time.monotonic() - began, 3))

    def kill_leader(self) -> dict | None:
        """leader-crash: SIGKILL the broker leading the run topic's partition 0 (``{"node", "pid", "leads"}``)."""
        return kafka_cluster.kill_leader(self._run.broker, self._run.config.topic)

    def restart_node(self, node: int) -> None:
        """Start a cluster's killed broker again on its data, behind its proxies; record where it is."""
        began = time.monotonic()
        self._record_broker(broker_mod.restart_cluster_node(self._run.broker, node))
        self._run.events.write(ev.NODE_RESTART, node=node, pid=self._run.broker.node(node).broker_pid,
                               took_s=round(time.monotonic() - began, 3))

    def cut_output_leader(self, seconds: float) -> dict:
        """leader-unreachable: cut the pipeline's output producer (its client id prefix, the registry's
        ``output_client``) off from a broker leading an output partition and coordinating nothing."""
        run = self._run
        return kafka_cluster.cut_output_leader(run.broker, output_topic(run.config.topic), seconds,
                                               client_prefix=run.config.spec.output_client(run.run_dir.name))

    # -- the producer --------------------------------------------------------
    def hold_unsent(self, ahead: int) -> dict:
        """poison (a panel press): the producer stops before the event ``ahead`` sends on and names it:
        ``{"seq": n, "key": <its key's number>, "nth": <its place among its key's events, from 1>}``; the caller
        writes the fault event, then :meth:`release_producer` (:meth:`lab.run.producer.LedgeredProducer.hold_unsent`).

        Raises
        ------
        LabError
            When the producer has no such event left to send (or has stopped).
        """
        seq, key, nth = self._run.producer.hold_unsent(ahead)
        return {"seq": seq, "key": int(key[1:]), "nth": nth}

    def release_producer(self) -> None:
        self._run.producer.release()

    def abort_transactions(self, count: int) -> dict:
        """txn-abort: the ledgered producer aborts its next ``count`` transactions instead of committing them."""
        return self._run.producer.abort_next(count)

    def _record_broker(self, info: broker_mod.BrokerInfo) -> None:
        run = self._run
        run.broker = info
        if info.detached:  # `lab broker start`'s broker: `lab broker stop` must find the new JVM
            shared_broker.save_state(run.config.runs_dir, info)
        else:
            run.restarted_broker = info
        (run.run_dir / "broker.json").write_text(json.dumps(info.to_dict(), indent=2))
