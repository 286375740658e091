"""Where a whole command's CPU goes (by default ``make test-all``, the whole suite): CPU seconds per kind of process.

The suite is CPU-bound on 2 cores (both cores 99% busy by ``/proc/stat``), so its
time is cut only by cutting CPU somewhere; this says where. While the command
runs, every process on the machine is sampled each 0.5 s from ``/proc`` (user +
system time, the largest seen per process) and grouped by its command line
(:func:`suite_group`): Spark's driver, executor and standalone JVMs, the Kafka
brokers' JVMs, Flink's, Spark's Python workers, the drivers' Python, the notebook
kernels, the test processes, the ``lab`` commands, the brokers' proxies, the
browser tests' Chromium and Jupyter. A process first seen as a shell (``bash``
running ``spark-class`` or ``kafka-run-class``) is looked at again once it has
exec'd its JVM.

The machine's own count (``/proc/stat``) is beside it: ``unattributed`` is what the
samples missed (processes shorter than a sample, the last half second of each).

Run with ``python bench/suite_cpu.py [--out FILE] [-- COMMAND ...]``; writes the groups,
the wall time, the exit status and the machine's core speed to ``FILE`` (default
``bench/results/suite_cpu.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` importable from the checkout
from bench.machine import core_seconds, machine  # noqa: E402
from bench.run_cpu import is_launcher, live_processes, machine_busy_s  # noqa: E402

#: (group, any of these in the command line), first match wins; "other" otherwise.
RULES = (
    ("Spark executor JVMs", ("CoarseGrainedExecutorBackend",)),
    ("Spark standalone master and workers", ("org.apache.spark.deploy.master.Master",
                                             "org.apache.spark.deploy.worker.Worker")),
    ("Spark driver JVMs", ("spark-class", "org.apache.spark.deploy.SparkSubmit", "org.apache.spark.launcher.Main")),
    ("Kafka broker JVMs", ("kafka.Kafka", "kafka.tools.StorageTool", "kafka-run-class")),
    ("Flink JVMs", ("org.apache.flink",)),
    ("Spark Python workers", ("pyspark.daemon", "lab.spark.daemon", "pyspark.worker")),
    ("driver Python", ("-m lab.pipelines.driver",)),
    ("notebook kernels", ("ipykernel_launcher",)),
    ("broker proxies", ("-m lab.broker.proxy",)),
    ("browser tests (Chromium, Jupyter)", ("chrom", "playwright", "jupyter-lab", "-m jupyterlab", "node ")),
    # before the test processes: a command's arguments may name a pytest temporary directory
    ("lab commands (run, matrix and its papermill rows)", ("-m lab ", "/bin/lab ", "-m lab.", "-m papermill")),
    ("test processes (pytest and its workers)", ("-m pytest", "exec(eval(sys.stdin")),
)


def suite_group(cmdline: str) -> str:
    """The group of a process from its command line (NUL-separated as in ``/proc``, or spaces) (pure)."""
    cmd = cmdline.replace("\0", " ").strip() + " "
    for group, needles in RULES:
        if any(n in cmd for n in needles):
            return group
    return "other"


class SuiteSampler:
    """Each process's CPU seconds (the largest seen) and its group, by ``(pid, start time)``."""

    def __init__(self):
        self.procs: dict[tuple[str, str], list] = {}  # key: [group, launcher?, cpu]

    def sample(self) -> None:
        for pid, _, cpu, start in live_processes():
            try:
                key = (pid, start)
                seen = self.procs.get(key)
                if seen is None or seen[1]:
                    cmd = open(f"/proc/{pid}/cmdline").read()
                    seen = self.procs[key] = [suite_group(cmd), is_launcher(cmd), 0.0]
                seen[2] = max(seen[2], cpu)
            except (OSError, IndexError, ValueError):
                continue  # ended between the listing and the read

    def totals(self, before: dict) -> dict[str, dict]:
        """CPU seconds and process count per group, less what each process had used at ``before``."""
        out: dict[str, dict] = {}
        for key, (group, _, cpu) in self.procs.items():
            g = out.setdefault(group, {"cpu_s": 0.0, "processes": 0})
            g["cpu_s"] += cpu - before.get(key, 0.0)
            g["processes"] += 1
        return {k: {"cpu_s": round(v["cpu_s"], 1), "processes": v["processes"]}
                for k, v in sorted(out.items(), key=lambda kv: -kv[1]["cpu_s"])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "suite_cpu.json"))
    ap.add_argument("command", nargs="*", default=["make", "test-all"], help="default: make test-all")
    a = ap.parse_args(argv)
    core_s = core_seconds()  # a quiet machine's speed, before the run: figures from two machines compare
    s = SuiteSampler()
    s.sample()
    before = {k: v[2] for k, v in s.procs.items()}
    busy0, t0 = machine_busy_s(), time.monotonic()
    # SIGINT's default for the command even when this runs as a shell's background job (which ignores it)
    p = subprocess.Popen(a.command, cwd=ROOT, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while p.poll() is None:
        s.sample()
        time.sleep(0.5)
    s.sample()
    wall, busy = time.monotonic() - t0, machine_busy_s() - busy0
    groups = s.totals(before)
    attributed = sum(g["cpu_s"] for g in groups.values())
    result = {"machine": machine() | {"core_seconds_before": core_s}, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "command": " ".join(a.command), "exit": p.returncode, "wall_s": round(wall, 1),
              "machine_cpu_s": round(busy, 1), "cores_busy": round(busy / wall / os.cpu_count(), 2),
              "unattributed_s": round(busy - attributed, 1), "groups": groups}
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
