"""bench/ranges.py: rows count only under today's configuration of their scenario."""

from bench.ranges import config_digest, markdown, span, table


def row(name, digest, lost, duplicated=0, verdict="as expected"):
    return {"name": name, "expect": "loss", "guarantee": "at-most-once", "verdict": verdict, "lost": lost,
            "duplicated": duplicated, "topic_lost": None, "digest": digest}


def test_a_run_made_with_another_configuration_leaves_the_table():
    runs = [{"rows": [row("a", "old", 900), row("b", "b1", 0)]},
            {"rows": [row("a", "new", 120), row("b", "b1", 0, duplicated=5)]},
            {"rows": [row("a", "new", 80, verdict="not as expected")]}]
    out = table(runs, {"a": "new", "b": "b1", "c": "c1"})
    assert [r["scenario"] for r in out] == ["a", "b"]  # c: never measured, no row
    a, b = out
    assert (a["runs"], a["as expected"], a["lost"]) == (2, 1, "80-120")
    assert (b["runs"], b["duplicated"], b["topic_lost"]) == (2, "0-5", "-")
    assert markdown(out).splitlines()[2] == "| a | loss | 2 | 1 | 80-120 | 0 | - |"


def test_span_skips_missing_counts():
    assert span([3, float("nan"), None, 3]) == "3" and span([None]) == "-" and span([7, 2]) == "2-7"


def test_the_digest_follows_every_setting_but_the_runs_folder():
    base = {"pipeline": "structured", "sink": "idempotent", "events": 3000}
    assert config_digest(base) == config_digest({**base, "runs_dir": "/elsewhere"})
    assert config_digest(base) != config_digest({**base, "max_batch_records": 300})
