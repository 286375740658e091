"""bench/jdk_aot.py's driver command per variant, on a command as Spark's launcher prints it, and its medians."""

from __future__ import annotations

import pytest

from bench.jdk_aot import VARIANTS, VECTOR_MODULE, for_variant, summarise

LAUNCHED = ["/usr/lib/jvm/java-17/bin/java", "-cp", "/s/conf:/s/jars/*", "-Xmx1g", VECTOR_MODULE,
            "--add-opens=java.base/java.lang=ALL-UNNAMED", "org.apache.spark.deploy.SparkSubmit",
            "--conf", "spark.master=local[2]", "pyspark-shell"]


def test_for_variant_swaps_the_java_and_puts_the_flags_before_the_main_class():
    cmd = for_variant(LAUNCHED, "/c/jdk25/bin/java", ["-XX:AOTCache=/t/1.aot"], vector_module=False)
    assert cmd[0] == "/c/jdk25/bin/java" and VECTOR_MODULE not in cmd
    assert cmd[1:3] == ["-cp", "/s/conf:/s/jars/*"]
    main = cmd.index("org.apache.spark.deploy.SparkSubmit")
    assert cmd[main - 1] == "-XX:AOTCache=/t/1.aot" and cmd[main:] == LAUNCHED[LAUNCHED.index(cmd[main]):]


def test_for_variant_keeps_the_vector_module_for_a_jdk_that_has_it():
    cmd = for_variant(LAUNCHED, LAUNCHED[0], ["-XX:SharedArchiveFile=/t/0.jsa"], vector_module=True)
    assert cmd == [*LAUNCHED[:6], "-XX:SharedArchiveFile=/t/0.jsa", *LAUNCHED[6:]]


def test_for_variant_refuses_what_is_not_a_spark_submit_command():
    with pytest.raises(ValueError, match="not a spark-submit command"):
        for_variant(["java", "-version"], "java", [], vector_module=True)


def test_every_variant_trains_the_file_it_runs_with():
    for jdk, flags, training in VARIANTS.values():
        assert jdk in ("17", "25")
        assert [f for f in flags if "{file}" in f] and [f for f in training if "{file}" in f]
        assert [f for f in flags if "{file}" not in f] == [f for f in training if "{file}" not in f]


def test_summarise_takes_each_variants_medians():
    run = dict(gateway_s=1.0, session_s=3.0, jobs_s=7.0, wall_s=9.0)
    out = summarise({"a": [{**run, "cpu_s": 9.0}, {**run, "cpu_s": 11.0}, {**run, "cpu_s": 30.0}], "b": []})
    assert out == {"a": {"runs": 3, **run, "cpu_s": 11.0}}
