"""``lab doctor``: is this machine ready? One PASS/FAIL line per check, with the fix."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def check_python() -> Check:
    v = sys.version_info
    ok = (3, 11, 5) <= (v.major, v.minor, v.micro) and (v.major, v.minor) < (3, 14)
    return Check("python", ok, f"Python {v.major}.{v.minor}.{v.micro} at {sys.executable}",
                 "" if ok else "use Python 3.11.5-3.13 (the pinned numpy and soupsieve need 3.11.5+; 3.11 is tested)")


def check_java() -> Check:
    from lab.errors import LabError
    from lab.java import find_java, install_hint

    try:
        j = find_java()
        return Check("java", True, f"Java {j.version} at {j.home}")
    except LabError as e:
        return Check("java", False, str(e).split(";")[0], install_hint())


def check_pyspark() -> Check:
    try:
        import pyspark
    except ImportError:
        return Check("pyspark", False, "pyspark is not installed", "make venv")
    return Check("pyspark", True, f"pyspark {pyspark.__version__}")


def check_broker() -> Check:
    from lab import broker
    from lab.errors import LabError

    bootstrap = os.environ.get("LAB_KAFKA_BOOTSTRAP")
    try:
        if bootstrap:
            broker.check_reachable(bootstrap)
            return Check("broker", True, f"Kafka reachable at LAB_KAFKA_BOOTSTRAP={bootstrap}")
        from lab.config import env_runs_dir

        running = broker.load_running(env_runs_dir())
        if running:
            broker.check_reachable(running.bootstrap, source="the running embedded broker")
            return Check("broker", True, f"embedded broker running at {running.bootstrap}")
        with tempfile.TemporaryDirectory() as tmp:
            info = broker.start_embedded(Path(tmp))
            try:
                from lab.kafka_tools import create_topic
                create_topic(info.bootstrap, "lab-doctor", 1)
            finally:
                broker.stop_embedded(info)
        return Check("broker", True, f"embedded Tansu starts, serves a topic and stops ({broker.tansu_binary()})")
    except LabError as e:
        return Check("broker", False, str(e), "unset LAB_KAFKA_BOOTSTRAP, or start that Kafka")


def check_disk(path: str = ".") -> Check:
    free_gb = shutil.disk_usage(path).free / 1e9
    ok = free_gb >= 2
    return Check("disk", ok, f"{free_gb:.1f} GB free in {Path(path).resolve()}",
                 "" if ok else "free at least 2 GB (runs, checkpoints and WAL live under runs/)")


def run_checks() -> list[Check]:
    """Run every check; never raises."""
    checks = []
    for fn in (check_python, check_java, check_pyspark, check_broker, check_disk):
        try:
            checks.append(fn())
        except Exception as e:  # a check that crashes is a failed check, not a crashed doctor
            checks.append(Check(fn.__name__.removeprefix("check_"), False, f"check failed: {e!r}"))
    return checks
