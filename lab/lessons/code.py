"""The code that really runs, shown in a notebook: lesson regions of the pipeline modules, and the docs they illustrate.

A lesson region is a run of lines in a module of :mod:`lab` between two
comments, ``# lesson: <name>`` and ``# end lesson: <name>``. The notebooks show
these lines as they are on disk, so what a learner reads is what the driver
executes, never a retyped copy. :func:`lesson` finds a region (and raises when a
notebook names one that does not exist, which a unit test checks for every
notebook); :data:`DOCS` holds the links to the guides each region illustrates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError, choices_error

PACKAGE = Path(__file__).resolve().parent.parent

#: The modules that hold lesson regions, by import name (a renamed module fails :func:`lessons` at once).
LESSON_MODULES = ("lab.pipelines.structured.pipeline", "lab.pipelines.structured.kafka_input",
                  "lab.pipelines.receiver.pipeline", "lab.pipelines.direct", "lab.pipelines.structured.stateful",
                  "lab.pipelines.kafka_eos", "lab.sinks.database", "lab.run.producer", "lab.flink.job",
                  "lab.pipelines.share_consumer", "lab.pipelines.structured.kafka_sink", "lab.spark.state_reader",
                  "lab.pipelines.structured.sessions")


def _module_file(module: str) -> str:
    """``module``'s source path relative to the project root (``lab/...``), found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise LabError(f"lesson module {module!r} does not exist; the lesson modules: {', '.join(LESSON_MODULES)}")
    return Path(spec.origin).resolve().relative_to(PACKAGE.parent).as_posix()

_BEGIN = re.compile(r"^\s*# lesson: (?P<name>[a-z0-9-]+)\s*$")
_END = "# end lesson: {name}"


def spark_docs(page: str) -> str:
    """A page of the Spark documentation for the installed PySpark's version (``page`` may carry an ``#anchor``)."""
    try:
        from importlib.metadata import version

        v = version("pyspark")
    except Exception:  # no PySpark: the links still work, at the newest release
        v = "latest"
    return f"https://spark.apache.org/docs/{v}/{page}"


#: The guides each lesson illustrates: name -> [(title, url or a spark_docs page)].
DOCS = {
    "receiver-wal": [("Spark Streaming guide: Fault-tolerance Semantics",
                      "spark:streaming-programming-guide.html#fault-tolerance-semantics"),
                     ("Spark Streaming guide: Deploying Applications (write-ahead logs)",
                      "spark:streaming-programming-guide.html#deploying-applications")],
    "direct-ranges": [("Spark Streaming + Kafka Integration Guide",
                       "spark:streaming-kafka-0-10-integration.html#storing-offsets"),
                      ("Exactly-once Spark Streaming from Apache Kafka (Cloudera, 2015)", "http://blog.cloudera.com/blog/2015/03/exactly-once-spark-streaming-from-apache-kafka/")],
    "structured-query": [("Structured Streaming guide: Fault Tolerance Semantics",
                          "spark:streaming/getting-started.html#fault-tolerance-semantics"),
                         ("Structured Streaming guide: foreach and foreachBatch",
                          "spark:streaming/apis-on-dataframes-and-datasets.html#using-foreach-and-foreachbatch"),
                         ("Structured Streaming + Kafka Integration Guide",
                          "spark:streaming/structured-streaming-kafka-integration.html")],
    "share-consumer": [("Kafka: Share groups", "https://kafka.apache.org/44/documentation/#sharegroups"),
                       ("KIP-932: Queues for Kafka", "https://cwiki.apache.org/confluence/display/KAFKA/KIP-932%3A+Queues+for+Kafka")],
    "kafka-source": [("Structured Streaming + Kafka Integration Guide",
                      "spark:streaming/structured-streaming-kafka-integration.html")],
    "transactional-sink": [("Structured Streaming guide: foreach and foreachBatch",
                            "spark:streaming/apis-on-dataframes-and-datasets.html#using-foreach-and-foreachbatch")],
    "stateful-query": [("Structured Streaming guide: Window Operations on Event Time",
                        "spark:streaming/apis-on-dataframes-and-datasets.html#window-operations-on-event-time"),
                       ("Structured Streaming guide: Streaming Deduplication",
                        "spark:streaming/apis-on-dataframes-and-datasets.html#streaming-deduplication")],
    "session-count": [("Structured Streaming guide: transformWithState",
                       "spark:streaming/structured-streaming-transform-with-state.html"),
                      ("Structured Streaming guide: State Data Source",
                       "spark:streaming/structured-streaming-state-data-source.html")],
    "producer-settings": [("Kafka producer configs: enable.idempotence, acks, transactional.id", "https://kafka.apache.org/documentation/#producerconfigs"),
                          ("KIP-98: Exactly Once Delivery and Transactional Messaging", "https://cwiki.apache.org/confluence/display/KAFKA/KIP-98+-+Exactly+Once+Delivery+and+Transactional+Messaging")],
    "kafka-eos": [("KIP-98: Exactly Once Delivery and Transactional Messaging", "https://cwiki.apache.org/confluence/display/KAFKA/KIP-98+-+Exactly+Once+Delivery+and+Transactional+Messaging"),
                  ("KIP-447: Producer scalability for exactly once semantics", "https://cwiki.apache.org/confluence/display/KAFKA/KIP-447%3A+Producer+scalability+for+exactly+once+semantics"),
                  ("Flink: checkpointing and exactly-once", "https://nightlies.apache.org/flink/flink-docs-stable/docs/concepts/stateful-stream-processing/")],
    "flink-job": [("Flink: Stateful Stream Processing (checkpoints, barriers, alignment)", "https://nightlies.apache.org/flink/flink-docs-release-2.2/docs/concepts/stateful-stream-processing/"),
                  ("Flink: Checkpointing under back pressure (unaligned checkpoints)", "https://nightlies.apache.org/flink/flink-docs-release-2.2/docs/ops/state/checkpointing_under_backpressure/"),
                  ("Flink Kafka connector: KafkaSink fault tolerance", "https://nightlies.apache.org/flink/flink-docs-release-2.2/docs/connectors/datastream/kafka/#fault-tolerance")],
    "flink-sink": [("Flink Kafka connector: Kafka Sink (delivery guarantees)", "https://nightlies.apache.org/flink/flink-docs-release-2.2/docs/connectors/datastream/kafka/#kafka-sink"),
                   ("KIP-98: Exactly Once Delivery and Transactional Messaging", "https://cwiki.apache.org/confluence/display/KAFKA/KIP-98+-+Exactly+Once+Delivery+and+Transactional+Messaging")],
}


@dataclass(frozen=True)
class Lesson:
    """A lesson region: its file (relative to the project), first line number, and text (dedented)."""

    name: str
    path: str
    first_line: int
    text: str

    @property
    def links(self) -> list[tuple[str, str]]:
        return [(title, spark_docs(url[6:]) if url.startswith("spark:") else url)
                for title, url in DOCS.get(self.name, [])]


def lessons() -> dict[str, Lesson]:
    """Every lesson region in :data:`LESSON_MODULES`, by name.

    Raises
    ------
    LabError
        A region that is never closed, or a name used twice.
    """
    import textwrap

    found: dict[str, Lesson] = {}
    for rel in map(_module_file, LESSON_MODULES):
        lines = (PACKAGE.parent / rel).read_text().splitlines()
        for i, line in enumerate(lines):
            m = _BEGIN.match(line)
            if not m:
                continue
            name = m["name"]
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == _END.format(name=name)), None)
            if end is None:
                raise LabError(f"lesson {name!r} in {rel} line {i + 1} has no '{_END.format(name=name)}'")
            if name in found:
                raise LabError(f"lesson {name!r} is in {found[name].path} and {rel}")
            found[name] = Lesson(name, rel, i + 2, textwrap.dedent("\n".join(lines[i + 1:end])))
    return found


def lesson(name: str) -> Lesson:
    """The lesson region ``name``.

    Raises
    ------
    LabError
        When there is none, naming the ones there are.
    """
    found = lessons()
    if name not in found:
        raise choices_error("lesson", name, found)
    return found[name]
