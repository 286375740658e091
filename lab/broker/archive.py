"""The Kafka broker JVM's class archive (Java's AppCDS): a broker ready in half the time, with half the CPU.

Every ``lab run``, notebook scenario, matrix row and cluster node starts an
Apache Kafka JVM, and most of its start is loading, parsing and verifying the
classes of Kafka, Scala and their libraries. Mapped from an archive instead
(measured on 2 cores, Kafka 4.1.1, Java 17, ``bench/broker_start.py
--technique archive``, see bench/README.md, Past experiments): a one-node
broker is ready in about half the time and has used about half the CPU by then.

Protocol
--------
* One archive per Java and Kafka jar set: its name carries a key hashed from
  the Java executable and version, the broker's JVM flags
  (:data:`lab.broker.apache.KAFKA_JVM_FLAGS`), and the path, size and mtime of
  every jar of the broker's class path: ``<cache>/cds/broker-<key>.jsa``, beside
  the driver's (:mod:`lab.spark.archive`), with ``broker-<key>.json`` naming the
  jar directory. A new archive replaces that directory's older one.
* Made by :func:`ensure` (``lab fetch``; else the first broker start, about
  10 s once): a training broker in its own process
  (``python -m lab.broker.archive_train``) starts under ``-XX:ArchiveClassesAtExit``,
  serves what the lab asks of a broker (:func:`lab.broker.archive_train.train`: a topic created,
  idempotent and transactional producers, a commit and an abort, a consumer
  group committing offsets), and is stopped with SIGTERM: Kafka shuts down
  cleanly and the JVM writes the archive as it exits. Built under the same lock
  as the driver's (:func:`lab.host.class_archive.ensure_archive`).
* Used by :func:`java_options`: every broker JVM (``kafka.Kafka``, one node or
  a cluster's, and the ``StorageTool`` format) maps it with
  ``-XX:SharedArchiveFile`` when it exists. The JVM checks it again itself and
  starts without it when the jars no longer match.
* ``LAB_BROKER_ARCHIVE`` ``on`` (default) / ``off``: ``off`` neither builds nor
  maps it (the bench's "before").

On failure: a training that fails, or a cache that cannot be written, is
reported in :class:`lab.host.class_archive.ArchiveStatus` and never raised; brokers
then start without the archive, slower, the same.

Delivery effect: none. The archive holds class metadata only; the broker runs
the same code on the same data with the same settings.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from lab.host.class_archive import ArchiveStatus, archive_dir, build_archive, ensure_archive

#: The switch (see the module docstring).
SWITCH = "LAB_BROKER_ARCHIVE"


def enabled(env=None) -> bool:
    """Whether brokers build and map the archive (``LAB_BROKER_ARCHIVE`` of ``env``, default ``os.environ``).

    Raises
    ------
    LabError
        A value other than on/off, named with the choices (a run's start checks it too:
        :class:`lab.host.start_tuning.StartTuning`).
    """
    from lab.host.env import switch

    return switch(os.environ if env is None else env, SWITCH)


def key() -> str:
    """The archive's key: a hash of the JVM, its flags and the jars the classes come from.

    Raises
    ------
    LabError
        No JVM (:func:`lab.host.java.find_java`), or the Kafka jars not cached (a key never downloads them).
    """
    from lab.broker.jvm import KAFKA_JVM_FLAGS
    from lab.errors import LabError
    from lab.host import jars
    from lab.host.jar_sets import KAFKA_JARS
    from lab.host.java import find_java

    if jars.missing(KAFKA_JARS):
        raise LabError(f"the {KAFKA_JARS} jars are not cached (lab fetch)")
    java = find_java()
    h = hashlib.sha256()
    h.update(f"{os.path.realpath(java.executable)}\n{java.version}\n{' '.join(KAFKA_JVM_FLAGS)}\n".encode())
    directory = jars.set_dir(KAFKA_JARS)
    for jar in (directory / j.file for j in jars.jar_set(KAFKA_JARS).jars):
        st = jar.stat()
        h.update(f"{jar} {st.st_size} {int(st.st_mtime)}\n".encode())
    return h.hexdigest()[:16]


def archive_path(cache: str | Path | None = None) -> Path:
    """Where today's archive is (or would be) stored."""
    return archive_dir(cache) / f"broker-{key()}.jsa"


def java_options(cache: str | Path | None = None) -> list[str]:
    """A broker JVM's options for the archive: ``-XX:SharedArchiveFile=…`` when it exists and is on, else none.

    Never raises for a missing archive, missing jars or a missing JVM (the broker's own
    start reports those, with the fix).
    """
    try:
        path = archive_path(cache) if enabled() else None
    except Exception:
        return []
    return [f"-XX:SharedArchiveFile={path}"] if path is not None and path.is_file() else []


def ensure(cache: str | Path | None = None, progress=None, retry: bool = False) -> ArchiveStatus | None:
    """Build today's archive unless it exists or is off; once per Java and Kafka jars (about 10 s).

    Parameters
    ----------
    progress : callable, optional
        Called with one line before a build starts.
    retry : bool
        Build again even though an earlier build failed (``lab fetch``;
        :func:`lab.host.class_archive.ensure_archive`).

    Returns
    -------
    ArchiveStatus or None
        None when off. ``present`` False with ``error`` when it could not be built:
        no JVM or no cached Kafka jars (the broker's own start reports those), a failed
        training, a cache that cannot be written. Brokers then start without it.

    Raises
    ------
    LabError
        ``LAB_BROKER_ARCHIVE`` neither on nor off.
    """
    if not enabled():
        return None
    try:
        path = archive_path(cache)
    except Exception as e:  # no JVM or no jars yet
        return ArchiveStatus(archive_dir(cache) / "broker-.jsa", False, error=f"cannot key the archive: {e}")
    return ensure_archive(path, _build, progress,
                          "building the Kafka broker JVM's class archive, once for these Java and Kafka versions "
                          "(about 10 s)", retry=retry)


#: The module ``python -m`` runs to train the archive (a leaf: nothing imports it; a test checks it exists).
TRAINER = "lab.broker.archive_train"


def _build(path: Path) -> str | None:
    from lab.host import jars
    from lab.host.jar_sets import KAFKA_JARS

    return build_archive(path, TRAINER, str(jars.set_dir(KAFKA_JARS)))
