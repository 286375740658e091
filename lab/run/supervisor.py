"""The run supervisor: one scenario from start to audited report.

A :class:`Run` creates the run directory, starts (or reuses) the broker,
creates the topic, starts the ledgered producer and the pipeline driver
(its own process group), injects the planned faults, restarts the driver
after each crash, stops when the pipeline has drained the topic, when the
faults left wait for a batch that will not come (:mod:`lab.run.end`), or at
the deadline, audits, and writes ``report.json``.

The run directory's layout: :mod:`lab.run.run_dir`.

On failure
----------
Every process the run started is ended by its PID, also when the caller is
interrupted (``KeyboardInterrupt``) or raises; a driver that keeps failing
on its own (not from a planned fault) stops the run with its log's last line.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent import futures
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from lab import events as ev
from lab.audit.auditor import Audit
from lab.audit.ledger import LEDGER_FILE, Ledger
from lab.broker import embedded as broker_mod, shared as shared_broker
from lab.config import RunConfig
from lab.engines.groups import ENGINES
from lab.errors import DRIVER_CONFIG_EXIT, LabError
from lab.events import EventLog, EventTail, progress_not_from, read_events, read_progress
from lab.faults.catalogue import on_pause_mode
from lab.host import processes
from lab.host.start_tuning import StartTuning
from lab.kafka import tools as kafka_tools
from lab.kafka.replication import ReplicationWatch
from lab.run import injector
from lab.run.controls import RunControls
from lab.run.driver_process import DriverProcess
from lab.run.end import EndWatch
from lab.run.pause import DriverPause
from lab.run.producer import LedgeredProducer
from lab.run.result import RunResult, RunStatus, audit_of_run, audited_result, start_audit_imports, start_topic_read
from lab.run.run_dir import new_run_dir
from lab.sinks.reader import open_sink
from lab.sinks.spec import sink_spec_for_run

#: Driver exits not caused by the lab before a run gives up.
MAX_UNPLANNED_EXITS = 3
#: Seconds a Kafka of one's own (``LAB_KAFKA_BOOTSTRAP``) has to create the run's topic: it is up already, so a
#: host that accepts connections without answering as Kafka fails the start in one line within 10 s.
EXTERNAL_KAFKA_ANSWER_S = 8.0
#: Seconds a driver gets after SIGTERM without progress (a receiver's stop: 16 s of waits + Spark's graceful 10 s):
#: each event it writes (a batch done) gives it as long again, up to :data:`STOP_LIMIT_S`. A recovered receiver
#: driver with five batches behind, on a loaded machine, took longer than 30 s to write them and was killed before
#: its last ones (measured in the suite); it was progressing all along.
STOP_GRACE_S = 30.0
#: Seconds a driver's stop may take in all, however much it progresses.
STOP_LIMIT_S = 120.0
#: Seconds a clean-up waits for a final read of the topic that its audit never took (a 200,000-event topic: 3.1 s).
TOPIC_READ_WAIT_S = 10.0
#: Seconds between the drained checks (each asks the broker for the end offsets once the producer is done).
DRAIN_CHECK_S = 0.5
#: Seconds after a ``batch-done`` when the drained check comes anyway (the poll after the one that read it).
DRAIN_CHECK_AFTER_BATCH_S = 0.05


class Run:
    """One scenario run, driven in a background thread.

    Parameters
    ----------
    config : RunConfig
    on_event : callable, optional
        Called with every timeline event (from the monitor thread; it must not
        touch widgets directly).
    tuning : StartTuning, optional
        How drivers start (default: from ``LAB_*``, :mod:`lab.host.start_tuning`).

    Examples
    --------
    >>> with Run(make_config(events=3000, faults="driver-crash@at=3s")) as run:
    ...     result = run.wait()
    """

    def __init__(self, config: RunConfig, on_event=None, tuning: StartTuning | None = None) -> None:
        config.validate()
        self.config = config
        self.on_event = on_event
        self.run_dir: Path | None = None
        self.broker: broker_mod.BrokerInfo | None = None
        self.producer: LedgeredProducer | None = None
        self._driver: DriverProcess | None = None
        self.events: EventLog | None = None
        self.faults: injector.FaultInjector | None = None
        self.result: RunResult | None = None
        self.error: BaseException | None = None
        self._stack = ExitStack()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._done = threading.Event()
        self._lock = threading.RLock()
        self._t0 = 0.0
        self._stream_t0 = 0.0
        self._restarts = 0
        self._unplanned_exits = 0
        self._batches_done = 0
        self._end: EndWatch | None = None  # when the run may end (lab.run.end)
        self._restart_at: float | None = None
        self._pause: DriverPause | None = None  # a driver-pause's stop, replacement and zombie (lab.run.pause)
        self._broker_features: dict | None = None  # as the run's start found (or set) them: the report states them
        self.restarted_broker: broker_mod.BrokerInfo | None = None  # a JVM this run started after a broker-crash
        self._watch: ReplicationWatch | None = None
        self._ready_attempt = 0
        self._next_group_scan = 0.0
        self._drained = False
        self._ended = False  # the monitor left its loop: no fault may start now (the final audit reads the topic)
        self._topic_read: futures.Future | None = None  # the final audit's read of the topic, once drained
        self._times: dict[str, float] = {}
        self._tuning = tuning or StartTuning.from_env()

    # -- public API ------------------------------------------------------
    def start(self, hold=None) -> Run:
        """Create the run directory, start broker, producer and driver; return at once.

        ``hold``: a callable returning the seconds it waited, called once the
        first driver has started (a standby: its JVM, session and workers come
        up meanwhile) and before anything touches the broker, the topic or the
        producer: a matrix row started ahead waits there for its turn
        (:func:`lab.matrix.rows.wait_for_turn`). It ends the wait by raising
        to give the run up; everything started is then ended.

        Raises
        ------
        LabError
            Within seconds, before any process starts, for an unwritable runs
            directory or an unreachable Spark master or Kafka.
        """
        ENGINES[self.config.spec.engine].check_reachable(self.config)
        try:
            self._set_up(hold)
            self._start_broker()
            self._start_stream()
        except BaseException:
            self._cleanup()
            raise
        return self

    def _set_up(self, hold) -> None:
        """The run directory, its sink, ledger and timeline; the engine's preparation; the first driver, ahead."""
        cfg = self.config
        self.run_dir = new_run_dir(cfg)
        # One topic per run: runs that share a broker (`lab broker start`, a notebook's
        # broker, LAB_KAFKA_BOOTSTRAP) must never read each other's events.
        cfg = self.config = replace(cfg, topic=f"{cfg.topic}.{self.run_dir.name}")
        self._end = EndWatch(cfg, self.run_dir)
        self.events = EventLog(self.run_dir, "supervisor")
        (self.run_dir / "config.json").write_text(cfg.to_json())
        self._driver = DriverProcess(self.run_dir, on_child_group=self._record_group)
        self._pause = DriverPause(self._driver, self.events, on_pause_mode(cfg, cfg.spec), self._start_replacement)
        sink_spec_for_run(cfg.sink, self.run_dir, cfg.sink_url).save(self.run_dir)
        open_sink(self.run_dir).close()  # create tables now: a bad LAB_SINK_URL fails here
        Ledger(self.run_dir / LEDGER_FILE).close()  # readers (live audits) may look before the first send
        ENGINES[cfg.spec.engine].prepare(cfg, cfg.spec, self.events.write)  # drivers never download or build
        # The first driver starts its JVM, session and workers while the broker starts, and has its turn
        # once the topic and the producer are there (lab.run.driver_process).
        self._keep_standby(needed=True, first=True)
        if hold is not None:
            self.events.write(ev.RUN_HELD, waited_s=hold())

    def _start_broker(self) -> None:
        """The broker (or the one the run shares), the run's topic, and the engine's services (Storm's ZooKeeper)."""
        cfg, c = self.config, self.config.cluster
        self.broker = self._stack.enter_context(shared_broker.broker_for_run(
            c.kafka_bootstrap, cfg.runs_dir, self.run_dir / "logs", kafka_proxy=c.kafka_proxy, nodes=c.nodes))
        (self.run_dir / "broker.json").write_text(json.dumps(self.broker.to_dict(), indent=2))
        elr = {"on": 1, "off": 0}.get(c.elr)
        # A Kafka of one's own is already up: it answers within seconds or not at all (one line, not a hang).
        self._broker_features = kafka_tools.create_topic(
            self.broker.bootstrap, cfg.topic, cfg.partitions, replication=c.nodes, configs=cfg.topic_configs,
            features=None if elr is None else {kafka_tools.ELR_FEATURE: elr},
            timeout_s=EXTERNAL_KAFKA_ANSWER_S if self.broker.external else 15.0)
        # What the run's broker decides with: eligible leader replicas, the transaction protocol, share groups.
        self.events.write(ev.BROKER_FEATURES, finalized=self._broker_features, elr_set=c.elr)
        # Before the first driver, stopped at the run's end (Storm's ZooKeeper: its state outlives crashes).
        self._stack.enter_context(ENGINES[cfg.spec.engine].services(cfg, self.run_dir, self.events.write))

    def _start_stream(self) -> None:
        """The fault injector, the producer, the driver (unless it waits for them) and the monitor."""
        cfg = self.config
        self.faults = injector.FaultInjector(cfg, self.events, RunControls(self), elapsed=self.elapsed,
                                             stream_elapsed=self.stream_elapsed)
        if self.broker.nodes:
            self._watch = ReplicationWatch(self.broker.bootstrap, cfg.topic, self.events.write).start()
        self._t0 = time.monotonic()
        self.events.write(ev.RUN_START, pipeline=cfg.pipeline, faults=cfg.faults, bootstrap=self.broker.bootstrap)
        self.producer = LedgeredProducer(cfg, self.broker.bootstrap, self.run_dir / LEDGER_FILE,
                                         EventLog(self.run_dir, "producer"))
        if not cfg.spec.ready_when_running:  # else at the first driver-ready (registry)
            self._start_producer()
        if not cfg.backlog:  # else at producer-done: its JVM, session and workers are up meanwhile (standby)
            self._start_driver()
        self._thread = threading.Thread(target=self._monitor, name="lab-supervisor", daemon=True)
        self._thread.start()

    def inject(self, kind: str, *, source: str = "ui", **options) -> dict:
        """Inject a fault now (a widget press).

        Parameters
        ----------
        kind : str
            A fault of the catalogue (:data:`lab.faults.catalogue.FAULTS`) that applies to the pipeline.
        source : str
            Recorded in the timeline (``ui``, ``plan``).
        **options
            ``duration_s`` for broker-outage and ack-loss, ``count`` for ack-loss.

        Returns
        -------
        dict
            The ``fault`` event written (``fault-deferred`` while no driver is up to be killed).

        Raises
        ------
        LabError
            For a fault the pipeline or the run's settings cannot carry out, and from the moment the
            monitor's loop has ended (drained, no more batches, deadline, a stop or an error): a fault then
            would act on the final audit, not on the pipeline (a broker cut during the topic's final read
            fails the audit). A press in the milliseconds between the loop's last check and its end is
            carried out and recorded, as any press before.
        """
        if self.faults is None:
            raise LabError("the run has not started; start it before injecting faults")
        with self._lock:
            if self._ended:
                raise LabError(f"the run has ended; {kind} was not injected (start a new run to inject faults)")
            return self.faults.inject(kind, source=source, **options)

    def finished_within(self, seconds: float) -> bool:
        """Whether the run finishes within ``seconds`` (returns as soon as it has: a progress loop's pause)."""
        return self._done.wait(seconds)

    def wait(self, timeout: float | None = None) -> RunResult:
        """Block until the run has finished (drained, no more batches, or deadline) and return its result.

        A ``KeyboardInterrupt`` while waiting stops the run (every process ended) and is raised again.
        """
        try:
            if not self._done.wait(timeout):
                raise TimeoutError(f"run still going after {timeout} s")
        except BaseException:
            self.stop()
            raise
        if self.error:
            raise self.error
        return self.result

    def stop(self) -> None:
        """Stop now: end the driver, the producer and the broker if this run started it."""
        self._stop.set()
        if self._thread and self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(STOP_GRACE_S + 15)
        self._cleanup()

    def elapsed(self) -> float:
        return time.monotonic() - self._t0 if self._t0 else 0.0

    def stream_elapsed(self) -> float | None:
        """Seconds since the producer started (None before): what a fault's ``at=Ns`` counts (lab.run.injector)."""
        return time.monotonic() - self._stream_t0 if self._stream_t0 else None

    def _start_producer(self) -> None:
        if not self._stream_t0:
            self._stream_t0 = time.monotonic()  # the producer writes its own producer-start
        self.producer.start()

    def status(self) -> RunStatus:
        stats = self.producer.stats if self.producer else None
        return RunStatus(
            elapsed_s=self.elapsed(),
            produced=stats.sent if stats else 0,
            acked=stats.acked if stats else 0,
            producer_done=bool(stats and stats.done),
            batches=self._batches_done,
            restarts=self._restarts,
            driver_alive=self._driver is not None and self._driver.alive(),
            positions=read_progress(self.run_dir)["positions"] if self.run_dir else {},
            end_offsets=dict(self._end.end_offsets) if self._end else {},
            finished=self._done.is_set(),
            ended=self._ended,
        )

    def live_audit(self) -> Audit:
        """Audit what the sink holds right now (undelivered events beyond the position are unseen)."""
        with open_sink(self.run_dir) as sink:
            return audit_of_run(self.run_dir, self.config, sink, read_progress(self.run_dir)["positions"])

    def __enter__(self) -> Run:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- driver process ----------------------------------------------------
    @property
    def driver(self):
        """The current driver's ``Popen`` (None before the first start)."""
        return self._driver.proc if self._driver is not None else None

    def _start_driver(self) -> None:
        pid, ahead = self._driver.start()
        self.events.write(ev.DRIVER_START, pid=pid, attempt=self._driver.attempt,
                          **({"started_ahead_s": ahead} if ahead is not None else {}))

    def _keep_standby(self, needed: bool | None = None, first: bool = False) -> None:
        """Start the next driver ahead when the run wants one (:meth:`StartTuning.wants_standby`) and has none.

        ``needed`` defaults to: the plan still has a driver crash to come (pending or deferred).
        ``first``: the run's first driver.
        """
        if needed is None:
            needed = any(f.kind == "driver-crash"
                         for f in [*self.faults.pending, *(d[0] for d in self.faults.deferred)])
        waits = self.config.spec.waits_for_turn
        if self._driver.standby is None and self._tuning.wants_standby(waits, self.config.option("spark_master"),
                                                                       needed, first=first):
            pid = self._driver.start_standby()
            self.events.write(ev.STANDBY_START, pid=pid, attempt=self._driver.attempt + 1)

    def driver_up(self) -> bool:
        """A driver runs, is not being restarted, and has said it is ready."""
        return (self._driver.alive() and self._restart_at is None
                and self._ready_attempt == self._driver.attempt)

    def driver_pid(self) -> int | None:
        """The current driver's PID while it runs."""
        return self._driver.pid if self._driver.alive() else None

    def pause_driver(self, duration_s: float) -> dict:
        """The driver-pause fault (:mod:`lab.run.pause`): what its event records."""
        return self._pause.pause(duration_s)

    def crash_driver(self) -> int | None:
        """The driver-crash fault: SIGKILL the driver's group (and its Spark Python daemons); restart later."""
        pid = self._driver.kill()
        self._restart_at = time.monotonic() + self.config.restart_delay_s
        return pid

    def _progress(self) -> dict:
        """The run's progress, whatever a zombie wrote (:func:`lab.events.progress_not_from`)."""
        return progress_not_from(self.run_dir, self._pause.zombie_attempts, self._driver.attempt)

    def _start_replacement(self) -> None:
        """A paused driver's replacement (lab.run.pause): counted as a restart."""
        self._restarts += 1
        self._start_driver()

    def _record_group(self, pgid: int, created: float, cmd: str, driver_pid: int | None) -> None:
        self.events.write(ev.DRIVER_CHILD_GROUP, pid=pgid, create_time=created, cmd=cmd[:200], driver_pid=driver_pid)

    def _stop_driver_gracefully(self) -> str | None:
        """End the last driver: SIGTERM, then SIGKILL after :data:`STOP_GRACE_S` without progress; record how in
        ``final-stop``."""
        stopped = self._driver.stop(STOP_GRACE_S, STOP_LIMIT_S)
        if stopped is None:
            return None
        self.events.write(ev.FINAL_STOP, **stopped, grace_s=STOP_GRACE_S)
        return stopped["how"]

    # -- the monitor thread --------------------------------------------------
    def _monitor(self) -> None:
        try:
            try:
                self._loop()
            finally:
                with self._lock:  # an inject() under way finishes first; any later one is refused
                    self._ended = True
            self._finish()
        except BaseException as e:  # reported by wait(), never lost
            self.error = e
            try:
                self.events.write(ev.RUN_ERROR, error=repr(e))
            except Exception:
                pass
        finally:
            self._cleanup()
            self._done.set()

    def _loop(self) -> None:
        cfg = self.config
        tail = EventTail(self.run_dir)
        # The deadline counts from the run's last progress (events sent or acknowledged, positions
        # advanced), not from its start: a long run that keeps up is never cut short.
        last_progress, seen = time.monotonic(), None
        next_drain_check = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            for event in tail.read_new():
                self._on_event(event)
                if event.get("type") == ev.BATCH_DONE:
                    # A finished batch is when a run drains: looked at now, not up to half a second later. Some
                    # pipelines write progress.json just after batch-done, so the look comes one poll later.
                    next_drain_check = min(next_drain_check, now + DRAIN_CHECK_AFTER_BATCH_S)
            with self._lock:
                self.faults.tick()
            if self._restart_at is not None and now >= self._restart_at:
                self._restart_at = None
                self._restarts += 1
                self._start_driver()
            if self._pause.pending:
                with self._lock:  # a press (Run.inject) may start a pause meanwhile
                    self._pause.step(now)
            if self._restart_at is None and self._driver.exited_on_its_own():
                self._on_unplanned_exit(self._driver.proc)
            if now >= self._next_group_scan:
                self._next_group_scan = now + 2.0
                self._driver.scan_children()
            if now >= next_drain_check:
                next_drain_check = now + DRAIN_CHECK_S
                progress = self._progress()
                state = self._progress_state(progress)
                if state != seen:
                    seen, last_progress = state, now
                # A paused driver, or its zombie, still writes: the run is not over before it is done.
                pending = self._restart_at is not None or self._pause.pending
                where = dict(driver=self._driver, faults=self.faults, restart_pending=pending,
                             producer_done=bool(self.producer and self.producer.stats.done),
                             bootstrap=self.broker.bootstrap, on_cluster=bool(self.broker.nodes))
                ended = self._end.ended(progress, self.events.write, self.elapsed(), **where)
                if ended:
                    self._drained = ended == ev.DRAINED
                    return
            if now - last_progress >= cfg.deadline_s:
                self.events.write(ev.DEADLINE, elapsed_s=round(self.elapsed(), 3),
                                  without_progress_s=round(now - last_progress, 3))
                return
            time.sleep(0.05)

    def _on_event(self, event: dict) -> None:
        kind = event.get("type")
        self._end.on_event(event)
        if kind == ev.BATCH_DONE:
            self._batches_done += 1
            self._times.setdefault("first_batch_s", self.elapsed())
        elif kind == ev.PRODUCER_DONE:
            self._times["producer_s"] = self.elapsed()
            if self.config.backlog and self._driver.proc is None:
                self._start_driver()
        elif kind == ev.DRIVER_READY:
            self._start_producer()  # once; for a pipeline ready when its job runs, this is the producer's start
            self._ready_attempt = max(self._ready_attempt, int(event.get("attempt", 1)))
            if self._ready_attempt == self._driver.attempt:  # the current driver has its turn: the next may start
                self._keep_standby()
        with self._lock:
            self.faults.on_event(event)
        if self.on_event:
            try:
                self.on_event(event)
            except Exception:
                pass

    def _on_unplanned_exit(self, proc) -> None:
        self._unplanned_exits += 1
        self._driver.reap()
        last = processes.last_log_line(self._driver.log_path)
        self.events.write(ev.DRIVER_EXIT, pid=proc.pid, code=proc.returncode, last_log_line=last)
        if proc.returncode == DRIVER_CONFIG_EXIT:
            # A setting the driver cannot use (lab.errors.DriverConfigError): a restart would fail the same way.
            said = [e["error"] for e in read_events(self.run_dir) if e["type"] == ev.DRIVER_CONFIG_ERROR]
            raise LabError(said[-1] if said else last)
        if self._unplanned_exits >= MAX_UNPLANNED_EXITS:
            raise LabError(
                f"the {self.config.pipeline} driver exited {self._unplanned_exits} times on its own "
                f"(last status {proc.returncode}): {last}; see {self._driver.log_path}"
            )
        self._restart_at = time.monotonic() + self.config.restart_delay_s

    def _progress_state(self, progress: dict) -> tuple:
        """What changes while a run makes progress: the producer's counts and the driver's positions."""
        stats = self.producer.stats if self.producer else None
        counts = (stats.sent, stats.acked, stats.failed) if stats else ()
        return counts, tuple(sorted(progress.get("positions", {}).items()))

    def _finish(self) -> None:
        self._times["until_drained_s"] = self.elapsed()
        idle = self._end.idle_s  # set when the run ended for want of a batch (no-more-batches)
        self.faults.not_applied(idle and f": every event had passed and no batch started for {idle:.0f} s")
        imports = start_audit_imports()  # while the drivers stop
        # Drained: the producer is done and no fault is left, so the topic is final; read it while the drivers stop.
        # Not on a cluster: a follower held in the ISR can keep acknowledged records above the high watermark
        # for seconds after the drain (run_end's TRUNCATED_SETTLE_S), and the later read gives them more time.
        if self._drained and not self.broker.nodes:
            self._topic_read = start_topic_read(self.broker.bootstrap, self.config)
        with self._lock:
            self._pause.finish()
        self._driver.stop_standby()
        how = self._stop_driver_gracefully()
        imports.join()
        self.events.write(ev.RUN_END, elapsed_s=round(self.elapsed(), 3), drained=self._drained)
        self.result = audited_result(
            self.run_dir, self.config, self.broker, self._progress()["positions"], self._topic_read,
            killed=how == "killed-after-timeout", elapsed=self.elapsed, times=self._times,
            faults_fired=list(self.faults.fired), restarts=self._restarts, drained=self._drained,
            batches=self._batches_done, broker_features=self._broker_features)

    def _cleanup(self) -> None:
        """End everything this run started; safe to call more than once, from any thread."""
        if self._watch is not None:
            self._watch.stop()
        if self.producer is not None:
            self.producer.stop(timeout=15)
        # A clean stop already happened in _finish; anything still alive here is killed.
        if self._driver is not None:
            self._driver.kill_remaining()
        if self._topic_read is not None:
            # Done, unless _finish gave up before its audit: the read may end before its broker stops.
            futures.wait([self._topic_read], timeout=TOPIC_READ_WAIT_S)
        if self.restarted_broker is not None:
            broker_mod.stop_embedded(self.restarted_broker, discard_data=True)  # the run's own, as broker_for_run's
        if self.faults is not None:
            # A proxy this run does not stop (LAB_KAFKA_PROXY's, `lab broker start`'s) would carry
            # a cut or an unused ack-loss count into the next run.
            self.faults.heal_proxy()
            self.faults.controls.close()
        self._stack.close()

def run_scenario(config: RunConfig, on_event=None) -> RunResult:
    """Run one scenario to the end and return its audited result.

    Delivery guarantee: none of its own; it measures the pipeline's.

    Raises
    ------
    LabError
        On bad configuration, an unreachable broker, or a driver that fails on its own.
    KeyboardInterrupt
        Re-raised after every process of the run has been ended.
    """
    run = Run(config, on_event=on_event)
    run.start()
    return run.wait()
