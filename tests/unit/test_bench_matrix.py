"""bench/matrix.py keeps the measures it replaces, newest first, each with its machine's speed."""

from bench.matrix import with_earlier


def test_a_new_measure_keeps_the_ones_it_replaces():
    first = {"measured_at": "2026-11-25T10:00:00", "runs": 25, "seconds": 230.3, "verdicts": {"as expected": 25},
             "rows": [{"name": "a"}], "results_dir": "/tmp/x"}
    second = {"measured_at": "2026-11-26T22:40:00", "runs": 25, "seconds": 377.3, "core_seconds_before": 0.3}
    kept = with_earlier(second, first)
    assert kept["earlier"] == [{"measured_at": "2026-11-25T10:00:00", "runs": 25, "seconds": 230.3,
                                "verdicts": {"as expected": 25}}]
    third = with_earlier({"measured_at": "2026-11-27T09:00:00", "seconds": 240.0}, kept)
    assert [e["seconds"] for e in third["earlier"]] == [377.3, 230.3]
    assert third["earlier"][0]["core_seconds_before"] == 0.3
    assert with_earlier(second, None) == second and "earlier" not in second


def test_a_pair_is_remembered_by_its_second_run():
    pair = {"before": {"seconds": 300.0}, "after": {"measured_at": "t", "seconds": 240.0}, "speed_up": 1.25}
    assert with_earlier({"seconds": 250.0}, pair)["earlier"] == [{"measured_at": "t", "seconds": 240.0}]


def test_a_row_not_as_expected_stays_named_with_its_error():
    rows = [{"name": "a", "expect": "exactly-once", "guarantee": "exactly-once", "verdict": "as expected", "lost": 0},
            {"name": "b", "expect": "at-least-once", "guarantee": None, "verdict": "error", "lost": None,
             "error": "papermill exited 1: LabError: no batch done"}]
    kept = with_earlier({"seconds": 250.0}, {"measured_at": "t", "seconds": 397.5,
                                             "verdicts": {"as expected": 1, "error": 1}, "rows": rows})
    assert kept["earlier"][0]["not_as_expected"] == [
        {"name": "b", "expect": "at-least-once", "guarantee": None, "verdict": "error",
         "error": "papermill exited 1: LabError: no batch done"}]
