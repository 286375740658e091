"""Open a run's sink, whatever its mode, as a :class:`lab.sinks.spec.SinkReader`."""

from __future__ import annotations

from pathlib import Path

from lab.sinks.database import Sink
from lab.sinks.files import FileSink
from lab.sinks.spec import FILES_MODE, TOPIC_MODE, SinkSpec
from lab.sinks.topic import TopicSink


def open_sink(spec_or_run_dir: SinkSpec | Path | str) -> Sink | FileSink | TopicSink:
    """Open the sink described by a :class:`SinkSpec` or by a run directory's ``sink.json``."""
    spec = spec_or_run_dir if isinstance(spec_or_run_dir, SinkSpec) else SinkSpec.load(spec_or_run_dir)
    if spec.backend == FILES_MODE:
        return FileSink(spec)
    if spec.backend == TOPIC_MODE:
        return TopicSink(spec)
    return Sink(spec)
