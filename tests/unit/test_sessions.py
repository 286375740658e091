"""``session-count``: the processor's rule batch by batch, the auditor's rule over the ledger, and their agreement."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lab.audit.window import EventTimes, session_of, session_state_check, window_audit_core
from lab.config import make_config
from lab.errors import LabError
from lab.pipelines.structured.sessions import Session, advance

GAP = 500


def test_a_gap_larger_than_the_session_gap_starts_a_new_session():
    touched, now = advance(None, [0, 400, 900, 1_401, 1_500], GAP)
    # 900 - 400 = 500 is not larger than the gap: the same session; 1401 - 900 = 501 is.
    assert touched == [(Session(0, 900, 3), 3), (Session(1_401, 1_500, 2), 2)]
    assert now == Session(1_401, 1_500, 2)


def test_a_batch_adds_to_the_open_session_and_says_what_it_added():
    touched, now = advance(Session(0, 900, 3), [1_200], GAP)
    assert touched == [(Session(0, 1_200, 4), 1)] and now == Session(0, 1_200, 4)
    # A batch with nothing for the key leaves its session as it was and writes nothing.
    assert advance(now, [], GAP) == ([], now)


def test_the_ledger_side_gives_each_event_its_session_start_and_end():
    keys = np.array(["a", "b", "a", "a", "b"], dtype=object)
    times = np.array([0, 10, 400, 2_000, 700], dtype=np.int64)
    starts, ends = session_of(keys, times, GAP)
    assert starts.tolist() == [0, 10, 0, 2_000, 700]
    assert ends.tolist() == [900, 510, 900, 2_500, 1_200]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 400)), min_size=1, max_size=60),
       st.lists(st.integers(1, 8), min_size=1, max_size=10))
def test_the_processor_batch_by_batch_owes_what_the_ledger_says(steps, cuts):
    """Each key's events in event-time order, cut into batches anywhere: the rows' deltas sum per session to the
    ledger's count, and the last row of each session holds that count."""
    clock, events = 0, []
    for key, step in steps:
        clock += step
        events.append((key, clock))
    keys = np.array([k for k, _ in events], dtype=object)
    times = np.array([t for _, t in events], dtype=np.int64)
    starts, _ = session_of(keys, times, GAP)
    owed = {}
    for k, s in zip(keys, starts):
        owed[(int(s), k)] = owed.get((int(s), k), 0) + 1
    sums, last = {}, {}
    state: dict[str, Session | None] = {}
    i = 0
    for cut in itertools.cycle(cuts):
        if i >= len(events):
            break
        batch = events[i:i + cut]
        i += cut
        for key in sorted({k for k, _ in batch}):
            touched, state[key] = advance(state.get(key), sorted(t for k, t in batch if k == key), GAP)
            for s, delta in touched:
                sums[(s.start, key)] = sums.get((s.start, key), 0) + delta
                last[(s.start, key)] = s.count
    assert sums == owed and last == owed


def test_the_window_audit_counts_sessions_by_their_start():
    times = [0, 300, 2_000, 100]
    keys = ["a", "a", "a", "b"]
    e = EventTimes(seq=np.arange(4), key=np.array(keys, dtype=object), partition=np.zeros(4, dtype=np.int64),
                   kafka_offset=np.arange(4), event_time_ms=np.array(times, dtype=np.int64))
    owed = np.ones(4, dtype=bool)
    sessions = session_of(e.key, e.event_time_ms, GAP)
    # The append sink's replay counted session (0, a) twice; (100, b) is exact; (2000, a) never reached the sink.
    measured = [(0, 800, "a", 4), (100, 600, "b", 1)]
    w = window_audit_core(e, ~owed, owed, measured, 1, sessions)
    assert (w.windows_exact, w.windows_over, w.windows_under, w.overcount, w.undercount) == (1, 1, 1, 2, 1)
    row = w.table.set_index(["window_start", "key"]).loc[(2_000, "a")]
    assert (row["window_end"], row["expected"], row["measured"]) == (2_500, 1, 0)


@pytest.mark.parametrize("params, words", [
    (dict(state_store="hdfs"), "rocksdb"),
    (dict(sink="files"), "database sink"),
    (dict(late_fraction=0.1), "--late-fraction"),
    (dict(session_gap_s=0), "--session-gap"),
    (dict(trigger="real-time"), "--trigger real-time"),
    (dict(sink="topic"), "--sink topic runs --query passthrough"),
])
def test_a_session_count_it_cannot_run_is_refused_in_one_line(params, words):
    with pytest.raises(LabError, match=words.replace("-", r"\-")) as e:
        make_config(pipeline="structured", query="session-count", **params)
    assert "\n" not in str(e.value)


def test_session_count_picks_the_rocksdb_state_store_and_states_its_gap():
    cfg = make_config(pipeline="structured", query="session-count")
    assert cfg.spark.state_store == "rocksdb"
    assert cfg.query_settings["session_gap_s"] == 0.5
    with pytest.raises(LabError, match="structured"):
        make_config(pipeline="direct", query="session-count")


def test_a_state_snapshot_is_checked_key_by_key_against_the_ledgers_last_session():
    times = [0, 300, 2_000, 100, 5_000]
    keys = ["a", "a", "a", "b", "b"]
    e = EventTimes(seq=np.arange(5), key=np.array(keys, dtype=object), partition=np.zeros(5, dtype=np.int64),
                   kafka_offset=np.arange(5), event_time_ms=np.array(times, dtype=np.int64))
    upto = np.array([True, True, True, True, False])  # the batch had not read b's second event
    # a's open session is (2000, 1): the state holds it; b's state counts one event too many.
    t = session_state_check([["a", 2_000, 2_000, 1], ["b", 100, 100, 2]], e, upto, GAP).set_index("key")
    assert t.loc["a", "exact"] and not t.loc["b", "exact"]
    assert (t.loc["b", "ledger_start"], t.loc["b", "ledger_count"]) == (100, 1)


def test_a_backlog_is_refused_where_the_producer_waits_for_the_job():
    with pytest.raises(LabError, match="--backlog: the flink pipeline") as e:
        make_config(pipeline="flink", backlog=True)
    assert "structured" in str(e.value) and "\n" not in str(e.value)
    assert make_config(pipeline="structured", backlog=True).settings["backlog"] is True
