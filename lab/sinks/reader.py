"""Open a run's sink, whatever its mode, as a :class:`lab.sinks.spec.SinkReader`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lab.sinks.database import Sink
from lab.sinks.spec import FILES_MODE, TOPIC_MODE, SinkSpec

if TYPE_CHECKING:
    from lab.sinks.files import FileSink
    from lab.sinks.topic import TopicSink


def open_sink(spec_or_run_dir: SinkSpec | Path | str) -> Sink | FileSink | TopicSink:
    """Open the sink described by a :class:`SinkSpec` or by a run directory's ``sink.json``."""
    spec = spec_or_run_dir if isinstance(spec_or_run_dir, SinkSpec) else SinkSpec.load(spec_or_run_dir)
    # The files and topic sinks are imported only by a run that uses them: the topic sink brings numpy and
    # kafka-python, and every Spark task unpickles open_sink (-X importtime, on a busy machine: 44-108 ms for this
    # module, 190-370 ms more for the topic sink).
    if spec.backend == FILES_MODE:
        from lab.sinks.files import FileSink

        return FileSink(spec)
    if spec.backend == TOPIC_MODE:
        from lab.sinks.topic import TopicSink

        return TopicSink(spec)
    return Sink(spec)
