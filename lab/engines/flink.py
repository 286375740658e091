"""Apache Flink's pipeline: its options group (barriers, the KafkaSink's guarantee, a slow sink), checks,
environment."""

from __future__ import annotations

from dataclasses import dataclass

from lab.engines.hooks import Engine
from lab.flink import settings as flink_settings


@dataclass(frozen=True)
class FlinkOptions:
    """Flink's settings that change semantics (every run has them; only the flink pipeline changes them)."""

    checkpointing: str = "aligned"
    flink_delivery: str = "auto"
    slow_sink: bool = False


def resolve(cfg, spec, params) -> dict:
    if (spec.engine == ENGINE.name and cfg.flink.flink_delivery == "auto"
            and cfg.flink.checkpointing in flink_settings.CHECKPOINTING):
        return {"flink_delivery": flink_settings.delivery(cfg)}  # config.json states the sink's guarantee
    return {}


def prepare(cfg, spec, write_event) -> None:
    from lab.flink import env as flink_env

    flink_env.check_ready()  # the flink pipeline's environment and connector: built by `make flink`, never here


ENGINE = Engine(name="flink", words="Apache Flink", options=FlinkOptions,
                check=lambda cfg, spec, pipelines: flink_settings.check(cfg, spec.engine == ENGINE.name),
                after_query=True, resolve=resolve, prepare=prepare)
