"""Where a crash scenario's CPU goes: seconds of CPU per kind of process, and inside the driver JVMs per thread.

Each measurement is the crash scenario of :mod:`bench.startup` for one pipeline (one driver start, a
``driver-crash``, one restart), run as a user runs it (``lab run``, its own broker). While it runs,
every process on the machine is sampled each 0.1 s from ``/proc`` (user + system time), and grouped
(:func:`process_group`): the Spark driver JVMs, the broker's JVM, Spark's Python workers, the driver
processes' Python, the ``lab run`` process (supervisor, producer, audit), the broker's proxy. Inside
the driver JVMs each thread is grouped by its name (:func:`thread_group`): the JIT compiler, the
garbage collector, the calls PySpark makes into the JVM (py4j's threads), the JVM's main thread
(start-up and ``SparkSubmit``), the streaming query's thread, the tasks.

A process first seen as a shell (``spark-submit`` execs ``spark-class``, which
execs the driver's JVM) is grouped again once it has exec'd.

The machine's own count (``/proc/stat``, every process, short-lived ones included) is recorded
beside it: ``unattributed`` is what the samples missed (processes shorter than a sample, the
last 0.1 s of each). ``cores_busy`` is the machine's CPU seconds over the wall time and the
cores: near 1, a scenario keeps every core busy, and runs side by side (two test processes)
only share them.

Run with ``python bench/run_cpu.py [--rounds N] [--pipeline P ...] [--variant V ...] [--out FILE]``; writes
medians per pipeline, and every run, to ``FILE`` (default ``bench/results/run_cpu.json``). ``--variant``
names :data:`bench.startup.VARIANTS` (a technique off): each round runs every variant in turn, so a
before/after pair shares the machine's state; a variant's medians are under ``pipeline/variant``.
``--archive NAME=PATH`` adds a variant ``NAME`` whose drivers map the class archive at ``PATH``
instead of today's (:func:`archive_variant`), run in turns with the ``--variant`` ones (default
``all``, today's archive): two archives side by side, such as one made by an earlier training
(:mod:`lab.spark.archive`) and today's. ``--jvm-flags NAME=FLAGS`` adds a variant ``NAME`` whose
drivers start with ``FLAGS`` (``LAB_DRIVER_JVM_OPTIONS``) instead of today's: a candidate set of flags
beside the default.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import core_seconds, machine  # noqa: E402
from bench.startup import SCENARIOS, VARIANTS  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
#: Process groups, in the order of the report.
GROUPS = ("driver JVMs", "broker JVM", "Python workers", "driver Python", "lab run (supervisor, producer, audit)",
          "broker proxy", "other")
#: Thread groups of the driver JVMs.
THREADS = ("JIT compiler", "garbage collector", "calls from PySpark (py4j)", "JVM main thread (start, SparkSubmit)",
           "streaming query", "tasks", "other")


def process_group(cmdline: str) -> str:
    """The group of a process from its command line (NUL-separated as in ``/proc``, or spaces) (pure)."""
    cmd = cmdline.replace("\0", " ")
    java = re.search(r"(^|/)java\s", cmd) is not None
    if "spark-class" in cmd or (java and ("org.apache.spark" in cmd or "pyspark" in cmd)):
        return "driver JVMs"
    if java and "kafka" in cmd.lower():
        return "broker JVM"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        return "Python workers"
    if "-m lab.pipelines.driver" in cmd:
        return "driver Python"
    if "-m lab.broker.proxy" in cmd:
        return "broker proxy"
    if re.search(r"(-m lab|/lab) run\b", cmd):
        return "lab run (supervisor, producer, audit)"
    return "other"


#: Shells and launchers that exec what they start (``spark-submit`` execs ``spark-class``, which execs the
#: driver's JVM in the same process): a process first seen as one is classified again once it has. Measured:
#: classified once, 3 of 9 runs put a driver JVM's 8-10 CPU s under "other".
LAUNCHERS = ("bash", "sh", "env", "setsid", "")


def is_launcher(cmdline: str) -> bool:
    """Whether a process may still exec what it starts: a shell or launcher other than Spark's ``spark-class``
    (pure)."""
    return os.path.basename(cmdline.split("\0", 1)[0]) in LAUNCHERS and "spark-class" not in cmdline


def thread_group(name: str) -> str:
    """The group of a driver JVM's thread from its name (``/proc/<pid>/task/<tid>/comm``, 15 characters) (pure)."""
    if name.startswith(("C1 Compiler", "C2 Compiler")):
        return "JIT compiler"
    if name.startswith(("GC Thread", "G1 ", "VM Thread")):
        return "garbage collector"
    if re.fullmatch(r"Thread-\d+", name):
        return "calls from PySpark (py4j)"
    if name == "java":
        return "JVM main thread (start, SparkSubmit)"
    if name.startswith("stream executio"):
        return "streaming query"
    if name.startswith("Executor task"):
        return "tasks"
    return "other"


def stat_cpu_s(stat: str) -> tuple[str, float, str]:
    """(name, user + system seconds, start time) from a ``/proc/.../stat`` line (pure)."""
    name = stat[stat.find("(") + 1:stat.rfind(")")]
    f = stat[stat.rfind(")") + 2:].split()
    return name, (int(f[11]) + int(f[12])) / TICK, f[19]


def machine_busy_s() -> float:
    """The machine's CPU seconds so far, every core, idle and I/O wait left out (``/proc/stat``)."""
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / TICK


def timed_run(args: list[str], env: dict) -> tuple[float, float, dict]:
    """One ``lab run ARGS --json`` as a user runs it: its wall time, the machine's CPU seconds over it, its report.

    Raises ``SystemExit`` with the run's exit status and the end of its standard error when it fails.
    """
    cpu, t0 = machine_busy_s(), time.monotonic()
    p = subprocess.run([sys.executable, "-m", "lab", "run", *args, "--json"], env=env, capture_output=True, text=True)
    wall, cpu = time.monotonic() - t0, machine_busy_s() - cpu
    if p.returncode != 0:
        raise SystemExit(f"lab run failed ({p.returncode}): {p.stderr[-1500:]}")
    return wall, cpu, json.loads(p.stdout.strip().splitlines()[-1])


def live_processes():
    """Each process in ``/proc`` now: ``(pid, command name, CPU seconds, start time)``; one that ends meanwhile is left
    out."""
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                yield (pid, *stat_cpu_s(open(f"/proc/{pid}/stat").read()))
            except (OSError, IndexError, ValueError):
                continue


class Sampler:
    """Each process's and each driver JVM thread's CPU seconds, the largest seen since :meth:`baseline`."""

    def __init__(self):
        self.procs: dict[tuple[str, str], tuple[str, float]] = {}
        self._launchers: set[tuple[str, str]] = set()  # processes seen only as a shell so far (is_launcher)
        self.threads: dict[tuple[str, str], tuple[str, float]] = {}
        self.base: dict[tuple[str, str], float] = {}

    def sample(self) -> None:
        for pid, name, cpu, start in live_processes():
            try:
                key = (pid, start)
                if key in self.procs and key not in self._launchers:
                    group = self.procs[key][0]
                else:
                    cmd = open(f"/proc/{pid}/cmdline").read()
                    group = process_group(cmd)
                    (self._launchers.add if is_launcher(cmd) else self._launchers.discard)(key)
                self.procs[key] = (group, cpu)
                if group == "driver JVMs" and name == "java":
                    for tid in os.listdir(f"/proc/{pid}/task"):
                        tname, tcpu, _ = stat_cpu_s(open(f"/proc/{pid}/task/{tid}/stat").read())
                        self.threads[(pid, tid)] = (thread_group(tname), tcpu)
            except (OSError, IndexError, ValueError):
                continue  # ended between the listing and the read

    def baseline(self) -> None:
        self.sample()
        self.base = {k: cpu for k, (_, cpu) in self.procs.items()}

    def totals(self) -> tuple[dict[str, float], dict[str, float]]:
        procs = dict.fromkeys(GROUPS, 0.0)
        for k, (group, cpu) in self.procs.items():
            procs[group] += cpu - self.base.get(k, 0.0)
        threads = dict.fromkeys(THREADS, 0.0)
        for group, cpu in self.threads.values():
            threads[group] += cpu
        return ({k: round(v, 2) for k, v in procs.items()}, {k: round(v, 2) for k, v in threads.items()})


def archive_variant(path: str) -> dict:
    """The environment of drivers that map the class archive at ``path`` rather than today's (pure)."""
    from lab.host.start_tuning import DRIVER_JVM_OPTIONS

    return {"LAB_CLASS_ARCHIVE": "off", "LAB_DRIVER_JVM_OPTIONS": f"{DRIVER_JVM_OPTIONS} -XX:SharedArchiveFile={path}"}


def flags_variant(flags: str) -> dict:
    """The environment of drivers started with the JVM flags ``flags`` instead of today's (pure)."""
    return {"LAB_DRIVER_JVM_OPTIONS": flags}


def one(pipeline: str, runs_dir: Path, variant: str = "all", variants: dict | None = None) -> dict:
    """One crash scenario of ``pipeline`` under ``variant``, sampled: its wall time, CPU per group, classification.

    ``variants``: the environment of each variant by name (default :data:`bench.startup.VARIANTS`).
    """
    env = dict(os.environ, LAB_RUNS_DIR=str(runs_dir), **(variants or VARIANTS)[variant])
    s = Sampler()
    s.baseline()
    busy0, t0 = machine_busy_s(), time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "lab", "run", "--pipeline", pipeline, *SCENARIOS[pipeline], "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
    while p.poll() is None:
        s.sample()
        time.sleep(0.1)
    wall, busy = time.perf_counter() - t0, machine_busy_s() - busy0
    procs, threads = s.totals()
    out = {"pipeline": pipeline, "variant": variant, "exit": p.returncode, "wall_s": round(wall, 2),
           "machine_cpu_s": round(busy, 2), "cores_busy": round(busy / wall / os.cpu_count(), 2), "processes": procs,
           "driver_jvm_threads": threads, "unattributed_s": round(busy - sum(procs.values()), 2)}
    try:
        out["guarantee"] = json.loads(p.stdout.read().strip().splitlines()[-1])["guarantee"]
    except (IndexError, KeyError, ValueError):
        out["guarantee"] = None
    return out


def summarise(runs: list[dict]) -> dict:
    """Medians of every figure of :func:`one` per pipeline (``pipeline/variant`` beside ``all``) (pure)."""
    out = {}
    for pipeline, variant in dict.fromkeys((r["pipeline"], r.get("variant", "all")) for r in runs):
        rs = [r for r in runs if (r["pipeline"], r.get("variant", "all")) == (pipeline, variant) and r["exit"] == 0]
        if not rs:
            continue
        key = pipeline if variant == "all" else f"{pipeline}/{variant}"
        med = lambda get, rs=rs: round(statistics.median(get(r) for r in rs), 2)  # noqa: E731
        out[key] = {
            "runs": len(rs), "wall_s": med(lambda r: r["wall_s"]), "machine_cpu_s": med(lambda r: r["machine_cpu_s"]),
            "cores_busy": med(lambda r: r["cores_busy"]),
            "processes": {g: med(lambda r, g=g: r["processes"][g]) for g in GROUPS},
            "driver_jvm_threads": {g: med(lambda r, g=g: r["driver_jvm_threads"][g]) for g in THREADS},
            "guarantees": sorted({str(r["guarantee"]) for r in rs}),
        }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pipeline", action="append", choices=sorted(SCENARIOS))
    ap.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    ap.add_argument("--archive", action="append", default=[], metavar="NAME=PATH",
                    help="a variant NAME whose drivers map the class archive at PATH")
    ap.add_argument("--jvm-flags", action="append", default=[], metavar="NAME=FLAGS",
                    help="a variant NAME whose drivers start with FLAGS (LAB_DRIVER_JVM_OPTIONS) instead of today's")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "run_cpu.json"))
    a = ap.parse_args(argv)
    variants, extra = dict(VARIANTS), []
    named = (  # option, its NAME=VALUE specs, what they must be, whether a value is valid, the variant it makes
        ("--archive", a.archive, "NAME=PATH, a new name and an existing archive file", lambda v: Path(v).is_file(),
         lambda v: archive_variant(str(Path(v).resolve()))),  # absolute: drivers run in their run directory
        ("--jvm-flags", a.jvm_flags, "NAME=FLAGS, a new name and at least one flag", lambda v: bool(v.strip()),
         flags_variant))
    for option, specs, wanted, valid, make in named:
        for spec in specs:
            name, _, value = spec.partition("=")
            if not name or name in variants or not valid(value):
                ap.error(f"{option} {spec!r}: give {wanted}")
            variants[name] = make(value)
            extra.append(name)
    chosen = (a.variant or ["all"]) + extra  # today's start beside the archives and flag sets
    core_s = core_seconds()  # the machine's speed before the runs: CPU seconds grow on a slower one
    runs = []
    with tempfile.TemporaryDirectory(prefix="lab-bench-cpu-") as tmp:
        for rnd in range(a.rounds):
            for pipeline in a.pipeline or list(SCENARIOS):
                for variant in chosen:
                    r = one(pipeline, Path(tmp) / f"{pipeline}-{variant}-{rnd}", variant, variants)
                    runs.append(r)
                    keys = ("pipeline", "variant", "wall_s", "machine_cpu_s", "cores_busy", "guarantee")
                    print(json.dumps({k: r[k] for k in keys}), flush=True)
    result = {"machine": machine() | {"core_seconds_before": core_s},
              "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "scenarios": SCENARIOS, "rounds": a.rounds,
              "variants": {v: variants[v] for v in chosen}, "summary": summarise(runs), "runs": runs}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
