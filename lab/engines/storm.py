"""Apache Storm's pipeline: its options group (no acker, acked tuple trees, Trident), checks, ZooKeeper."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass

from lab.engines.hooks import Engine
from lab.host.atomic_file import write_atomic
from lab.storm import settings as storm_settings


@dataclass(frozen=True)
class StormOptions:
    """Storm's settings that change semantics (every run has them; only the storm pipeline changes them)."""

    storm_mode: str = "acked"


def defaults(base: dict, params: dict, spec) -> None:
    if params.get("sink") is None and spec is not None and spec.engine == ENGINE.name:
        base["sink"] = storm_settings.default_sink(base.get("storm_mode", StormOptions.storm_mode))


def _needs_acked_storm(cfg) -> str | None:
    # Only the acker replays a failed tuple: without it (unacked) fail() does nothing, and Trident replays
    # whole batches, never a tuple.
    if cfg.storm.storm_mode == "acked":
        return None
    return ("fault 'bolt-fail' fails tuples to the acker: it needs --storm-mode acked (this run: "
            f"{cfg.storm.storm_mode})")


def prepare(cfg, spec, write_event) -> None:
    from lab.storm.build import TOPOLOGY

    # Fetched and compiled once (`lab fetch` does it online); here only when missing, before any process starts.
    TOPOLOGY.ensure()


@contextmanager
def services(cfg, run_dir, write_event):
    """Storm's ZooKeeper, from before the first driver to the run's end: the state Storm keeps there outlives
    crashes."""
    from lab import events as ev
    from lab.storm import zookeeper

    with zookeeper.ZooKeeper(run_dir) as zk:
        write_atomic(run_dir / zookeeper.INFO_FILE, json.dumps(zk.to_dict(), indent=2))
        write_event(ev.ZOOKEEPER, **zk.to_dict())
        yield zk


ENGINE = Engine(name="storm", words="Apache Storm", options=StormOptions,
                check=lambda cfg, spec, pipelines: storm_settings.check(cfg, spec.engine == ENGINE.name),
                after_query=True, defaults=defaults, requirements={"bolt-fail": _needs_acked_storm},
                prepare=prepare, services=services)
