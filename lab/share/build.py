"""The share group's state reader: ``lab/share/java`` compiled once into the cache (:mod:`lab.host.java_build`).

``LabShareState`` prints a share group's start offsets, lag and end offsets with Kafka's own Admin client
(``listShareGroupOffsets``): confluent-kafka's AdminClient, which the share consumers use, has no share-group calls.
Compiled against the broker's jar set (its ``kafka-clients``). ``lab fetch`` compiles it once, online; a run compiles it
first when it is missing. Delivery effect: none; it only reads.
"""

from __future__ import annotations

from pathlib import Path

from lab.host.jar_sets import KAFKA_JARS
from lab.host.java_build import JavaSources

STATE = JavaSources("share", Path(__file__).resolve().parent / "java", KAFKA_JARS, "lab.share.LabShareState")
