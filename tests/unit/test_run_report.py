"""Positions after a forced final stop: events in flight count as unseen, never lost; the final read started ahead."""

import threading

import pytest

from lab.config import RunConfig
from lab.kafka import tools as kafka_tools
from lab.run.result import completed_ends, in_flight_positions, start_topic_read


def test_receiver_style_progress_ahead_of_output_is_capped_at_completed_batches():
    # The receiver commits offsets as records arrive: progress 900 on partition 0, but
    # the last batch that finished its output covered up to 600.
    events = [
        {"type": "batch-start", "batch": 0, "attempt": 1, "ranges": {}},
        {"type": "batch-done", "batch": 0, "attempt": 1, "ranges": {"0": [0, 300], "1": [0, 250]}},
        {"type": "batch-start", "batch": 1, "attempt": 1, "ranges": {}},
        {"type": "batch-done", "batch": 1, "attempt": 1, "ranges": {"0": [300, 600]}},
        {"type": "batch-start", "batch": 2, "attempt": 1, "ranges": {}},  # killed before it finished
    ]
    assert completed_ends(events) == {0: 600, 1: 250}
    assert in_flight_positions({0: 900, 1: 250, 2: 40}, events) == {0: 600, 1: 250, 2: 0}


def test_batch_done_without_ranges_takes_them_from_its_start():
    events = [
        {"type": "batch-start", "batch": 4, "attempt": 2, "ranges": {"0": [10, 20]}},
        {"type": "batch-start", "batch": 4, "attempt": 1, "ranges": {"0": [10, 30]}},  # an earlier attempt's
        {"type": "batch-done", "batch": 4, "attempt": 2, "rows": 10},
    ]
    assert completed_ends(events) == {0: 20}
    # pipelines whose progress only moves after output are unchanged by the cap
    assert in_flight_positions({0: 20}, events) == {0: 20}


def test_a_topic_read_started_ahead_reads_the_runs_topic_on_a_thread_and_keeps_its_error(monkeypatch):
    asked, readers = [], []

    def topic_copies(bootstrap, topic, partitions, isolation_level):
        asked.append((bootstrap, topic, partitions, isolation_level))
        readers.append(threading.current_thread().name)
        if topic == "events.gone":
            raise TimeoutError("the topic could not be read to its end")
        return {"e0": [1, 0, 0]}

    monkeypatch.setattr(kafka_tools, "topic_copies", topic_copies)
    config = RunConfig(pipeline="plain", topic="events.r1", partitions=2)
    assert start_topic_read("127.0.0.1:9", config).result(timeout=10) == {"e0": [1, 0, 0]}
    assert asked == [("127.0.0.1:9", "events.r1", 2, config.producer.isolation_level)]
    assert readers == ["lab-topic-read"]  # not the caller's: the supervisor stops its driver meanwhile
    failed = start_topic_read("127.0.0.1:9", RunConfig(pipeline="plain", topic="events.gone"))
    with pytest.raises(TimeoutError, match="to its end"):
        failed.result(timeout=10)  # where final_audit asks for the copies
