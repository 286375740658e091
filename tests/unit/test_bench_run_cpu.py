"""bench/run_cpu.py's grouping of processes and driver JVM threads, on command lines and names as /proc has them."""

from __future__ import annotations

import pytest

from bench.run_cpu import GROUPS, THREADS, Sampler, is_launcher, process_group, summarise, thread_group


@pytest.mark.parametrize("cmdline, group", [
    ("bash\0/v/lib/python3.11/site-packages/pyspark/bin/spark-class\0org.apache.spark.deploy.SparkSubmit\0",
     "driver JVMs"),
    ("/usr/lib/jvm/java-17/bin/java\0-cp\0/v/pyspark/jars/*\0org.apache.spark.launcher.Main\0", "driver JVMs"),
    ("/usr/bin/java\0-Xmx256m\0-cp\0/c/lab/kafka/4.1.1/libs/*\0kafka.Kafka\0/r/server.properties\0", "broker JVM"),
    ("/v/bin/python\0-m\0pyspark.daemon\0pyspark.worker\0", "Python workers"),
    ("/v/bin/python\0-m\0lab.spark.daemon\0pyspark.worker\0", "Python workers"),
    ("/v/bin/python\0-m\0lab.pipelines.driver\0/runs/x\0", "driver Python"),
    ("/v/bin/python\0-m\0lab.broker.proxy\0--listen\0000\0", "broker proxy"),
    ("/v/bin/python\0/v/bin/lab\0run\0--pipeline\0structured\0", "lab run (supervisor, producer, audit)"),
    ("/v/bin/python\0-m\0lab\0run\0--json\0", "lab run (supervisor, producer, audit)"),
    ("/v/bin/python\0-m\0lab\0matrix\0", "other"),
    ("/usr/bin/javac\0X.java\0", "other"),
])
def test_process_group(cmdline, group):
    assert process_group(cmdline) == group


def test_a_shell_is_looked_at_again_once_it_has_execd_unless_it_is_sparks_launcher():
    assert is_launcher("/bin/bash\0-c\0x\0") and is_launcher("")
    assert is_launcher("/bin/bash\0/v/pyspark/bin/spark-submit\0--conf\0x\0pyspark-shell\0")
    assert not is_launcher("bash\0/v/pyspark/bin/spark-class\0org.apache.spark.deploy.SparkSubmit\0")
    assert not is_launcher("/usr/bin/java\0kafka.Kafka\0")


def test_the_sampler_groups_a_process_by_what_its_shell_execd(tmp_path):
    """As ``spark-submit`` execs the driver's JVM: the shell's command line says nothing of it."""
    import os
    import subprocess
    import sys
    import time

    # the module named only after the exec, not in the shell's command line
    env = dict(os.environ, M="lab.broker.proxy")
    p = subprocess.Popen(["bash", "-c", f'sleep 0.3; exec {sys.executable} -c "import time; time.sleep(5)" -m "$M"'],
                         env=env)
    try:
        s = Sampler()
        s.sample()
        key = next(k for k in s.procs if k[0] == str(p.pid))
        assert s.procs[key][0] == "other"  # a shell so far
        deadline = time.monotonic() + 10
        while "lab.broker.proxy" not in open(f"/proc/{p.pid}/cmdline").read() and time.monotonic() < deadline:
            time.sleep(0.05)
        s.sample()
        assert s.procs[key][0] == "broker proxy"
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("name, group", [
    ("C1 CompilerThre", "JIT compiler"), ("C2 CompilerThre", "JIT compiler"), ("GC Thread#1", "garbage collector"),
    ("G1 Conc#0", "garbage collector"), ("VM Thread", "garbage collector"), ("Thread-7", "calls from PySpark (py4j)"),
    ("java", "JVM main thread (start, SparkSubmit)"), ("stream executio", "streaming query"),
    ("Executor task l", "tasks"), ("dag-scheduler-e", "other"), ("Thread-7a", "other"),
])
def test_thread_group(name, group):
    assert thread_group(name) == group


def test_summarise_takes_medians_of_successful_runs_only():
    def run(wall, exit=0, guarantee="exactly-once"):
        return {"pipeline": "structured", "exit": exit, "wall_s": wall, "machine_cpu_s": 2 * wall,
                "cores_busy": 0.5, "processes": dict.fromkeys(GROUPS, wall),
                "driver_jvm_threads": dict.fromkeys(THREADS, 1.0), "guarantee": guarantee}

    s = summarise([run(10), run(30), run(20), run(99, exit=1)])["structured"]
    assert s["runs"] == 3 and s["wall_s"] == 20 and s["machine_cpu_s"] == 40
    assert s["processes"]["driver JVMs"] == 20 and s["guarantees"] == ["exactly-once"]
    other = summarise([run(10), dict(run(7), variant="none")])
    assert set(other) == {"structured", "structured/none"} and other["structured/none"]["wall_s"] == 7


def test_an_archive_variant_maps_the_named_archive_instead_of_todays(tmp_path):
    from bench.run_cpu import archive_variant, main
    from lab.host.start_tuning import DRIVER_JVM_OPTIONS, StartTuning

    env = archive_variant("/c/old.jsa")
    tuning = StartTuning.from_env(env)
    assert not tuning.class_archive  # today's archive is not added beside it
    assert tuning.jvm_options == f"{DRIVER_JVM_OPTIONS} -XX:SharedArchiveFile=/c/old.jsa"
    with pytest.raises(SystemExit):  # a missing file is refused before any run
        main(["--archive", f"old={tmp_path / 'none.jsa'}", "--out", str(tmp_path / "out.json")])
    (tmp_path / "a.jsa").write_bytes(b"x")
    with pytest.raises(SystemExit):  # so is a name the bench's own variants have
        main(["--archive", f"all={tmp_path / 'a.jsa'}", "--out", str(tmp_path / "out.json")])
    assert not (tmp_path / "out.json").exists()


def test_a_flags_variant_starts_drivers_with_its_flags_and_keeps_todays_archive(tmp_path):
    from bench.run_cpu import flags_variant, main
    from lab.host.start_tuning import StartTuning

    tuning = StartTuning.from_env(flags_variant("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"))
    assert tuning.jvm_options == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" and tuning.class_archive
    for bad in ("serial=", "=-XX:+UseSerialGC", "all=-XX:+UseSerialGC"):  # no flags, no name, a bench variant's name
        with pytest.raises(SystemExit):
            main(["--jvm-flags", bad, "--out", str(tmp_path / "out.json")])
    assert not (tmp_path / "out.json").exists()
