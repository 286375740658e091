"""bench/driver_reuse.py: the child's lines, one run's figures and the medians per variant."""

from __future__ import annotations

import json

from bench.driver_reuse import child_runs, figures, medians


def test_only_the_childs_own_lines_are_runs():
    line = {"topic": "t", "start": 1.0, "first_batch": 2.0, "last_batch": 3.0, "cpu_start": 0.0, "cpu_end": 1.0}
    stdout = "\n".join(["Setting default log level to \"WARN\".", json.dumps(line), '{"other": 1}', json.dumps(line)])
    assert child_runs(stdout) == [line, line]
    assert child_runs("") == []


def test_figures_from_the_childs_clock_or_from_outside():
    run = {"topic": "t", "start": 100.0, "first_batch": 103.25, "last_batch": 104.5, "cpu_start": 10.0, "cpu_end": 15.5}
    # reused: timed from the stop of the run before, by the child's own clock and CPU count
    assert figures(run, run["start"]) == {"first_batch_s": 3.25, "all_done_s": 4.5, "wall_s": 4.5, "cpu_s": 5.5}
    # new: a process per run, timed from its start to its exit from outside
    assert figures(run, 95.0, end=110.0, cpu=15.0) == {"first_batch_s": 8.25, "all_done_s": 9.5, "wall_s": 15.0,
                                                       "cpu_s": 15.0}


def test_medians_per_variant_keep_the_cold_start_apart():
    runs = [{"variant": v, "first_batch_s": f, "all_done_s": f + 1, "wall_s": f + 2, "cpu_s": c}
            for v, f, c in [("new", 8.0, 15.0), ("new", 9.0, 16.0), ("new", 10.0, 14.0), ("cold", 9.0, 14.5),
                            ("reused", 3.0, 5.0), ("reused", 4.0, 6.0)]]
    m = medians(runs)
    assert set(m) == {"new", "cold", "reused"} and m["cold"]["runs"] == 1
    assert m["new"]["first_batch_s"] == {"min": 8.0, "median": 9.0, "max": 10.0}
    assert m["new"]["cpu_s"]["median"] == 15.0 and m["reused"]["cpu_s"]["median"] == 5.5
