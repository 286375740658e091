"""A JVM's class archive (Java's AppCDS): how any of the lab's JVMs gets one, whatever it runs.

The driver's archive (:mod:`lab.spark.archive`) and the Kafka broker's
(:mod:`lab.broker.archive`) differ in what they key on and what their
training runs; the rest is one protocol, here.

Protocol
--------
* Archives live in ``<cache>/cds/`` (:func:`archive_dir`, ``<cache>`` as in
  :mod:`lab.host.jars`), named ``<kind>-<key>.jsa``; beside each,
  ``<kind>-<key>.json`` names the installation (``home``) it belongs to.
* :func:`ensure_archive` builds one unless it exists. A lock file beside the
  archives keeps two builders from racing: the second waits, then finds the
  first one's archive. A failed build leaves ``<archive>.failed`` (its error),
  and later calls return that error without building again until asked to
  retry (``lab fetch``).
* :func:`build_archive` runs the training, ``python -m <trainer> WORK ARCHIVE``,
  in its own process under a deadline (:data:`BUILD_TIMEOUT_S`); the JVM writes
  the archive as it exits, and it is renamed into place (readers never see
  half a file). It replaces the archives of its kind that belong to the same
  installation, or to one that no longer exists; other installations' archives
  (another clone's virtual environment) stay.

On failure: a failed training or a cache that cannot be written is reported in
:class:`ArchiveStatus` and never raised; the JVM then starts without the
archive, slower, the same.

Delivery effect: none. An archive holds class metadata only.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lab.host.atomic_file import write_atomic

#: Seconds a build may take before it is abandoned (measured: the driver's 25-35 s on 2 cores).
BUILD_TIMEOUT_S = 240.0


@dataclass(frozen=True)
class ArchiveStatus:
    """What :func:`ensure_archive` found or did."""

    path: Path
    present: bool
    built: bool = False
    seconds: float = 0.0
    error: str | None = None


def archive_dir(cache: str | Path | None = None) -> Path:
    """The directory of every class archive: ``<cache>/cds`` (default cache: :func:`lab.host.jars.cache_dir`)."""
    from lab.host import jars

    return Path(cache if cache is not None else jars.cache_dir()) / "cds"


def ensure_archive(path: Path, build_fn, progress=None, line: str = "building a class archive", *,
                   retry: bool = False) -> ArchiveStatus:
    """Build the archive ``path`` with ``build_fn(path)`` unless it exists: the protocol of every class archive.

    Used by the driver's (:func:`lab.spark.archive.ensure`) and the broker's (:func:`lab.broker.archive.ensure`).
    A lock file beside the archives keeps two builders from racing: the second waits, then
    finds the first one's archive.

    Parameters
    ----------
    path : Path
        The archive.
    build_fn : callable
        ``build_fn(path)`` makes it; returns the error text, or None.
    progress : callable, optional
        Gets ``line`` and the path before a build.
    retry : bool
        A failed build leaves ``<path>.failed`` (its error), and later calls return that error
        without building again, so a JVM that cannot write archives costs one training, not one
        per start; ``retry`` (``lab fetch``) removes it and builds again.

    Returns
    -------
    ArchiveStatus
        Never raises for a failed build or a cache that cannot be written (``error`` says which).
    """
    if path.is_file():
        return ArchiveStatus(path, True)
    failed = path.with_name(path.name + ".failed")
    if failed.is_file() and not retry:
        return ArchiveStatus(path, False, error=f"an earlier build failed ({failed.read_text(errors='replace')}); "
                                                "`lab fetch` builds it again")
    began = time.monotonic()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits here, then finds the archive
            if path.is_file():
                return ArchiveStatus(path, True)
            failed.unlink(missing_ok=True)
            if progress is not None:
                progress(f"{line}: {path}")
            error = build_fn(path)
            if error is not None:
                failed.write_text(error)
    except OSError as e:  # a read-only cache (the Docker image's, at run time): start without it
        error = f"cannot write {path.parent}: {e.strerror or e}"
    seconds = round(time.monotonic() - began, 1)
    return ArchiveStatus(path, path.is_file(), built=error is None, seconds=seconds, error=error)


def build_archive(path: Path, trainer: str, home: str) -> str | None:
    """Run ``python -m <trainer> <work> <archive>`` and move the archive it leaves to ``path``.

    ``home`` names the installation the archive belongs to (recorded beside it, ``<name>.json``):
    the archives it replaces are those of the same kind (``path``'s name up to its first ``-``) and
    ``home``, or of a home that no longer exists. The error text when the training failed, else None.
    """
    work = Path(tempfile.mkdtemp(prefix="lab-cds-", dir=path.parent))
    try:
        tmp = work / "archive.jsa"
        out = work / "train.log"
        with open(out, "w") as log:
            try:
                proc = subprocess.run([sys.executable, "-m", trainer, str(work), str(tmp)],
                                      stdout=log, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S,
                                      start_new_session=True)
            except subprocess.TimeoutExpired:
                return f"the training session took over {BUILD_TIMEOUT_S:.0f} s (log: {out})"
        if proc.returncode != 0 or not tmp.is_file():
            tail = out.read_text(errors="replace").strip().splitlines()[-3:]
            return f"the training session ended with code {proc.returncode}: {' | '.join(tail)[:300]}"
        kind = path.name.split("-", 1)[0]
        _remove_replaced(path.parent, home, kind=kind)
        os.replace(tmp, path)
        # "spark_home" as well for a driver's: an older checkout sharing the cache reads only that name.
        names = {"home": home, **({"spark_home": home} if kind == "driver" else {})}
        write_atomic(path.with_suffix(".json"), json.dumps(names))
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _remove_replaced(directory: Path, home: str, kind: str = "driver") -> None:
    """Delete the ``kind`` archives this one replaces: those of the same installation, or of one that is gone.

    Archives of other installations that still exist (another clone's virtual
    environment) are kept: each would otherwise rebuild its own on every switch.
    """
    for old in directory.glob(f"{kind}-*.jsa"):
        try:
            data = json.loads(old.with_suffix(".json").read_text())
            other = data.get("home", data.get("spark_home"))  # spark_home: archives made before the broker's
        except (OSError, ValueError, AttributeError):
            other = None
        if not isinstance(other, str):
            other = None
        if other is None or other == home or not Path(other).is_dir():
            old.unlink(missing_ok=True)
            old.with_suffix(".json").unlink(missing_ok=True)
