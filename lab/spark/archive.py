"""The driver JVM's class archive (Java's AppCDS): Spark drivers that start in half the time.

A Spark driver's first seconds go to loading, parsing and verifying some
twenty thousand classes. Java's Class Data Sharing maps them from an
archive instead (measured on 2 cores, pyspark 4.3.0, Java 17, bench/startup.py,
medians of 3: a restarted structured driver's SparkSession ready 6.2 s → 3.6 s
after its process started, its first batch done 13.1 s → 9.0 s).

Protocol
--------
* One archive per installed Java, Spark and Spark Kafka connector: its file
  name carries a key hashed from the Java executable and version, the
  pyspark version, and the path, size and mtime of every jar a driver
  starts with (Spark's, and the cached Kafka connector's):
  ``<cache>/cds/driver-<key>.jsa``, ``<cache>`` as in :mod:`lab.host.jars`;
  beside it ``driver-<key>.json`` names its Spark installation. A new archive
  replaces that installation's older one (and those of installations that no
  longer exist); other installations' archives (another clone's virtual
  environment) stay.
* Made by :func:`build`: a training session in its own process
  (``python -m lab.spark.archive_train``) runs what drivers run (a SparkSession
  with the connector, the Python workers, a streaming query with
  ``foreachBatch`` and ``mapInArrow``, a DStream) under
  ``-XX:ArchiveClassesAtExit``; the JVM writes the archive when it exits
  cleanly, and the lab renames it into place (readers never see half a file).
  A lock file keeps two builders from racing; the second one waits and
  reuses the first one's archive. That build, its lock and its record of a
  failure are every class archive's (:mod:`lab.host.class_archive`); what is
  Spark's here is the key, the training and the installation it names.
* Used by :func:`java_options`: ``-XX:SharedArchiveFile=<archive>`` when the
  archive for today's key exists, nothing otherwise. The JVM checks the
  archive again itself (``-Xshare:auto``, its default) and starts without it
  when the jars no longer match: a missing or stale archive costs start-up
  time, never a failed start.

Delivery effect: none. The archive holds class metadata only; the same
classes run the same code.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from lab.host.class_archive import ArchiveStatus, archive_dir, build_archive, ensure_archive


def _driver_jars() -> list[Path]:
    """The jars a driver JVM starts with: Spark's, and the Kafka connector's when cached
    (:func:`lab.spark.session.session_conf`)."""
    from lab.host import jars
    from lab.host.jar_sets import SPARK_KAFKA_JARS

    # The Spark the driver launches: SPARK_HOME when set (the Docker image's /opt/spark), else pyspark's own.
    found = sorted((_spark_home() / "jars").glob("*.jar"))
    if not jars.missing(SPARK_KAFKA_JARS):
        directory = jars.set_dir(SPARK_KAFKA_JARS)
        found += [directory / j.file for j in jars.jar_set(SPARK_KAFKA_JARS).jars]
    return found


def _pyspark_module(name: str):
    """PySpark's module ``name`` (``version``, ``find_spark_home``: neither imports anything of PySpark's) loaded
    from its file without importing the package, whose ``__init__`` takes 0.18 s (measured) of a run's start.

    Raises
    ------
    ModuleNotFoundError
        When PySpark is not installed.
    """
    import importlib.util

    package = importlib.util.find_spec("pyspark")
    if package is None or not package.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'pyspark'", name="pyspark")
    path = Path(list(package.submodule_search_locations)[0]) / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"lab._pyspark_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def key() -> str:
    """The archive's key: a hash of what its classes were loaded from (see the module docstring)."""
    from lab.host.java import find_java

    java = find_java()
    h = hashlib.sha256()
    h.update(f"{os.path.realpath(java.executable)}\n{java.version}\n{_pyspark_module('version').__version__}\n".encode())
    for jar in _driver_jars():
        st = jar.stat()
        h.update(f"{jar} {st.st_size} {int(st.st_mtime)}\n".encode())
    return h.hexdigest()[:16]


def archive_path(cache: str | Path | None = None) -> Path:
    """Where today's archive is (or would be) stored."""
    return archive_dir(cache) / f"driver-{key()}.jsa"


def java_options(cache: str | Path | None = None) -> list[str]:
    """The driver JVM's options for the archive: ``-XX:SharedArchiveFile=…`` when it exists, else none.

    Never raises for a missing or unreadable archive (a driver then starts without it).
    """
    try:
        path = archive_path(cache)
    except Exception:  # no JVM or no pyspark: the session's own start reports that, with the fix
        return []
    return [f"-XX:SharedArchiveFile={path}"] if path.is_file() else []


def ensure(cache: str | Path | None = None, progress=None, retry: bool = False) -> ArchiveStatus:
    """Build today's archive unless it exists (once per machine and installed versions).

    Parameters
    ----------
    progress : callable, optional
        Called with one line before a build starts (it takes about half a minute).
    retry : bool
        Build again even though an earlier build failed (``lab fetch``); see
        :func:`lab.host.class_archive.ensure_archive`.

    Returns
    -------
    ArchiveStatus
        ``present`` False with ``error`` when the build failed: drivers then start
        without the archive (slower, same results). Never raises for a failed build.
    """
    return ensure_archive(archive_path(cache), build, progress,
                          "building the driver JVM's class archive, once for these Java and Spark versions (about 40 "
                          "s)",
                          retry=retry)


#: The module ``python -m`` runs to train the driver archive (a leaf: nothing imports it; a test checks it exists).
TRAINER = "lab.spark.archive_train"


def build(path: Path) -> str | None:
    """Run the driver's training session and move its archive to ``path``; the error text when that failed."""
    return build_archive(path, TRAINER, str(_spark_home()))


def _spark_home() -> Path:
    return Path(_pyspark_module("find_spark_home")._find_spark_home()).resolve()
