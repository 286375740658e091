"""The machine a bench's figures were measured on, recorded beside them in ``bench/results``."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path


def machine() -> dict:
    """Cores, Python, platform and the load average when the figures were taken (a loaded machine explains slow
    ones)."""
    return {"cpus": os.cpu_count(), "cpu_model": cpu_model(), "python": platform.python_version(),
            "platform": platform.platform(), "load_average": [round(x, 2) for x in os.getloadavg()]}


def cpu_model() -> str | None:
    """The first ``model name`` of ``/proc/cpuinfo`` (None where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return None


def core_seconds(rounds: int = 3, n: int = 5_000_000) -> float:
    """Seconds one core takes for a fixed Python loop, the best of ``rounds``: figures from two machines compare.

    Machines of one kind differ: on two days, one core of this project's machines ran the same
    structured crash scenario in 12.8 s and in 19.4 s (``bench/startup.py``). Taken on a quiet
    machine, before the bench's work (the best of three leaves out a passing neighbour).

    It times Python alone, so it can read a slow hour as a quick one: on 2026-11-29 it read
    0.18-0.21 s both before a ``make test`` of 15:24 and before one of 18:24 an hour and a half later,
    whose unit tests took the same time and whose JVM-running tests about 20% longer
    (``bench/README.md``). Two copies at once on the 2 cores read the same as one.
    """
    best = float("inf")
    for _ in range(rounds):
        t0, s = time.perf_counter(), 0
        for i in range(n):
            s += i * i
        best = min(best, time.perf_counter() - t0)
    return round(best, 3)
