"""Every notebook and every solution, headless, on a machine kept busy: do the lessons' checks hold under load?

A workshop runs on busy laptops (a browser, a video call, another kernel). This harness makes the load itself:
one CPU hog per core (a Python busy loop each), and with ``--memory`` also a memory hog that takes all but
``--leave-gb`` (2) of the memory available, touched page by page so that it is really used. Then it runs the
notebook tests (``tests/notebooks/test_notebooks.py`` and ``test_solutions.py``: every notebook and every
solutions notebook through papermill with the suite's small parameters, each checked by its own check) one at a
time, ``--rounds`` times (3). Per test and round it records pass/fail, the failing check's message, the wall
time and the load average at the test's end (``bench/soak_plugin.py``, a pytest plugin), and writes
``bench/results/load.json`` (``--out``).

The hogs are this process's children, each the leader of its own process group; they are ended by PID when the
harness stops, at the end, on an error, on Ctrl-C or SIGTERM, and the result file records that none was left.

Run with ``make soak`` or ``.venv/bin/python bench/soak.py [--rounds N] [--memory] [--only EXPR] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import core_seconds  # noqa: E402
from lab.host import processes  # noqa: E402

TESTS = ["tests/notebooks/test_notebooks.py::test_notebook_runs_headless", "tests/notebooks/test_solutions.py"]
CPU_HOG = "while True: pass"
# Takes N bytes and writes one byte per page, so the kernel really backs them; then waits to be killed.
MEMORY_HOG = ("import sys, time\nn = int(sys.argv[1])\nb = bytearray(n)\nfor i in range(0, n, 4096):\n    b[i] = 1\n"
              "print('held', flush=True)\nwhile True:\n    time.sleep(60)\n")


def available_bytes() -> int:
    """``MemAvailable`` of /proc/meminfo: what can be taken without swapping."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def start_hogs(memory: bool, leave_gb: float, log: Path) -> list[subprocess.Popen]:
    """One CPU hog per core, and the memory hog when asked (started first, waited for until it holds its memory)."""
    hogs = []
    if memory:
        take = max(0, available_bytes() - int(leave_gb * 2**30))
        hog = processes.spawn([sys.executable, "-c", MEMORY_HOG, str(take)], log_path=log)
        hogs.append(hog)
        deadline = time.monotonic() + 300
        while "held" not in processes.read_log(log):
            if hog.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the memory hog did not take {take / 2**30:.1f} GiB: "
                                   f"{processes.read_log(log)[-300:]}")
            time.sleep(0.5)
    for _ in range(os.cpu_count() or 1):
        hogs.append(processes.spawn([sys.executable, "-c", CPU_HOG]))
    return hogs


def stop_hogs(hogs: list[subprocess.Popen]) -> list[int]:
    """End every hog by its PID (SIGKILL to its group); the PIDs still alive afterwards (none, normally)."""
    for hog in hogs:
        processes.stop_process(hog, grace_s=5)
    return [h.pid for h in hogs if processes.pid_alive(h.pid)]


def run_round(number: int, only: str | None, work: Path) -> dict:
    """One pass of the notebook tests, one at a time; the plugin's records, the wall time and pytest's exit status."""
    records = work / f"round-{number}.jsonl"
    env = dict(os.environ, SOAK_RECORDS=str(records), PYTHONPATH=str(ROOT))
    args = [sys.executable, "-m", "pytest", "-q", "-p", "bench.soak_plugin", "-p", "no:cacheprovider", *TESTS]
    if only:
        args += ["-k", only]
    started = time.monotonic()
    proc = processes.spawn(args, log_path=work / f"round-{number}.log", env=env, cwd=ROOT)
    try:
        code = proc.wait()
    except BaseException:
        processes.stop_tree(proc, grace_s=30)
        raise
    tests = [json.loads(line) for line in records.read_text().splitlines()] if records.exists() else []
    return {"round": number, "wall_s": round(time.monotonic() - started, 1), "pytest_exit": code,
            "failures": sum(t["outcome"] in ("failed", "error") for t in tests), "tests": tests}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memory", action="store_true", help="a memory hog too, leaving --leave-gb free")
    ap.add_argument("--leave-gb", type=float, default=2.0)
    ap.add_argument("--only", default=None, help="pytest -k expression: a subset of the notebooks")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "load.json"))
    a = ap.parse_args(argv)
    if a.rounds < 1:
        ap.error(f"--rounds {a.rounds}: give 1 or more")

    def terminate(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    work = Path(tempfile.mkdtemp(prefix="lab-soak-"))
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    result = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "commit": commit, "cpus": os.cpu_count(),
              "setting": {"cpu_hogs": os.cpu_count(), "memory_hog": a.memory,
                          "leave_gb": a.leave_gb if a.memory else None},
              "core_seconds_before_hogs": core_seconds(), "rounds": []}
    hogs: list[subprocess.Popen] = []
    try:
        hogs = start_hogs(a.memory, a.leave_gb, work / "memory-hog.log")
        result["hog_pids"] = [h.pid for h in hogs]
        for n in range(1, a.rounds + 1):
            r = run_round(n, a.only, work)
            result["rounds"].append(r)
            print(f"round {n}: {r['failures']} failed of {len(r['tests'])} in {r['wall_s']:.0f} s", flush=True)
            for t in r["tests"]:
                if t["outcome"] in ("failed", "error"):
                    print(f"  {t['test']}: {t['message']}", flush=True)
    except KeyboardInterrupt as e:
        result["interrupted"] = str(e) or "Ctrl-C"
    finally:
        result["hogs_left_running"] = stop_hogs(hogs)
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"hogs stopped ({len(hogs)}; left running: {result['hogs_left_running'] or 'none'}); "
              f"results: {a.out}; logs: {work}")
    total = sum(r["failures"] for r in result["rounds"])
    return 0 if total == 0 and "interrupted" not in result and len(result["rounds"]) == a.rounds else 1


if __name__ == "__main__":
    sys.exit(main())
