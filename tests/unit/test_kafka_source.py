"""The Kafka source's options and the structured checkpoint's offset log, without a JVM."""

import json

import pytest

from lab.pipelines.structured.checkpoint import Checkpoint
from lab.spark.kafka_source import ISOLATION_LEVELS, _Options


def test_isolation_level_is_checked_and_named():
    assert _Options({"bootstrap": "b:1", "topic": "t"}).isolation_level == "read_uncommitted"
    assert _Options({"bootstrap": "b:1", "topic": "t", "isolationLevel": "read_committed"}).isolation_level \
        == "read_committed"
    with pytest.raises(ValueError) as e:
        _Options({"bootstrap": "b:1", "topic": "t", "isolationLevel": "committed"})
    assert "'committed'" in str(e.value) and all(level in str(e.value) for level in ISOLATION_LEVELS)


def _offset_log(tmp_path, batch: int, source_offsets: dict) -> Checkpoint:
    d = tmp_path / "offsets"
    d.mkdir(exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}}
    (d / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(source_offsets)}\n")
    return Checkpoint(tmp_path)


def test_offset_log_of_either_reader_reads_as_partition_offsets(tmp_path):
    # labkafka's offset: {"<partition>": next offset}
    cp = _offset_log(tmp_path, 0, {"0": 250, "1": 240, "2": 10})
    assert cp.end_offsets(0) == {0: 250, 1: 240, 2: 10}
    # Spark's Kafka source: {"<topic>": {"<partition>": next offset}}
    cp = _offset_log(tmp_path, 1, {"events.run-1": {"2": 20, "0": 500, "1": 480}})
    assert cp.end_offsets(1) == {0: 500, 1: 480, 2: 20}
    assert cp.end_offsets(2) is None


def test_initial_offsets_are_spark_kafka_sources_record_of_where_batch_0_began(tmp_path):
    cp = Checkpoint(tmp_path)
    assert cp.initial_offsets() is None  # before the query's start, or another reader's checkpoint
    (tmp_path / "sources" / "0").mkdir(parents=True)
    # As Spark 4.x's Kafka source wrote it in a run's checkpoint (a NUL byte first).
    (tmp_path / "sources" / "0" / "0").write_bytes(b'\x00v1\n{"events.run-1":{"0":0,"1":7,"2":0}}')
    assert cp.initial_offsets() == {0: 0, 1: 7, 2: 0}
    for other in (b"v2\n{}", b"\x00v1\n[1, 2]", b"\x00v1\nnot json", b'\x00v1\n{"t":{"0":-2}}', b"\xff\xfe"):
        (tmp_path / "sources" / "0" / "0").write_bytes(other)
        assert cp.initial_offsets() is None, other  # the broker is asked instead


class _RecordingStream:
    """Stands in for ``spark.readStream``: records the format and options a reader sets."""

    def __init__(self):
        self.format_name, self.options = None, {}

    def format(self, name):
        self.format_name = name
        return self

    def option(self, key, value):
        self.options[key] = value
        return self

    def load(self):
        return self


def test_both_readers_are_given_the_same_range_limit_and_isolation(monkeypatch):
    from types import SimpleNamespace

    from lab.pipelines.structured import kafka_input as structured_input

    seen = {}
    for reader in ("labkafka", "spark"):
        stream = _RecordingStream()
        monkeypatch.setattr(structured_input, "events_from_kafka_rows", lambda df: df)
        structured_input.kafka_event_stream(SimpleNamespace(readStream=stream), reader, "127.0.0.1:9092", "events.r1",
                                            3, 250, "read_committed")
        seen[reader] = stream
    assert seen["labkafka"].format_name == "labkafka"
    assert seen["labkafka"].options == {"bootstrap": "127.0.0.1:9092", "topic": "events.r1", "partitions": 3,
                                        "maxRecordsPerTrigger": 250, "isolationLevel": "read_committed"}
    assert seen["spark"].format_name == "kafka"
    assert seen["spark"].options == {
        "kafka.bootstrap.servers": "127.0.0.1:9092", "assign": json.dumps({"events.r1": [0, 1, 2]}),
        "startingOffsets": "earliest", "maxOffsetsPerTrigger": 250, "failOnDataLoss": "true",
        "kafka.isolation.level": "read_committed", "kafka.max.poll.records": 10000, "kafka.fetch.max.wait.ms": "20"}
    # what notebooks print for a run is what the reader set
    args = ("127.0.0.1:9092", "events.r1", 3, 250, "read_committed")
    assert structured_input.spark_kafka_options(*args) == seen["spark"].options
    assert structured_input.labkafka_options(*args) == seen["labkafka"].options
    with pytest.raises(Exception, match="'flink'.*labkafka, spark"):
        structured_input.kafka_event_stream(SimpleNamespace(readStream=_RecordingStream()), "flink", "b:1", "t",
                                            1, 1, "read_uncommitted")
