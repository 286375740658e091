"""bench/ranges.py: rows count only under today's configuration of their scenario."""

import json

from bench.ranges import config_digest, markdown, plain, span, table


def row(name, digest, lost, duplicated=0, verdict="as expected", guarantee="at-most-once"):
    return {"name": name, "expect": "loss", "guarantee": guarantee, "verdict": verdict, "lost": lost,
            "duplicated": duplicated, "topic_lost": None, "digest": digest}


def test_a_run_made_with_another_configuration_leaves_the_table():
    runs = [{"rows": [row("a", "old", 900), row("b", "b1", 0)]},
            {"rows": [row("a", "new", 120), row("b", "b1", 0, duplicated=5)]},
            {"rows": [row("a", "new", 80, verdict="not as expected")]}]
    out = table(runs, {"ka": ("a", "new"), "kb": ("b", "b1"), "kc": ("c", "c1")})
    assert [r["scenario"] for r in out] == ["a", "b"]  # c: never measured, no row
    a, b = out
    assert (a["runs"], a["as expected"], a["lost"]) == (2, 1, "80-120")
    assert (b["runs"], b["duplicated"], b["topic_lost"]) == (2, "0-5", "-")
    assert markdown(out).splitlines()[2] == "| a | loss | 2 | 1 | 80-120 | 0 | - |"


def test_a_scenario_run_with_two_seeds_pools_them():
    runs = [{"rows": [row("a", "seed1", 10), row("a", "seed2", 30), row("a", "gone", 99)]}]
    (a,) = table(runs, {"k1": ("a", "seed1"), "k2": ("a", "seed2")})
    assert (a["runs"], a["lost"]) == (2, "10-30")


def test_a_failed_run_counts_as_an_error_not_in_the_spans():
    failed = row("a", "d", plain(float("nan")), verdict="error", guarantee=plain(float("nan")))
    runs = json.loads(json.dumps([{"rows": [row("a", "d", 7), failed]}]))  # as the file keeps them
    (a,) = table(runs, {"k": ("a", "d")})
    assert (a["runs"], a["errors"], a["guarantees"], a["lost"]) == (2, 1, ["at-most-once"], "7")


def test_span_skips_missing_counts():
    assert span([3, float("nan"), None, 3]) == "3" and span([None]) == "-" and span([7, 2]) == "2-7"


def test_the_digest_follows_every_setting_and_the_seed_but_not_the_runs_folder():
    base = {"pipeline": "structured", "sink": "idempotent", "events": 3000}
    assert config_digest(base) == config_digest({**base, "runs_dir": "/elsewhere"})
    assert config_digest(base) != config_digest({**base, "max_batch_records": 300})
    assert config_digest(base, seed=1) != config_digest(base, seed=2)
