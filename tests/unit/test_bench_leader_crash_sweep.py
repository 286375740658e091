"""The leader-crash sweep's pure parts: the crash moments and the per-configuration summary."""

from bench.leader_crash_sweep import crash_times, summary


def test_crash_moments_are_spread_evenly_over_the_range_ends_included():
    assert crash_times(2, 14, 4) == [2.0, 6.0, 10.0, 14.0]
    assert crash_times(6.6, 9, 1) == [6.6]
    assert len(crash_times(2, 14, 20)) == 20


def test_a_run_counts_as_clean_only_exactly_once_drained_and_before_its_deadline():
    ok = dict(config="kafka-eos", guarantee="exactly-once", drained=True, deadline=False, lost=0, duplicated=0,
              unseen=0, wall_s=30.0)
    runs = [ok, {**ok, "lost": 35, "guarantee": "at-most-once"},
            {**ok, "deadline": True, "drained": False, "unseen": 4200},
            {"config": "kafka-eos", "error": "boom", "wall_s": 1.0}]
    s = summary(runs)["kafka-eos"]
    assert ((s["runs"], s["exactly_once_drained"], s["lost"], s["unseen"], s["deadline"], s["errors"])
            == (4, 1, 35, 4200, 1, 1))
