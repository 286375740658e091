"""What a run reports: its live status while it runs, and its verdict, the final audit and ``report.json``.

At the run's end :func:`final_audit` reads the run's topic once from the
earliest offset (what the producer really stored: ``source_duplicates``, and
the offsets of acknowledgements that came back without one): after the driver
has stopped, or, for a run that drained on a single broker, while it stops
(:func:`start_topic_read`). Once the driver has stopped it audits the ledger
against the sink, and :func:`build_report` assembles the JSON report
(``lab run --json`` prints it last).

Positions at a forced stop
--------------------------
The auditor splits undelivered events into lost (below the pipeline's
position) and unseen (at or beyond it). A pipeline that commits its source
offsets before its output (the receiver: offsets are committed as records
reach it) has events below its position that are merely in flight. When the
supervisor had to kill the last driver (``final-stop`` with ``how`` other than
``graceful``), :func:`in_flight_positions` caps each partition's position at
the end of the last batch that completed its output, so events in flight at
the kill count as unseen, never lost.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab import events as ev
from lab.audit.auditor import Audit, audit_run
from lab.audit.latency import topic_latency
from lab.audit.ledger import LEDGER_FILE, aborted_event_ids, acked_per_key, place_acks, sends_frame
from lab.audit.restarts import driver_restarts
from lab.audit.shown import cautions, could_not_show, nothing_replayed, nothing_to_abort, resumed_at_the_output_end
from lab.audit.topic import audit_topic
from lab.events import read_events
from lab.kafka import tools as kafka_tools
from lab.registry import PIPELINES
from lab.sinks.reader import open_sink
from lab.sinks.topic import TopicSink
from lab.spark import trigger as spark_trigger

#: Seconds the final audit waits for the broker to move what it gave up on to the dead-letter topic (``--dlq on``).
DEAD_LETTER_WAIT_S = 30.0


@dataclass
class RunResult:
    """A finished run: its config, audit, timings and where its files are."""

    config: lab.config.RunConfig  # noqa: F821
    run_dir: Path
    audit: Audit
    timings: dict
    faults_fired: list
    restarts: int
    drained: bool
    batches: int
    report: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        """One line a notebook can show: what ran, what it measured, where its files are (not every field)."""
        r = self.report
        faults = f" faults={self.config.faults}" if self.config.faults else ""
        return (f"RunResult({self.config.pipeline}/{self.config.sink}{faults}: {r.get('guarantee', '?')}, "
                f"{r.get('duplicated', '?')} duplicated, {r.get('lost', '?')} lost of {r.get('acked', '?')}; "
                f"{self.run_dir})")


@dataclass
class RunStatus:
    """Live view of a run for progress bars and panels."""

    elapsed_s: float
    produced: int
    acked: int
    producer_done: bool
    batches: int
    restarts: int
    driver_alive: bool
    positions: dict
    end_offsets: dict
    finished: bool
    #: The run's loop has ended (drained, no more batches, deadline, stop, error): faults are refused from now on,
    #: while the drivers stop and the audit runs, before ``finished``.
    ended: bool = False

    @property
    def backlog(self) -> int:
        return sum(max(0, e - self.positions.get(p, 0)) for p, e in self.end_offsets.items())


def completed_ends(events: list[dict]) -> dict[int, int]:
    """Per partition, the end of the furthest offset range a completed batch covered.

    A batch's ranges come from its ``batch-done`` event when it carries them
    (the receiver's), else from the ``batch-start`` of the same batch and attempt.
    """
    started: dict[tuple, dict] = {}
    ends: dict[int, int] = {}
    for e in events:
        key = (e.get("batch"), e.get("attempt"))
        if e.get("type") == ev.BATCH_START:
            started[key] = e.get("ranges") or {}
        elif e.get("type") == ev.BATCH_DONE:
            for p, (_, end) in (e.get("ranges") or started.get(key) or {}).items():
                ends[int(p)] = max(ends.get(int(p), 0), int(end))
    return ends


def in_flight_positions(positions: dict[int, int], events: list[dict]) -> dict[int, int]:
    """The positions to audit by after a forced stop: never beyond what completed batches covered."""
    ends = completed_ends(events)
    return {p: min(o, ends.get(p, 0)) for p, o in positions.items()}


def start_audit_imports() -> threading.Thread:
    """Import what :func:`final_audit` needs beyond this module (pandas) on a thread started now; join it first.

    ``lab run`` imports this module before it starts its first driver: pandas (0.3 s of imports) is left to
    :mod:`lab.audit.auditor` and :mod:`lab.audit.topic`, which import it where they build their tables. A supervisor
    starts this while its drivers stop, so the final audit does not wait for it.
    """
    thread = threading.Thread(target=importlib.import_module, args=("pandas",), name="lab-audit-imports")
    thread.start()
    return thread


def start_topic_read(bootstrap: str, config) -> Future:
    """Read the run's topic (:func:`lab.kafka.tools.topic_copies`) on a thread started now, for :func:`final_audit`.

    For a run that has drained on a single broker: its producer is done and its
    plan has no fault left to come (:mod:`lab.run.end`), so no write reaches the
    topic after this read, and it holds what a read after the driver's stop would.
    (On a cluster, a follower held in the ISR can keep acknowledged records above
    the high watermark for seconds after the drain: the supervisor reads after
    the stop there.) A supervisor starts it while its driver stops (measured:
    the read took 0.29 s of a 3,000-event run's 0.4 s final audit, after a 0.6 s
    stop). The future holds the read's error when it fails, raised where
    :func:`final_audit` asks for the copies.
    """
    future: Future = Future()

    def read() -> None:
        try:
            future.set_result(_topic_copies(bootstrap, config))
        except BaseException as e:  # noqa: BLE001 - see the docstring
            future.set_exception(e)

    threading.Thread(target=read, name="lab-topic-read", daemon=True).start()
    return future


def _topic_copies(bootstrap: str, config) -> dict[str, list]:
    """Every event id's copies in the run's topic, read at the producer's isolation level."""
    return kafka_tools.topic_copies(bootstrap, config.topic, config.partitions,
                                    isolation_level=config.producer.isolation_level)


def final_audit(run_dir: Path, config, broker, positions: dict[int, int],
                topic_read: Future | None = None) -> tuple[Audit, dict]:
    """Read the topic, place offset-less acknowledgements, audit; return the audit and the source counts.

    ``broker`` is the run's :class:`lab.broker.embedded.BrokerInfo` (its product and version go into
    the counts as ``broker_version``). Sends of aborted transactions are looked for in a
    ``read_uncommitted`` read of the topic (``aborted_in_topic``): they are there, hidden
    from ``read_committed`` readers where the broker honours the isolation level. For the
    ``topic`` sink (kafka-eos) the audit is of the output topic read ``read_committed``, and
    the counts add both views of it (:meth:`lab.sinks.topic.TopicSink.view_counts`).
    ``topic_read``: the read :func:`start_topic_read` started, used instead of reading now.

    Delivery guarantee: none of its own; it reads and counts. An acknowledged
    send the topic does not hold, and that no sink row explains, is lost (see
    :mod:`lab.audit.auditor`).
    """
    bootstrap = broker.bootstrap
    copies = topic_read.result() if topic_read is not None else _topic_copies(bootstrap, config)
    # the broker's word on how far the group is now (lab.share.state.settled), and the consumers' delivery lines
    table = None
    if PIPELINES[config.pipeline].share_group:
        from lab.audit.deliveries import delivery_table, read_deliveries
        from lab.share.settings import group_name
        from lab.share.state import group_state

        start = group_state(bootstrap, group_name(run_dir.name))
        table = delivery_table(read_deliveries(run_dir))
        positions = {p: max(positions.get(p, 0), start.get(p, 0)) for p in positions.keys() | start.keys()}
    events = read_events(run_dir)  # the finished run's timeline, read once for every part below
    placed = place_acks(run_dir / LEDGER_FILE, {eid: (p, o) for eid, (_, p, o) in copies.items()})
    dead_letters = _dead_letters(run_dir, config, bootstrap, table) if config.kafka.dlq == "on" else None
    with open_sink(run_dir) as sink:
        audit = audit_of_run(run_dir, config, sink, positions, final=True, table=table,
                             moved=None if dead_letters is None else {(d.partition, d.offset) for d in dead_letters})
        views = {}
        if isinstance(sink, TopicSink):  # kafka-eos: audited read_committed; both views side by side, and kept
            views = sink.view_counts()
            if not sink.holds_windows:  # an update of a count is no event's copy: no latency per event
                first_fault = next((e["t"] for e in events if e["type"] == ev.FAULT), None)
                views["latency"] = topic_latency(sink, sends_frame(run_dir / LEDGER_FILE), first_fault)
            sink.save()
    audit.table.to_csv(run_dir / "audit.csv", index=False)
    dup = [c[0] for c in copies.values() if c[0] > 1]
    source = {"topic_records": sum(c[0] for c in copies.values()), "source_duplicates": len(dup),
              "source_extra_copies": sum(n - 1 for n in dup), "acks_without_offset": placed,
              "broker_version": ("external" if broker.external
                                 else " ".join(filter(None, (broker.product, broker.version)))),
              **views}
    source["topic"] = asdict(audit_topic(run_dir, run_dir / LEDGER_FILE, copies))
    # what its restarts replay, predicted from its timeline (lab.audit.flink_replay)
    if PIPELINES[config.pipeline].engine == "flink":
        from lab.audit.flink_replay import replay_report
        from lab.sinks.topic import output_topic

        source["flink_replays"] = replay_report(run_dir, events, bootstrap, output_topic(config.topic),
                                                config.partitions)
    if config.query == "key-count":  # the driver's changelog-backed counts per key (lab.sinks.changelog)
        from lab.sinks.changelog import changelog_report

        source["changelog"] = changelog_report(acked_per_key(run_dir / LEDGER_FILE), bootstrap, config.topic,
                                               events)
    if PIPELINES[config.pipeline].share_group:
        from lab.audit.deliveries import delivery_report
        from lab.share.settings import DELIVERY_LIMIT

        archived = audit.table.loc[audit.table["status"] == "archived", "seq"].tolist()
        source["deliveries"] = delivery_report(table, DELIVERY_LIMIT, start, events, archived, dead_letters)
    if audit.aborted_sends:
        everything = kafka_tools.topic_copies(
            bootstrap, config.topic, config.partitions, isolation_level="read_uncommitted")
        source["aborted_in_topic"] = sum(1 for eid in aborted_event_ids(run_dir / LEDGER_FILE) if eid in everything)
    epochs = transactions_in_log(config, broker)
    if epochs:
        source["transactions_in_log"] = epochs
    return audit, source


def transactions_in_log(config, broker) -> dict:
    """The run's transactions as the broker's log holds them, per topic written in transactions (the input with
    ``--transactional on``, a transactional pipeline's output) and producer id: transactions, the epochs their
    records were written under, and markers written one epoch up (:func:`lab.broker.log_files.log_epochs`).
    Empty for a run without transactions, or on a broker whose files are not on this machine."""
    from lab.broker.log_files import broker_data_dirs, log_epochs
    from lab.sinks.topic import output_topic

    topics = ([config.topic] if config.producer.transactional else []) + (
        [output_topic(config.topic)] if PIPELINES[config.pipeline].transactional_output else [])
    if not topics or getattr(broker, "external", True) or not getattr(broker, "log_dir", None):
        return {}
    dirs = broker_data_dirs(broker)
    return {topic: log_epochs(dirs, topic) for topic in topics}


def _dead_letters(run_dir: Path, config, bootstrap: str, table: dict) -> list:
    """The run's dead-letter records (``--dlq on``), once the topic holds every record the broker gave up on.

    The broker writes a record there after archiving it, on a thread of its own, so the group can be settled
    before the move is in the log. Each record the consumers saw delivered the limit's times and never written is
    waited for, up to :data:`DEAD_LETTER_WAIT_S`; what is not there then is counted archived, as the log says.
    """
    from lab.share.dlq import read_dead_letters
    from lab.share.settings import DELIVERY_LIMIT, group_name

    given_up = {(row["partition"], row["offset"]) for row in table.values()
                if row["highest"] >= DELIVERY_LIMIT and not row["written"]}
    deadline = time.monotonic() + DEAD_LETTER_WAIT_S
    while True:
        moved = read_dead_letters(bootstrap, config.topic, group_name(Path(run_dir).name))
        if given_up <= {(d.partition, d.offset) for d in moved} or time.monotonic() > deadline:
            return moved
        time.sleep(0.5)


def audit_of_run(run_dir: Path, config, sink, positions: dict[int, int], final: bool = False,
                 moved: set | None = None, table: dict | None = None) -> Audit:
    """The audit a run's query calls for: per event, or for a stateful query :func:`lab.audit.window.audit_stateful`.

    For the share pipeline ``positions`` are how far its group is settled (:func:`lab.share.state.settled`), and
    events its broker archived are counted apart (:mod:`lab.audit.deliveries`), as are those it moved to the
    group's dead-letter topic with ``--dlq on``: ``moved`` (``{(partition, offset)}``, read from the topic), or
    without it the timeline's ``moved-to-dlq`` events (a live audit's view). ``table``: the consumers' delivery
    lines (:func:`lab.audit.deliveries.delivery_table`) when the caller has read them already.
    """
    if config.query == "passthrough":
        archived = dead_lettered = None
        if PIPELINES[config.pipeline].share_group:
            from lab.audit.deliveries import archived_mask, dead_letter_mask, delivery_table, read_deliveries
            from lab.share.settings import DELIVERY_LIMIT

            if table is None:
                table = delivery_table(read_deliveries(run_dir))
            archived = lambda seq: archived_mask(seq, table, DELIVERY_LIMIT, positions)  # noqa: E731
            if config.kafka.dlq == "on":
                if moved is None:
                    moved = {(e["partition"], e["offset"]) for e in read_events(run_dir)
                             if e.get("type") == ev.DEAD_LETTERED}
                dead_lettered = lambda ledger: dead_letter_mask(ledger.partition, ledger.kafka_offset, moved)  # noqa: E731
        return audit_run(Path(run_dir) / LEDGER_FILE, sink, positions, final=final, archived=archived,
                         dead_lettered=dead_lettered)
    from lab.audit.window import audit_stateful

    return audit_stateful(Path(run_dir), config, sink, positions, final=final)


def versions() -> dict:
    """Versions that decide a run's behaviour, for the results table."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for pkg in ("pyspark", "kafka-python"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def audited_result(run_dir: Path, config, broker, positions: dict[int, int], topic_read: Future | None, *,
                   killed: bool, elapsed, times: dict, faults_fired: list, restarts: int, drained: bool, batches: int,
                   broker_features: dict | None) -> RunResult:
    """The run's end, once its last driver has stopped: the final audit, the result and ``report.json``.

    ``positions`` are the last driver's; ``killed``: it was killed after its grace, so the batches it had
    started count as in flight (:func:`in_flight_positions`). ``elapsed`` gives the run's seconds so far
    (``total_s`` is taken after the audit); ``times`` are the run's other timings.
    """
    timeline = read_events(run_dir)  # complete now: read once for the positions and the report
    if killed:
        positions = in_flight_positions(positions, timeline)
    audit, source = final_audit(run_dir, config, broker, positions, topic_read)
    times["total_s"] = elapsed()
    result = RunResult(config=config, run_dir=run_dir, audit=audit, timings={k: round(v, 3) for k, v in times.items()},
                       faults_fired=faults_fired, restarts=restarts, drained=drained, batches=batches)
    result.report = {**build_report(result, timeline), **source, "broker_features": broker_features}
    if "flink_replays" in source:  # lab.audit.shown: a restart that wrote nothing again shows no replay
        delivery = result.report["settings"].get("flink_delivery", "")
        result.report["could_not_show"] += nothing_replayed(source["flink_replays"], timeline, delivery)
        result.report["cautions"] += nothing_to_abort(source["flink_replays"], timeline, delivery)
    if PIPELINES[config.pipeline].engine == "samza":  # lab.audit.shown: a restart that sent nothing again
        result.report["could_not_show"] += resumed_at_the_output_end(timeline, audit.duplicated)
    (run_dir / "report.json").write_text(json.dumps(result.report, indent=2))
    return result


def build_report(result: RunResult, events: list[dict]) -> dict:
    """The run's JSON report (what ``lab run --json`` prints last)."""
    cfg = result.config
    settings = dict(cfg.settings)
    used = [e["reader"] for e in events if e["type"] == ev.KAFKA_READER]
    if used:
        # What the driver chose for "auto" (the last driver's, after restarts), next to what was asked.
        settings["kafka_reader"], settings["kafka_reader_asked"] = used[-1], cfg.spark.kafka_reader
    settings["producer_client"] = cfg.producer.producer_client  # which client sent the events the report counts
    final = [e for e in events if e["type"] == ev.FINAL_STOP]
    return {
        "pipeline": cfg.pipeline,
        "settings": settings,
        "faults": cfg.faults,
        "seed": cfg.seed,
        **result.audit.counts(),
        "restarts": result.restarts,
        "restart_s": [r.back_s for r in driver_restarts(events)],
        "batches": result.batches,
        "drained": result.drained,
        "final_stop": final[-1]["how"] if final else None,
        "faults_fired": result.faults_fired,
        "faults_not_applied": [e for e in events if e["type"] == ev.FAULT_NOT_APPLIED],
        # lab.audit.shown: the states in which this run shows nothing of its lesson, and what to read its counts with
        "could_not_show": could_not_show(events, batches_mark_output=PIPELINES[cfg.pipeline].batches_mark_output
                                         and not spark_trigger.parse_trigger(cfg.spark.trigger).real_time),
        "cautions": cautions(events, cfg.rate, cfg.faults),
        "run_dir": str(result.run_dir),
        "timings": result.timings,
        "versions": versions(),
    }
