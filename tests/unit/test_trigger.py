"""The structured pipeline's --trigger (lab.spark.trigger) and the output topic's latency (lab.audit.latency)."""

import pytest

from lab.audit.latency import first_copy_latency_ms, latency_core
from lab.config import make_config
from lab.errors import LabError
from lab.spark.trigger import DEFAULT_REAL_TIME_S, Trigger, parse_trigger, task_slots


@pytest.mark.parametrize("text, expected", [
    ("micro-batch", Trigger("micro-batch")),
    ("real-time", Trigger("real-time", DEFAULT_REAL_TIME_S)),
    ("real-time:2.5s", Trigger("real-time", 2.5)),
])
def test_trigger_forms_parse_and_render_back(text, expected):
    assert parse_trigger(text) == expected
    assert parse_trigger(expected.to_text()) == expected


@pytest.mark.parametrize("text, says", [("rt", "valid: micro-batch, real-time"), ("real-time:5", "valid"),
                                        ("real-time:0.5s", "below 1 s")])
def test_bad_trigger_is_refused_in_one_line_naming_the_forms(text, says):
    with pytest.raises(LabError, match=says) as e:
        make_config(pipeline="structured", trigger=text)
    assert "\n" not in str(e.value) and text in str(e.value) or "0.5" in str(e.value)


def test_real_time_defaults_its_sink_and_a_slot_per_partition(monkeypatch):
    monkeypatch.delenv("LAB_SPARK_MASTER", raising=False)
    c = make_config(pipeline="structured", trigger="real-time", partitions=3)
    assert (c.sink, c.option("trigger"), c.option("spark_master")) == ("topic", "real-time:5s", "local[3]")
    assert c.settings["trigger"] == "real-time:5s"
    # micro-batches keep their sink and master
    m = make_config(pipeline="structured")
    assert (m.sink, m.option("trigger"), m.option("spark_master")) == ("append", "micro-batch", "local[2]")


@pytest.mark.parametrize("params, says", [
    (dict(trigger="real-time", sink="append"), "use --sink topic"),
    (dict(trigger="real-time", spark_master="local[2]", partitions=3), "needs 3 task slots"),
    (dict(trigger="real-time", query="dedupe"), "passthrough"),
    (dict(sink="topic", faults="driver-crash@batch=2:mid-output"), "no named point"),
    (dict(sink="topic", faults="driver-crash@batch=2"), "no batch trigger"),
    (dict(sink="topic", kafka_reader="labkafka"), "Spark's Kafka connector"),
    (dict(pipeline="direct", trigger="real-time"), "applies to pipeline structured"),
])
def test_what_real_time_and_the_kafka_sink_cannot_do_is_refused_before_any_process(params, says):
    with pytest.raises(LabError, match=says):
        make_config(**{"pipeline": "structured", **params})


def test_task_slots_of_each_master_form():
    assert [task_slots(m) for m in ("local", "local[3]", "local[2,4]", "local-cluster[2,2,1024]",
                                    "spark://h:7077")] == \
        [1, 3, 2, 4, None]


def test_latency_takes_each_events_first_copy_and_counts_steady_state_after_the_first_output():
    sent = {"a": 10.0, "b": 11.0, "c": 12.0}
    # a waited for the start (out at 11.5 s); b came out 50 ms after its send, and again at 20 s (a replay); c 20 ms
    ids, ts = ["a", "b", "c", "b", "x"], [11_500, 11_050, 12_020, 20_000, 1]
    assert first_copy_latency_ms(ids, ts, sent) == {"a": 1500.0, "b": 50.0, "c": 20.0}
    lat = latency_core(ids, ts, sent)
    assert (lat.events, lat.max_ms, lat.p50_ms) == (3, 1500.0, 50.0)
    assert (lat.steady_events, lat.steady_p50_ms) == (1, 20.0)  # only c was sent after the first output (11.05 s)
    assert latency_core([], [], sent).events == 0


def test_a_killed_drivers_half_written_log_files_are_removed_and_entries_kept(tmp_path):
    from lab.pipelines.structured.kafka_sink import remove_unfinished_log_files

    for log, names in {"commits": ["0", ".0.crc", ".1.1ff2.tmp", "..1.1ff2.tmp.crc"],
                       "offsets": ["0", "1", ".1.crc"]}.items():
        (tmp_path / log).mkdir()
        for name in names:
            (tmp_path / log / name).write_text("v1")
    assert remove_unfinished_log_files(tmp_path) == ["commits/..1.1ff2.tmp.crc", "commits/.1.1ff2.tmp"]
    assert sorted(f.name for f in (tmp_path / "commits").iterdir()) == [".0.crc", "0"]
    assert len(list((tmp_path / "offsets").iterdir())) == 3


def test_steady_latency_stops_at_the_first_fault():
    sent = {"a": 10.0, "b": 11.0, "c": 12.0, "d": 13.0}
    ids, ts = ["a", "b", "c", "d"], [10_020, 11_020, 12_020, 16_000]  # d waited for the restart after a crash at 12.5 s
    assert latency_core(ids, ts, sent).steady_p95_ms > 1000
    lat = latency_core(ids, ts, sent, until_s=12.5)
    assert (lat.steady_events, lat.steady_p95_ms, lat.max_ms) == (2, 20.0, 3000.0)
