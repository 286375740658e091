"""The engines' options groups as one base of :class:`lab.config.RunConfig`: a field per engine, named as it."""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.engines import flink, kafka, samza, spark, storm
from lab.engines.hooks import Engine

#: Every engine's hooks, by the registry's ``engine`` value (:attr:`lab.registry.PipelineSpec.engine`).
ENGINES: dict[str, Engine] = {e.name: e for e in (kafka.ENGINE, spark.ENGINE, flink.ENGINE, storm.ENGINE,
                                                  samza.ENGINE)}


@dataclass(frozen=True)
class EngineGroups:
    """One frozen options group per engine; every run has each, with its defaults unless its engine's pipeline
    changed them (each engine's ``check`` refuses a change for a pipeline of another)."""

    kafka: kafka.KafkaOptions = field(default_factory=kafka.KafkaOptions)
    spark: spark.SparkOptions = field(default_factory=spark.SparkOptions)
    flink: flink.FlinkOptions = field(default_factory=flink.FlinkOptions)
    storm: storm.StormOptions = field(default_factory=storm.StormOptions)
    samza: samza.SamzaOptions = field(default_factory=samza.SamzaOptions)
