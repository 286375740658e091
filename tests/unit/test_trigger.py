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
    (dict(trigger="real-time", query="session-count"), "passthrough, dedupe, window-count in the lab, not"),
    (dict(trigger="real-time", query="dedupe", spark_master="local[4]", partitions=3),
     "and 2 for the query's shuffle needs 5 task slots"),
    (dict(trigger="real-time", query="dedupe", state_store="hdfs"), "rocksdb state store, not 'hdfs'"),
    (dict(sink="topic", query="session-count"), "--sink topic runs --query passthrough, dedupe or window-count"),
    (dict(sink="topic", faults="driver-crash@batch=2:mid-output"), "no named point"),
    (dict(sink="topic", faults="driver-crash@batch=2"), "no batch trigger"),
    (dict(sink="topic", kafka_reader="labkafka"), "Spark's Kafka connector"),
    (dict(pipeline="direct", trigger="real-time"), "applies to pipeline structured"),
])
def test_what_real_time_and_the_kafka_sink_cannot_do_is_refused_before_any_process(params, says):
    with pytest.raises(LabError, match=says):
        make_config(**{"pipeline": "structured", **params})


def test_real_time_dedupe_gets_the_shuffles_slots_and_the_state_store_real_time_mode_runs(monkeypatch):
    monkeypatch.delenv("LAB_SPARK_MASTER", raising=False)
    c = make_config(pipeline="structured", trigger="real-time", query="dedupe", partitions=3)
    assert (c.sink, c.option("spark_master"), c.option("state_store")) == ("topic", "local[5]", "rocksdb")
    # the Kafka sink's dedupe keeps every id: no watermark is stated for it
    assert c.query_settings["watermark_s"] is None
    assert make_config(pipeline="structured", sink="topic", query="dedupe").option("state_store") == "hdfs"


def test_the_state_checkpoint_format_is_read_from_the_commit_log(tmp_path):
    from lab.spark.state_reader import checkpoint_format

    commits = tmp_path / "commits"
    commits.mkdir()
    assert checkpoint_format(tmp_path) == 1  # nothing committed yet
    (commits / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    assert checkpoint_format(tmp_path) == 1
    (commits / "1").write_text('v2\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{"0":[["a"],["b"]]}}')
    (commits / ".1.crc").write_text("x")
    assert checkpoint_format(tmp_path) == 2  # the newest entry decides


def test_the_dedupe_state_answer_names_what_is_missing_or_foreign():
    import pandas as pd

    from lab.views.trigger import state_outcome

    def row(missing, foreign):
        return pd.Series({"state exact": not (missing or foreign), "ledger ids not in the state": missing,
                          "ids not in the ledger": foreign, "ids in the state": 10 - missing + foreign,
                          "events acknowledged up to it": 10, "last committed batch": 3}, name="r")

    assert state_outcome(row(0, 0))[0] == "every event once"
    assert state_outcome(row(2, 0)) == ("some events missing", "8 ids in the state at batch 3, 10 events "
                                                               "acknowledged up to it; 2 missing, 0 not in the ledger")
    assert state_outcome(row(0, 1))[0] == "ids of no event"
    with pytest.raises(LabError, match="committed no batch"):
        state_outcome(pd.Series({"last committed batch": -1}, name="r"))


def test_window_counts_in_a_topic_are_read_as_a_table_of_last_updates():
    from lab.sinks.topic import last_counts, resent_updates, window_record

    value = b'{"window_start":10000,"window_end":20000,"key":"k01","count":3}'
    assert window_record(value) == (10000, 20000, "k01", 3)
    assert window_record(b'{"id":"x","seq":1}') is None and window_record(None) is None
    # (partition, offset, start, end, key, count): k01's updates 1, 2, then a cut batch's 3 sent again, then 4
    rows = [(0, 0, 0, 10, "k01", 1), (0, 1, 0, 10, "k01", 2), (0, 2, 0, 10, "k01", 3), (1, 0, 0, 10, "k02", 1),
            (0, 3, 0, 10, "k01", 3), (0, 4, 0, 10, "k01", 4), (1, 1, 10, 20, "k02", 1)]
    assert last_counts(rows) == [(0, 10, "k01", 4), (0, 10, "k02", 1), (10, 20, "k02", 1)]
    assert last_counts(list(reversed(rows)))[0] == (0, 10, "k01", 4)  # log order, not read order
    assert resent_updates(rows) == 1 and resent_updates([]) == 0


def test_a_window_state_is_compared_count_by_count_with_the_ledger():
    import numpy as np

    from lab.audit.window import EventTimes
    from lab.views.run_files import windows_unlike

    times = np.array([1_000, 2_000, 12_000, 3_000], dtype=np.int64)
    events = EventTimes(seq=np.arange(4), key=np.array(["a", "a", "a", "b"], dtype=object),
                        partition=np.zeros(4, dtype=np.int64), kafka_offset=np.arange(4), event_time_ms=times)
    upto = np.array([True, True, True, False])  # b's event lies past the batch's end offsets
    assert windows_unlike([[0, "a", 2], [10_000, "a", 1]], events, upto, 10_000) == (0, 0)
    assert windows_unlike([[0, "a", 3], [10_000, "a", 1], [0, "b", 1]], events, upto, 10_000) == (2, 0)
    assert windows_unlike([[0, "a", 2]], events, upto, 10_000) == (0, 1)


def test_the_window_answers_name_the_counts_and_the_updates_sent_again():
    import pandas as pd

    from lab.views.trigger import updates_outcome, window_state_outcome

    def row(over, under, resent, before):
        return pd.Series({"state exact": not (over or under), "windows over the ledger": over,
                          "windows under the ledger": under, "windows in the state": 12, "counts in the state": 90,
                          "events acknowledged up to it": 90, "last committed batch": 4, "updates (output)": 120,
                          "re-sent updates (output)": resent, "of them written before the kill": before}, name="r")

    assert window_state_outcome(row(0, 0, 0, 0)) == (
        "every count exact", "12 (window, key) counts in the state at batch 4, summing to 90; 90 events "
                             "acknowledged up to it; 0 over, 0 under the ledger")
    assert window_state_outcome(row(1, 2, 0, 0))[0] == "some counts over"
    assert window_state_outcome(row(0, 2, 0, 0))[0] == "some counts under"
    assert updates_outcome(row(0, 0, 30, 30)) == ("the cut batch's updates twice", "120 updates in the output "
                                                  "topic, 30 of them sent again; the cut batch had sent 30 before "
                                                  "the kill")
    assert updates_outcome(row(0, 0, 0, 0))[0] == "each update once"
    assert updates_outcome(row(0, 0, 31, 30))[0] == "more updates twice"
    assert updates_outcome(row(0, 0, 3, None))[0] == "more updates twice"  # no crash: nothing the run could decide
    with pytest.raises(LabError, match="committed no batch"):
        window_state_outcome(pd.Series({"last committed batch": -1}, name="r"))


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


def test_the_ledger_counts_a_window_of_the_acked_events_below_a_batch_s_ends():
    import numpy as np

    from lab.audit.window import EventTimes, below, ledger_window_counts

    events = EventTimes(seq=np.arange(4), key=np.array(["a", "a", "b", "a"], dtype=object),
                        partition=np.array([0, 0, 1, 1]), kafka_offset=np.array([0, 1, 0, -1]),
                        event_time_ms=np.array([1_000, 12_000, 3_000, 4_000]))
    owed = below(events, {0: 2, 1: 1})
    assert owed.tolist() == [True, True, True, False]  # offset -1: acked without a place in the topic
    assert ledger_window_counts(events, owed, 10_000) == {(0, "a"): 1, (10_000, "a"): 1, (0, "b"): 1}
