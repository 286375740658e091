"""bench/kafka_crc.py: the masked variant's environment, which CRC-32C kafka-python then picks, and the figures."""

from __future__ import annotations

import os

from bench.kafka_crc import MASK, crc_in_use, medians, paired, producer_seconds, variant_env


def test_only_the_python_variant_puts_the_mask_first_on_pythonpath():
    env = {"PYTHONPATH": "/a", "HOME": "/h"}
    assert variant_env("c", "/m", env) == env
    assert variant_env("python", "/m", env) == {"PYTHONPATH": f"/m{os.pathsep}/a", "HOME": "/h"}
    assert variant_env("python", "/m", {})["PYTHONPATH"] == "/m"


def test_the_mask_makes_kafka_python_fall_back_to_its_python_crc(tmp_path):
    (tmp_path / "crc32c.py").write_text(MASK)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    assert crc_in_use(variant_env("python", tmp_path, env)) == "Python"
    # The lab's pins install the C module (kafka-python[crc32c]), and the bench's other variant uses it.
    assert crc_in_use(variant_env("c", tmp_path, env)) == "C"


def test_producer_seconds_from_the_timeline():
    events = [{"type": "run-start", "t": 1.0}, {"type": "producer-start", "t": 2.0},
              {"type": "batch-done", "t": 3.0}, {"type": "producer-done", "t": 27.256}]
    assert producer_seconds(events) == 25.26
    assert producer_seconds(events[:2]) is None


def test_medians_per_scenario_and_variant_keep_every_guarantee():
    runs = [{"scenario": "s", "variant": v, "wall_s": w, "cpu_s": c, "producer_s": p, "guarantee": g}
            for v, w, c, p, g in [("c", 40.0, 80.0, 25.0, "exactly-once"), ("c", 44.0, 84.0, None, "exactly-once"),
                                  ("c", 42.0, 82.0, 27.0, "exactly-once"),
                                  ("python", 45.0, 85.0, 28.0, "at-least-once")]]
    m = medians(runs)
    assert m["s"]["c"]["runs"] == 3 and m["s"]["c"]["wall_s"] == {"min": 40.0, "median": 42.0, "max": 44.0}
    assert m["s"]["c"]["producer_s"]["median"] == 26.0  # a run without both producer events is left out
    assert m["s"]["python"]["guarantees"] == ["at-least-once"]


def test_paired_differences_are_taken_within_each_round():
    runs = [{"scenario": "s", "round": r, "variant": v, "wall_s": w, "cpu_s": 1.0, "producer_s": p, "guarantee": "g"}
            for r, v, w, p in [(0, "c", 40.0, 25.0), (0, "python", 45.0, 30.0), (1, "c", 50.0, 31.0),
                               (1, "python", 48.0, None), (2, "c", 41.0, 26.0)]]
    d = paired(runs)["s"]
    assert d["wall_s"] == {"min": -5.0, "median": -1.5, "max": 2.0}  # round 2 has no pair
    assert d["producer_s"] == {"min": -5.0, "median": -5.0, "max": -5.0}
    assert d["cpu_s"]["median"] == 0.0
