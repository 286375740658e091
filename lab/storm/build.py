"""The Storm topology's classes: ``lab/storm/java`` compiled once into the cache, and the classpath that runs them.

Protocol
--------
* The classes live in ``<cache>/storm/classes-<key>`` (``<cache>`` as in
  :mod:`lab.host.jars`), ``<key>`` hashed from every Java source file and the
  pinned ``storm`` jar set: a changed source or a new Storm is a new directory,
  and older ones are removed.
* Compiled by the Eclipse compiler (the pinned ``ecj`` jar set) on the lab's
  Java (:func:`lab.host.java.find_java`), ``--release 17``: a Java runtime
  without ``javac`` compiles it too. The compiler writes into a temporary
  directory renamed into place, so a reader never sees half the classes; a lock
  keeps two builders (two matrix rows) from racing.
* :func:`ensure` fetches missing jars (:func:`lab.host.jars.ensure`) and compiles
  when needed: ``lab fetch`` does it once, online; a run finds it done.

Delivery effect: none; the classes are the topology :mod:`lab.pipelines.storm` runs.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from lab.errors import LabError
from lab.host import jars
from lab.host.jar_sets import ECJ_JARS, STORM_JARS
from lab.host.java import find_java

SOURCE_DIR = Path(__file__).resolve().parent / "java"
#: The topology's entry point (its ``main``).
MAIN_CLASS = "lab.storm.LabTopology"
#: Seconds a compilation may take (measured: 1.6 s on 2 cores).
COMPILE_TIMEOUT_S = 120.0


def sources() -> list[Path]:
    """The topology's Java files, sorted."""
    return sorted(SOURCE_DIR.rglob("*.java"))


def key() -> str:
    """The classes' key: the sources' bytes and the Storm jar set's pins."""
    h = hashlib.sha256()
    for path in sources():
        h.update(path.relative_to(SOURCE_DIR).as_posix().encode() + b"\0" + path.read_bytes())
    for jar in jars.jar_set(STORM_JARS).jars:
        h.update(f"{jar.coord}:{jar.sha1}".encode())
    return h.hexdigest()[:16]


def classes_dir(cache: str | Path | None = None) -> Path:
    """Where today's sources' classes are (or will be)."""
    return Path(cache or jars.cache_dir()) / "storm" / f"classes-{key()}"


def problems() -> list[str]:
    """What keeps the topology from starting without the network: missing jars, classes not compiled."""
    found = []
    missing = jars.missing(STORM_JARS)
    if missing:
        found.append(f"Storm's jars are not in the jar cache ({missing[0].coord})")
    if not (classes_dir() / "lab" / "storm" / "LabTopology.class").exists():
        found.append("the Storm topology is not compiled")
    return found


def _compile(target: Path) -> None:
    compiler = jars.ensure(ECJ_JARS)[0]
    tmp = Path(tempfile.mkdtemp(prefix=".classes-", dir=target.parent))
    try:
        cmd = [find_java().executable, "-jar", str(compiler), "--release", "17", "-nowarn", "-encoding", "UTF-8",
               "-d", str(tmp), "-cp", jars.classpath(STORM_JARS), *map(str, sources())]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        if done.returncode != 0:
            first = next((line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line),
                         (done.stdout + done.stderr).strip()[-300:])
            raise LabError(f"the Storm topology did not compile: {first}")
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ensure(progress=None) -> str:
    """The topology's classpath (its classes first, then the Storm jars), fetching and compiling what is missing.

    Raises
    ------
    LabError
        When a jar cannot be fetched or the sources do not compile (the compiler's first error).
    """
    storm_cp = jars.classpath(STORM_JARS)
    target = classes_dir()
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.exists():
                if progress:
                    progress(f"storm: compiling the topology ({len(sources())} Java files) into {target}")
                _compile(target)
                for old in target.parent.glob("classes-*"):
                    if old != target:
                        shutil.rmtree(old, ignore_errors=True)
    return f"{target}:{storm_cp}"
