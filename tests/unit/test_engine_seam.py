"""One seam for a pipeline: the places every run passes through ask the registry and the engines, and loop.

None of them imports an engine's package or spells a pipeline's name; each engine's options group is a field
of :class:`lab.config.RunConfig` named as the engine; the core stays small.
"""

from __future__ import annotations

import ast
import dataclasses

from lab.config import GROUPS, RunConfig
from lab.engines.groups import ENGINES, EngineGroups
from lab.registry import PIPELINES
from tests.conftest import ROOT

#: The places a run passes through, and the one engine package each may import (its own).
PLACES = {"lab/config.py": None, "lab/spark/session.py": "lab.spark", "lab/faults/catalogue.py": None,
          "lab/sinks/spec.py": None, "lab/run/supervisor.py": None}
#: The engines' packages, and the pipelines' (a pipeline's driver).
ENGINE_PACKAGES = ("lab.spark", "lab.flink", "lab.storm", "lab.samza", "lab.share", "lab.kafka.eos_settings",
                   "lab.pipelines", *(f"lab.engines.{name}" for name in ENGINES))
#: Words a place may not spell as a string: each pipeline's name, and the engines' (``kafka`` aside: it is also
#: a sink backend's name, ``sink_backend: kafka``).
NAMES = set(PIPELINES) | (set(ENGINES) - {"kafka"})


def offences(source: str, own: str | None) -> list[str]:
    """What in ``source`` names an engine or a pipeline: an import of an engine's package (but ``own``), a
    string that is a pipeline's or an engine's name, or an engine's options group read by attribute."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            modules = []
        for m in modules:
            if any(m == p or m.startswith(p + ".") for p in ENGINE_PACKAGES) and not (own and m.startswith(own)):
                found.append(f"line {node.lineno}: imports {m}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES:
            found.append(f"line {node.lineno}: spells {node.value!r}")
        if isinstance(node, ast.Attribute) and node.attr in ENGINES:
            found.append(f"line {node.lineno}: reads .{node.attr}")
    return sorted(set(found))


def test_the_places_a_run_passes_through_name_no_engine_and_no_pipeline():
    for path, own in PLACES.items():
        assert offences((ROOT / path).read_text(), own) == [], path


def test_the_check_sees_an_import_a_name_and_a_group():
    source = ('from lab.storm import settings\nimport lab.pipelines.plain\nif cfg.pipeline == "structured":\n'
              '    x = cfg.flink.checkpointing\nfrom lab.spark.cluster import check_master\n')
    assert offences(source, None) == ["line 1: imports lab.storm", "line 1: imports lab.storm.settings",
                                      "line 2: imports lab.pipelines.plain", "line 3: spells 'structured'",
                                      "line 4: reads .flink", "line 5: imports lab.spark.cluster",
                                      "line 5: imports lab.spark.cluster.check_master"]
    assert offences("from lab.spark.daemon import X\n", "lab.spark") == []


def test_each_engine_has_its_group_named_as_it_and_flat_names_are_unique():
    assert [f.name for f in dataclasses.fields(EngineGroups)] == list(ENGINES)
    assert all(GROUPS[name] is engine.options for name, engine in ENGINES.items())
    flat = [f.name for cls in GROUPS.values() for f in dataclasses.fields(cls)]
    assert len(flat) == len(set(flat)) and not set(flat) & set(RunConfig.core_fields())
    assert {spec.engine for spec in PIPELINES.values()} <= set(ENGINES)


def test_the_core_of_a_run_config_is_under_twenty_fields():
    assert len(RunConfig.core_fields()) < 20, RunConfig.core_fields()


def test_config_json_names_every_setting_flat_and_round_trips():
    from lab.config import make_config

    cfg = make_config(pipeline="receiver", wal="off", nodes=3, late_fraction=0.1, query="window-count")
    import json

    data = json.loads(cfg.to_json())
    assert data["wal"] == "off" and data["nodes"] == 3 and data["late_fraction"] == 0.1 and "spark" not in data
    assert RunConfig.from_json(cfg.to_json()) == cfg
    assert cfg.with_options(wal="on").option("wal") == "on" and cfg.option("wal") == "off"
