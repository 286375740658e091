"""The Samza job's classes: ``lab/samza/java`` compiled once into the cache (:mod:`lab.host.java_build`).

``lab fetch`` compiles it once, online; a run compiles it first when it is missing.
Delivery effect: none; the classes are the job :mod:`lab.pipelines.samza` runs.
"""

from __future__ import annotations

from pathlib import Path

from lab.host.jar_sets import SAMZA_JARS
from lab.host.java_build import JavaSources

JOB = JavaSources("samza", Path(__file__).resolve().parent / "java", SAMZA_JARS, "lab.samza.LabSamza")
