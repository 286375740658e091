"""The Storm topology's classes: ``lab/storm/java`` compiled once into the cache (:mod:`lab.host.java_build`).

``lab fetch`` compiles it once, online; a run compiles it first when it is missing.
Delivery effect: none; the classes are the topology :mod:`lab.pipelines.storm` runs.
"""

from __future__ import annotations

from pathlib import Path

from lab.host.jar_sets import STORM_JARS
from lab.host.java_build import JavaSources

TOPOLOGY = JavaSources("storm", Path(__file__).resolve().parent / "java", STORM_JARS, "lab.storm.LabTopology")
