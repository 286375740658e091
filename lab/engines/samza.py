"""Apache Samza's pipeline: its options group (the store's cache), checks, the compiled job."""

from __future__ import annotations

from dataclasses import dataclass

from lab.engines.hooks import Engine
from lab.samza import settings as samza_settings


@dataclass(frozen=True)
class SamzaOptions:
    """Samza's settings that change semantics (every run has them; only the samza pipeline changes them)."""

    samza_store_cache: str = "off"


def prepare(cfg, spec, write_event) -> None:
    from lab.samza.build import JOB

    # Fetched and compiled once (`lab fetch` does it online); here only when missing, before any process starts.
    JOB.ensure()


ENGINE = Engine(name="samza", words="Apache Samza", options=SamzaOptions,
                check=lambda cfg, spec, pipelines: samza_settings.check(cfg, spec.engine == ENGINE.name),
                after_query=True, prepare=prepare)
