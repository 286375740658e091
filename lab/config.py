"""Run configuration: one frozen dataclass built from parameters and ``LAB_*`` variables.

Every setting that changes delivery semantics is explicit here (producer
``acks``, retries and idempotence; sink mode; the plain consumer's commit
order; checkpoint location, which is always inside the run directory), so no
library default decides an outcome.

Environment variables
---------------------
``LAB_KAFKA_BOOTSTRAP``  use this Kafka instead of the embedded broker.
``LAB_KAFKA_PROXY``      ``host:port``: the control port of a lab proxy (``python -m lab.broker.proxy``) that
                         ``LAB_KAFKA_BOOTSTRAP`` goes through, so ack-loss and broker-outage work
                         there too (ignored without ``LAB_KAFKA_BOOTSTRAP``: the embedded broker has its own).
``LAB_BROKER_NODES``     1 (default) or 3: Apache Kafka as a three-broker cluster (:mod:`lab.broker.cluster`).
``LAB_SINK_URL``         ``postgresql://...`` for a PostgreSQL sink (default: SQLite per run).
``LAB_SPARK_MASTER``     Spark master (default ``local[2]``).
``LAB_SPARK_UI``         1 or on: the Spark driver's web UI on 127.0.0.1 (:mod:`lab.spark.session`; default 0, off: it
                         costs a driver memory and CPU). Ignored for pipelines without Spark.
``LAB_KAFKA_READER``     the structured and direct pipelines' Kafka reader: auto, labkafka, spark (default auto).
``LAB_RUNS_DIR``         where run directories go (default ``runs/`` at the project root).
``LAB_RESTART_DELAY``    seconds between a driver crash and its restart (default 0.2).
``LAB_DEADLINE``         seconds without progress after which a run stops undrained (default 120).
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import asdict, dataclass, field, fields, replace

from lab.engines.groups import ENGINES, EngineGroups
from lab.errors import LabError, choices_error
from lab.faults.catalogue import ON_PAUSE, on_pause_mode
from lab.faults.plan import Fault, check_fault, check_plan, parse_fault_plan, unmet
from lab.host.env import env_runs_dir, number, one_of
from lab.kafka.producer_settings import ProducerSettings
from lab.queries import COUNT_QUERIES, QUERIES
from lab.registry import DEFAULT_BATCH_INTERVAL_S, DEFAULT_PIPELINE, PIPELINES, PipelineSpec
from lab.sinks.spec import SINK_MODES, TOPIC_MODE

#: The shortest batch interval: the receivers' block interval (``spark.streaming.blockInterval``).
MIN_BATCH_INTERVAL_S = 0.2

#: A batch's default record cap for runs up to ``SMALL_BATCH * BATCHES_PER_RUN`` events.
SMALL_BATCH = 500
#: Larger runs get ``events / BATCHES_PER_RUN`` records a batch by default.
BATCHES_PER_RUN = 20


def default_max_batch(events: int) -> int:
    """``--max-batch``'s default: 500 records, or a twentieth of the run's events when that is more.

    Small runs keep their few readable batches (3,000 events: batches of 500);
    a large one keeps up with its producer (measured: 200,000 events at full
    speed, with batches of 500 once a second, delivered 42,500 in 120 s; with
    10,000 it drains). A cap, not a size: a batch takes what has arrived, up to it.
    """
    return max(SMALL_BATCH, -(-int(events) // BATCHES_PER_RUN))


def _default_interval(pipeline: str) -> float:
    """``--batch-interval``'s default for ``pipeline`` (its registry entry; an unknown name is refused later)."""
    spec = PIPELINES.get(pipeline)
    return spec.default_interval_s if spec else DEFAULT_BATCH_INTERVAL_S


ON_OFF = ("on", "off")
ISOLATIONS = {
    "auto": "read_committed with a transactional producer, else read_uncommitted",
    "read_committed": "readers skip records of open and aborted transactions",
    "read_uncommitted": "readers get every record, aborted transactions' included",
}
#: A run's name: characters a Kafka topic name allows (the run's topic ends with it).
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")
#: Eligible leader replicas (KIP-966) for the run's broker: left as it is, or finalized on or off before the run.
ELR = {
    "broker": "as the broker has it (Apache Kafka 4.4.0 formats a new cluster with it on, measured)",
    "on": "eligible.leader.replicas.version=1, set on the broker before the run (cluster-wide; it stays set)",
    "off": "eligible.leader.replicas.version=0, set on the broker before the run (cluster-wide; it stays set)",
}

#: ``host:port`` of a proxy's control port: a host name, an IPv4 address or a bracketed IPv6 one.
_HOST_PORT = re.compile(r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$")


@dataclass(frozen=True)
class ClusterSettings:
    """The run's Kafka: the embedded broker or one's own, how many nodes, and the topic settings a cluster is given."""

    kafka_bootstrap: str | None = None
    kafka_proxy: str | None = None
    nodes: int = 1
    min_insync: int = 1
    unclean: str = "off"
    elr: str = "broker"


@dataclass(frozen=True)
class EventTime:
    """What a stateful query's windows, sessions and watermark are, and how late the producer's late events come."""

    window_s: float = 10.0
    session_gap_s: float = 0.5
    watermark_s: float = 10.0
    late_fraction: float = 0.0
    late_by_s: float = 60.0


#: The groups of a :class:`RunConfig` other than the producer's (given flat, e.g. ``wal=``), by field name.
GROUPS: dict[str, type] = {"cluster": ClusterSettings, "event_time": EventTime,
                           **{name: engine.options for name, engine in ENGINES.items()}}
#: Each flat parameter of a group, and its group.
GROUP_OF: dict[str, str] = {f.name: group for group, cls in GROUPS.items() for f in fields(cls)}
#: The producer's settings, given flat as parameters (``acks=``).
PRODUCER_KEYS = frozenset(f.name for f in fields(ProducerSettings))
#: What the engines' settings decide of the faults and named points (:data:`lab.engines.hooks.Engine.requirements`).
REQUIREMENTS: dict = {name: requires for engine in ENGINES.values() for name, requires in engine.requirements.items()}


@dataclass(frozen=True)
class RunConfig(EngineGroups):
    """Everything one scenario run needs: its core settings, and groups (the producer's, the cluster's, event
    time's and one per engine, :class:`lab.engines.groups.EngineGroups`).

    Build it with :func:`make_config`, which validates and fills ``LAB_*``
    environment variables; the constructor alone does not validate. Parameters,
    ``config.json`` and a report's settings name every setting flat (``wal``, not
    ``spark.wal``): :meth:`of`, :meth:`option` and :meth:`with_options` translate.
    """

    pipeline: str = DEFAULT_PIPELINE
    sink: str = "append"
    query: str = "passthrough"
    events: int = 3000
    rate: float = 1000.0
    partitions: int = 3
    faults: str = ""
    seed: int = 1
    name: str = ""
    topic: str = "events"
    batch_interval_s: float = DEFAULT_BATCH_INTERVAL_S  # flink: 1 s (make_config: the registry's default_interval_s)
    max_batch_records: int = 500
    restart_delay_s: float = 0.2
    deadline_s: float = 120.0
    sink_url: str | None = None
    isolation: str = "auto"
    on_pause: str = "auto"
    backlog: bool = False
    runs_dir: str = "runs"
    producer: ProducerSettings = field(default_factory=ProducerSettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    event_time: EventTime = field(default_factory=EventTime)

    @classmethod
    @functools.cache
    def core_fields(cls) -> tuple[str, ...]:
        """The fields that are not a group (read for every setting a report states: worked out once)."""
        groups = {"producer", *GROUPS}
        return tuple(f.name for f in fields(cls) if f.name not in groups)

    @classmethod
    def of(cls, **params) -> RunConfig:
        """A config from flat parameters (``wal="off"``, not ``spark=...``), unvalidated; ``producer`` as a group."""
        grouped: dict[str, dict] = {group: {} for group in GROUPS}
        core = {}
        for key, value in params.items():
            if key in GROUP_OF:
                grouped[GROUP_OF[key]][key] = value
            else:
                core[key] = value
        return cls(**core, **{group: GROUPS[group](**values) for group, values in grouped.items()})

    @classmethod
    def is_setting(cls, name: str) -> bool:
        """Whether ``name`` is a setting's flat name (a core field, a group's field, or the producer's)."""
        return name in GROUP_OF or name in cls.core_fields() or name in PRODUCER_KEYS

    def option(self, name: str):
        """A setting by its flat name (``config.option("wal")`` is ``config.spark.wal``; ``acks`` the producer's)."""
        if name in GROUP_OF:
            return getattr(getattr(self, GROUP_OF[name]), name)
        if name in self.core_fields():
            return getattr(self, name)
        return getattr(self.producer, name)

    def with_options(self, **flat) -> RunConfig:
        """This config with settings changed by their flat names."""
        core = {k: v for k, v in flat.items() if k not in GROUP_OF}
        groups = {}
        for key, value in flat.items():
            if key in GROUP_OF:
                group = GROUP_OF[key]
                groups[group] = replace(groups.get(group, getattr(self, group)), **{key: value})
        return replace(self, **core, **groups)

    def flat(self) -> dict:
        """Every setting by its flat name, the producer's as a group (``config.json``'s shape)."""
        out = {name: getattr(self, name) for name in self.core_fields()}
        for group in GROUPS:
            out.update(asdict(getattr(self, group)))
        out["producer"] = asdict(self.producer)
        return out

    @property
    def spec(self) -> PipelineSpec:
        """The pipeline's registry entry."""
        return PIPELINES[self.pipeline]

    @property
    def fault_plan(self) -> tuple[Fault, ...]:
        return parse_fault_plan(self.faults)

    @property
    def isolation_level(self) -> str:
        """What the pipeline's readers use: ``--isolation``, or for ``auto`` what the producer needs.

        ``auto``: transactional output is only final once committed, so
        ``read_committed``; otherwise ``read_uncommitted`` (Kafka's default, stated). A pipeline whose output is
        transactional (its registry entry) always reads ``read_committed``.
        """
        if self.isolation == "auto" and self.spec.transactional_output:
            return "read_committed"
        return self.producer.isolation_level if self.isolation == "auto" else self.isolation

    @property
    def settings(self) -> dict:
        """The semantic settings a report lists next to the counts."""
        spec = self.spec
        stated = {}
        for engine in ENGINES.values():
            stated.update(engine.stated(self, spec))
        return {
            "sink": self.sink,
            "partitions": self.partitions,
            "events": self.events,
            "rate": self.rate,
            "acks": self.producer.acks,
            "retries": self.producer.retries,
            "idempotence": self.producer.idempotence,
            "transactional": self.producer.transactional,
            "isolation": self.isolation_level,
            **{opt: self.option(opt) for opt in spec.options},
            "broker": "external" if self.cluster.kafka_bootstrap else "embedded",
            "sink_backend": ("files" if self.sink == "files" else "kafka" if self.sink == TOPIC_MODE
                             else "postgresql" if self.sink_url else "sqlite"),
            **self.query_settings,
            **self.replication_settings,
            **({"elr": self.cluster.elr} if self.cluster.elr != "broker" else {}),
            **({"backlog": True} if self.backlog else {}),
            **stated,
            # What a pause leads to decides what it costs; stated only when one is planned.
            **({"on_pause": self.on_pause} if any(f.kind == "driver-pause" for f in self.fault_plan) else {}),
        }

    @property
    def replication_settings(self) -> dict:
        """For a cluster (``--nodes 3``): the run topic's replication factor and the settings it is created with."""
        c = self.cluster
        if c.nodes == 1:
            return {}
        return {"nodes": c.nodes, "replication_factor": c.nodes, "min_insync": c.min_insync, "unclean": c.unclean}

    @property
    def topic_configs(self) -> dict:
        """Kafka topic configs the run's topic is created with (set explicitly on a cluster, never left to the
        broker)."""
        c = self.cluster
        if c.nodes == 1:
            return {}
        return {"min.insync.replicas": str(c.min_insync),
                "unclean.leader.election.enable": "true" if c.unclean == "on" else "false"}

    @property
    def query_settings(self) -> dict:
        """The query and, for a stateful one, what decides its state and its late events."""
        t = self.event_time
        out = {"query": self.query}
        if self.query != "passthrough":
            if self.spec.running_counts:  # running counts per key: no window, no watermark
                return out
            # The Kafka sink's dedupe has no watermark (lab.pipelines.structured.kafka_sink.first_copies).
            out.update(window_s=t.window_s if self.query == "window-count" else None,
                       watermark_s=None if self.sink == TOPIC_MODE else t.watermark_s,
                       state_store=self.option("state_store"))
            if self.query == "session-count":
                out.update(session_gap_s=t.session_gap_s)
        if t.late_fraction:
            out.update(late_fraction=t.late_fraction, late_by_s=t.late_by_s)
        return out

    def to_json(self) -> str:
        return json.dumps(self.flat(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        data = json.loads(text)
        producer = ProducerSettings(**data.pop("producer", {}))
        known = set(cls.core_fields()) | set(GROUP_OF)
        return cls.of(**{k: v for k, v in data.items() if k in known}, producer=producer)

    def why_not(self, name: str) -> str | None:
        """Why this run's settings cannot carry out the fault kind or named point ``name``, or ``None`` when they can
        (the catalogue's needs, and the engines': :data:`REQUIREMENTS`)."""
        return unmet(name, self, REQUIREMENTS)

    def check_fault(self, fault: Fault) -> None:
        """Raise :class:`LabError` when this run cannot carry out ``fault`` (:func:`lab.faults.plan.check_fault`)."""
        check_fault(fault, self, self.spec, PIPELINES, REQUIREMENTS)

    def validate(self) -> None:
        """Raise :class:`LabError` naming the first bad value and the valid choices."""
        spec = PIPELINES.get(self.pipeline)
        if spec is None:
            raise choices_error("pipeline", self.pipeline, PIPELINES)
        if not RUN_NAME.fullmatch(self.name or "x"):
            # It names the run directory, the run's topic and its Storm topology and Samza job.
            raise LabError(f"run name {self.name!r}: valid are 1 to 101 letters, digits, '.', '_' and '-', "
                           "starting with a letter or digit")
        if self.sink not in SINK_MODES:
            raise choices_error("sink", self.sink, SINK_MODES)
        if spec.topic_sink == "only" and self.sink != TOPIC_MODE:
            raise LabError(f"sink {self.sink!r} is not valid for pipeline {self.pipeline!r}, which writes its output "
                           f"topic (<topic>.out); valid choices: {TOPIC_MODE}")
        if self.sink == TOPIC_MODE and spec.topic_sink == "no":
            raise LabError(f"sink {TOPIC_MODE!r} is a pipeline's output topic; valid pipelines for it: "
                           f"{', '.join(n for n, p in PIPELINES.items() if p.topic_sink != 'no')}")
        if self.sink == "files" and not spec.files_sink:
            raise LabError(f"sink 'files' is Spark's file sink; valid pipelines for it: "
                           f"{', '.join(n for n, p in PIPELINES.items() if p.files_sink)}")
        if self.on_pause not in ON_PAUSE:
            raise choices_error("on-pause", self.on_pause, ON_PAUSE)
        self._validate_cluster()
        if self.isolation not in ISOLATIONS:
            raise choices_error("isolation level", self.isolation, ISOLATIONS)
        if spec.transactional_output and self.isolation == "read_uncommitted":
            raise LabError(f"pipeline {self.pipeline!r} reads read_committed (its exactly-once needs it); "
                           "valid isolation for it: auto, read_committed")
        for engine in ENGINES.values():
            if not engine.after_query:
                engine.check(self, spec, PIPELINES)
        self._validate_query(spec)
        for engine in ENGINES.values():
            if engine.after_query:
                engine.check(self, spec, PIPELINES)
        self._validate_replication()
        if self.backlog and spec.ready_when_running:
            raise LabError(f"--backlog: the {self.pipeline} pipeline's producer starts once its job runs, so its "
                           "driver cannot wait for the producer; valid with: "
                           + ", ".join(n for n, p in PIPELINES.items() if not p.ready_when_running))
        if self.events < 1:
            raise LabError(f"events must be >= 1, got {self.events}")
        if self.rate < 0:
            raise LabError(f"rate must be >= 0 events/s (0 = as fast as possible), got {self.rate}")
        if not 1 <= self.partitions <= 64:
            raise LabError(f"partitions must be between 1 and 64, got {self.partitions}")
        if self.max_batch_records < 1:
            raise LabError(f"max_batch_records must be >= 1, got {self.max_batch_records}")
        if not self.batch_interval_s >= MIN_BATCH_INTERVAL_S:  # NaN too
            raise LabError(f"batch interval (--batch-interval, batch_interval_s) {self.batch_interval_s:g} s is below "
                           f"{MIN_BATCH_INTERVAL_S:g} s; valid: {MIN_BATCH_INTERVAL_S:g} s or more "
                           "(a receiver stores a block every 200 ms)")
        if self.deadline_s <= 0 or self.restart_delay_s < 0:
            raise LabError("deadline must be > 0 s and restart delay >= 0 s")
        if self.cluster.kafka_proxy:
            check_proxy_address(self.cluster.kafka_proxy)
        if self.sink_url and not self.sink_url.startswith(("postgresql://", "postgres://")):
            raise LabError(f"bad LAB_SINK_URL {self.sink_url!r}; valid: postgresql://user@host:port/db (unset for "
                           "SQLite)")
        self.producer.validate()
        check_plan(self.fault_plan, self, spec, PIPELINES, REQUIREMENTS)

    def _validate_cluster(self) -> None:
        c = self.cluster
        if c.elr not in ELR:
            raise choices_error("elr", c.elr, ELR)
        if c.elr != "broker" and c.kafka_bootstrap:
            raise LabError(f"--elr {c.elr} finalizes a feature of the lab's own Apache Kafka; this run's broker is "
                           "LAB_KAFKA_BOOTSTRAP: unset it, or use --elr broker")

    def _validate_replication(self) -> None:
        c = self.cluster
        counts = _node_counts()
        if isinstance(c.nodes, bool) or c.nodes not in counts:
            raise choices_error("number of broker nodes", c.nodes, tuple(map(str, counts)))
        if c.unclean not in ON_OFF:
            raise choices_error("unclean leader election setting", c.unclean, ON_OFF)
        if c.nodes == 1:
            if c.min_insync != 1 or c.unclean != "off":
                raise LabError(f"--min-insync and --unclean are replication settings: they need --nodes 3 "
                               f"(this run: --nodes 1, --min-insync {c.min_insync}, --unclean {c.unclean})")
            return
        if c.kafka_bootstrap:
            raise LabError("--nodes 3 starts the lab's own Apache Kafka cluster: unset LAB_KAFKA_BOOTSTRAP")
        if not 1 <= c.min_insync <= c.nodes:
            raise LabError(f"--min-insync {c.min_insync} is not possible with {c.nodes} replicas; "
                           f"valid: 1 to {c.nodes}")

    def _validate_query(self, spec: PipelineSpec) -> None:
        t = self.event_time
        if self.query not in QUERIES:
            raise choices_error("query", self.query, QUERIES)
        if spec.queries is not None and self.query not in spec.queries:
            raise LabError(f"pipeline {self.pipeline!r} runs --query {', '.join(spec.queries)}, not {self.query!r}")
        if self.query != "passthrough" and self.query not in spec.stateful_queries:
            runs_it = [n for n, p in PIPELINES.items() if self.query in p.stateful_queries]
            raise LabError(f"--query {self.query} runs on the {', '.join(runs_it)} pipeline, not {self.pipeline!r}")
        if self.query == "session-count" and self.sink == TOPIC_MODE:
            # Spark's Kafka sink gets events, the first of each, or window counts (lab.pipelines.structured.kafka_sink).
            raise LabError(f"--sink topic runs --query passthrough, dedupe or window-count, not {self.query!r}: use "
                           "--sink append, idempotent or transactional")
        if self.query in COUNT_QUERIES and self.sink == "files":
            raise LabError(f"--query {self.query} writes counts to a database sink: use --sink append, idempotent "
                           "or transactional, not files")
        if self.query == "session-count":
            if t.late_fraction:
                # Late events reach a key out of event-time order; the ledger's sessions assume its order.
                raise LabError("--query session-count runs without --late-fraction (its sessions follow each key's "
                               "events in event-time order)")
            if not t.session_gap_s >= 0.001:
                raise LabError(f"--session-gap must be >= 0.001 s, got {t.session_gap_s:g}")
        if not t.window_s >= 0.001 or not t.watermark_s >= 0:
            raise LabError(f"window must be >= 0.001 s and watermark >= 0 s, got {t.window_s:g} and {t.watermark_s:g}")
        if not 0 <= t.late_fraction <= 1:
            raise LabError(f"late_fraction must be between 0 and 1, got {t.late_fraction:g}")
        if t.late_by_s < 0:
            raise LabError(f"late_by must be >= 0 s, got {t.late_by_s:g}")


def check_proxy_address(value: str) -> None:
    """Raise :class:`LabError` unless ``value`` is ``host:port`` with a port in 1..65535 (``LAB_KAFKA_PROXY``)."""
    m = _HOST_PORT.match(value or "")
    if not m or not 0 < int(m.group(1)) < 65536:
        raise LabError(f"bad LAB_KAFKA_PROXY {value!r}; valid form: host:port with a port in 1..65535, the control "
                       "port of a lab proxy in front of LAB_KAFKA_BOOTSTRAP (e.g. kafka-proxy:19093)")


def _node_counts() -> tuple[int, ...]:
    """:data:`lab.broker.cluster.NODE_COUNTS`, imported only when asked: every driver and Python worker daemon
    imports this module, and the cluster module brings the broker modules (0.1 s of imports)."""
    from lab.broker.cluster import NODE_COUNTS

    return NODE_COUNTS


def make_config(**params) -> RunConfig:
    """Build and validate a :class:`RunConfig` from parameters and ``LAB_*`` variables.

    Parameters
    ----------
    **params
        Any setting by its flat name (a core field of :class:`RunConfig`, or a field of one of its groups:
        ``wal=``, ``nodes=``); producer settings flat too (``acks=``, ``retries=``, ``idempotence=``).
        Parameters win over environment variables.

    Raises
    ------
    LabError
        On an unknown parameter or a bad value.
    """
    known = {f.name for f in fields(RunConfig) if f.name not in GROUPS} | set(GROUP_OF)
    producer_params = {k: params.pop(k) for k in list(params) if k in PRODUCER_KEYS}
    unknown = set(params) - known
    if unknown:
        raise choices_error("parameter", sorted(unknown)[0], known | PRODUCER_KEYS)
    if "acks" in producer_params:
        producer_params["acks"] = str(producer_params["acks"])
    base = dict(
        kafka_bootstrap=os.environ.get("LAB_KAFKA_BOOTSTRAP") or None,
        kafka_proxy=os.environ.get("LAB_KAFKA_PROXY") or None,
        sink_url=os.environ.get("LAB_SINK_URL") or None,
        nodes=int(one_of(os.environ, "LAB_BROKER_NODES", "1", tuple(map(str, _node_counts())))),
        runs_dir=env_runs_dir(),
        restart_delay_s=number(os.environ, "LAB_RESTART_DELAY", 0.2),
        deadline_s=number(os.environ, "LAB_DEADLINE", 120.0),
    )
    for engine in ENGINES.values():
        base.update(engine.environment())
    base.update({k: v for k, v in params.items() if v is not None})
    spec = PIPELINES.get(base.get("pipeline"))
    if params.get("sink") is None and spec is not None and spec.topic_sink == "only":
        base["sink"] = TOPIC_MODE  # the only sink it writes: --sink need not be given
    if params.get("query") is None and spec is not None and spec.queries:
        base["query"] = spec.queries[0]  # it runs only these: --query need not be given
    base.setdefault("partitions", RunConfig.partitions)  # a real-time run's master follows it (lab.engines.spark)
    for engine in ENGINES.values():
        engine.defaults(base, params, spec)
    if params.get("batch_interval_s") is None:
        base["batch_interval_s"] = _default_interval(base.get("pipeline", RunConfig.pipeline))
    if params.get("max_batch_records") is None:
        base["max_batch_records"] = default_max_batch(base.get("events", RunConfig.events))
    config = RunConfig.of(**base, producer=ProducerSettings(**producer_params))
    if not config.name:
        config = replace(config, name=f"{config.pipeline}-{config.sink}")
    if config.cluster.kafka_proxy and not config.cluster.kafka_bootstrap:
        # It names the proxy in front of LAB_KAFKA_BOOTSTRAP; the embedded broker brings its own. A typo
        # is still reported, and config.json does not claim a proxy the run never talks to.
        check_proxy_address(config.cluster.kafka_proxy)
        config = config.with_options(kafka_proxy=None)
    if spec is not None:
        if config.on_pause == "auto":
            config = replace(config, on_pause=on_pause_mode(config, spec))  # config.json states what a pause does
        for engine in ENGINES.values():
            config = config.with_options(**engine.resolve(config, spec, params))  # config.json states what auto became
    config.validate()
    return config
