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
    """One line of ``lab doctor``; a failed ``optional`` check is shown (``SKIP``) but fails nothing."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    optional: bool = False

    @property
    def status(self) -> str:
        """``PASS``, ``SKIP`` (an optional check that failed: nothing depends on it) or ``FAIL``."""
        return "PASS" if self.ok else "SKIP" if self.optional else "FAIL"


def check_python() -> Check:
    """The interpreter against the range ``pyproject.toml`` claims (``Requires-Python`` of the installed lab)."""
    from importlib.metadata import metadata

    from lab.host.python_check import supported_range, verdict

    v = sys.version_info
    low, high = supported_range(f'requires-python = "{metadata("lab")["Requires-Python"]}"')
    problem = verdict(tuple(v[:3]), sys.executable, low, high)
    return Check("python", problem is None, f"Python {v.major}.{v.minor}.{v.micro} at {sys.executable}",
                 "" if problem is None else problem.split(": ", 1)[1])


def check_java() -> Check:
    from lab.errors import LabError
    from lab.host.java import find_java, install_hint

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


def check_jars() -> list[Check]:
    """One check per pinned jar set (:mod:`lab.host.jars`): every jar cached with its pinned SHA-1, hashed now.

    Never uses the network (measured: 50-55 ms to hash all 50 jars).
    """
    from lab.host import jars

    checks = []
    for name, js in jars.manifest().items():
        directory = jars.set_dir(name)
        bad = jars.missing(name, rehash=True)
        if not bad:
            checks.append(Check("jars", True, f"{name}: {len(js.jars)} jars ({js.size / 1e6:.1f} MB) cached and "
                                              f"verified at {directory}"))
        else:
            checks.append(Check(
                "jars", False,
                f"{name}: {len(bad)} of {len(js.jars)} jars missing or not matching their pinned SHA-1 in {directory} "
                f"(first: {bad[0].coord})",
                f"lab fetch --set {name} (needs the internet once), or copy {directory} from a machine that has it"))
    return checks


def check_class_archive() -> Check:
    """The driver JVM's class archive (:mod:`lab.spark.archive`): present for today's Java and Spark, or the fix."""
    from lab.host.start_tuning import StartTuning
    from lab.spark import archive as class_archive

    if not StartTuning.from_env().class_archive:
        return Check("class archive", True, "off (LAB_CLASS_ARCHIVE=off): Spark drivers start without it")
    return _archive_check("class archive", class_archive.archive_path(), "Spark",
                          "lab fetch (about 40 s, offline); the first Spark run builds it otherwise")


def check_broker_archive() -> Check:
    """The Kafka broker JVM's class archive (:mod:`lab.broker.archive`): present for today's Java and Kafka, or the
    fix."""
    from lab.broker import apache as kafka_broker, archive as broker_archive
    from lab.host import jars

    if not broker_archive.enabled():
        return Check("broker class archive", True, f"off ({broker_archive.SWITCH}=off): Kafka brokers start without it")
    if jars.missing(kafka_broker.KAFKA_JARS):
        return Check("broker class archive", True, "made after the Kafka jars (see broker)")
    return _archive_check("broker class archive", broker_archive.archive_path(), "Kafka",
                          "lab fetch (about 10 s, offline); the first broker start builds it otherwise")


def _archive_check(name: str, path: Path, product: str, fix: str) -> Check:
    if path.is_file():
        return Check(name, True, f"{path.stat().st_size / 1e6:.0f} MB at {path}")
    return Check(name, False, f"not built for these Java and {product} versions ({path})", fix)


def check_broker() -> Check:
    from lab.broker import (
        apache as kafka_broker,
        embedded as broker,
        external as external_broker,
        shared as shared_broker,
    )
    from lab.errors import LabError

    bootstrap = os.environ.get("LAB_KAFKA_BOOTSTRAP")
    try:
        if bootstrap:
            external_broker.check_reachable(bootstrap)
            return Check("broker", True, f"Kafka reachable at LAB_KAFKA_BOOTSTRAP={bootstrap}")
        from lab.host.env import env_runs_dir

        running = shared_broker.load_running(env_runs_dir())
        if running:
            external_broker.check_reachable(running.bootstrap, source="the running embedded broker")
            what = " ".join(filter(None, (running.product, running.version)))
            return Check("broker", True, f"embedded broker running at {running.bootstrap} ({what})")
        from lab.host import jars

        if jars.missing(kafka_broker.KAFKA_JARS):  # the doctor never downloads: `lab fetch` does
            return Check("broker", False, f"the embedded Apache Kafka needs the {kafka_broker.KAFKA_JARS} "
                                          "jars, which are not cached",
                         "lab fetch (needs the internet once), or set LAB_KAFKA_BOOTSTRAP to a Kafka of your own")
        with tempfile.TemporaryDirectory() as tmp:
            info = broker.start_embedded(Path(tmp))
            try:
                from lab.kafka.tools import create_topic
                create_topic(info.bootstrap, "lab-doctor", 1)
            finally:
                broker.stop_embedded(info)
        version = f" {info.version}" if info.version else ""
        return Check("broker", True, f"embedded Apache Kafka{version} starts, serves a topic and stops")
    except LabError as e:
        return Check("broker", False, str(e), "unset LAB_KAFKA_BOOTSTRAP, or start that Kafka")


def check_flink() -> Check:
    """The flink pipeline's PyFlink environment and Kafka connector (:mod:`lab.flink.env`); optional.

    Only ``--pipeline flink`` and notebook 08's Flink section use them; they are
    made by ``make flink``, not by ``make setup``.
    """
    from lab.flink import env as flink_env

    try:
        found = flink_env.problems()
    except Exception as e:  # an unreadable environment or cache: still optional
        found = [f"the Flink environment could not be checked: {e!r}"]
    if found:
        return Check("flink", False, "; ".join(found) + " (optional: only the flink pipeline needs it)",
                     "make flink (online, once: PyFlink in its own environment and its Kafka connector)",
                     optional=True)
    return Check("flink", True, f"PyFlink {flink_env.FLINK_VERSION} at {flink_env.env_dir()}, "
                                f"its Kafka connector ({flink_env.JAR_SET}) cached")


def check_java_classes() -> list[Check]:
    """The storm, samza and share pipelines' compiled classes, and the Java transactional producer's
    (:mod:`lab.host.java_build`); their jars are in :func:`check_jars`.

    A run compiles them when missing (about 2 s, from the cached jars), so neither fails anything.
    """
    from lab.broker.java_clients import TXN_PRODUCER
    from lab.samza.build import JOB
    from lab.share.build import STATE
    from lab.storm.build import TOPOLOGY

    checks = []
    for sources in (TOPOLOGY, JOB, STATE, TXN_PRODUCER):
        found = sources.problems()
        if found:
            checks.append(Check(sources.name, False, "; ".join(found) + f" (a {sources.name} run compiles them "
                                "first; lab fetch does it once)", "lab fetch", optional=True))
        else:
            checks.append(Check(sources.name, True, f"classes compiled at {sources.classes_dir()}"))
    return checks


def check_disk(path: str = ".") -> Check:
    free_gb = shutil.disk_usage(path).free / 1e9
    ok = free_gb >= 2
    return Check("disk", ok, f"{free_gb:.1f} GB free in {Path(path).resolve()}",
                 "" if ok else "free at least 2 GB (runs, checkpoints and WAL live under runs/)")


def check_jupyter() -> Check:
    """The link of ``make lab``'s running JupyterLab, to find it again (``lab doctor`` only: it holds the token)."""
    from lab.host.env import default_workspace
    from lab.host.jupyter import running

    servers = running(default_workspace())
    if not servers:
        return Check("jupyter", False, f"no JupyterLab serving {default_workspace()}", "make lab", optional=True)
    return Check("jupyter", True, "running: " + " ".join(s.link for s in servers))


def run_checks() -> list[Check]:
    """Run every check; never raises."""
    checks = []
    for fn in (check_python, check_java, check_pyspark, check_jars, check_class_archive, check_broker_archive,
               check_broker, check_flink, check_java_classes, check_disk):
        try:
            result = fn()
            checks.extend(result if isinstance(result, list) else [result])
        except Exception as e:  # a check that crashes is a failed check, not a crashed doctor
            checks.append(Check(fn.__name__.removeprefix("check_"), False, f"check failed: {e!r}"))
    return checks
