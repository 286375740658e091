"""Java sources of the lab compiled once into the cache, and the classpath that runs them (Storm's topology, Samza's
job).

Protocol
--------
* A :class:`JavaSources` names a directory of ``.java`` files, the pinned jar set
  they compile and run against, and their main class. Its classes live in
  ``<cache>/<name>/classes-<key>`` (``<cache>`` as in :mod:`lab.host.jars`),
  ``<key>`` hashed from every source file and the jar set's pins: a changed
  source or a new jar set is a new directory, and older ones are removed.
* Compiled by the Eclipse compiler (the pinned ``ecj`` jar set) on the lab's Java
  (:func:`lab.host.java.find_java`), ``--release 17``: a Java runtime without
  ``javac`` compiles them too. The compiler writes into a temporary directory
  renamed into place, so a reader never sees half the classes; a lock keeps two
  builders (two matrix rows) from racing.
* :func:`ensure` fetches missing jars (:func:`lab.host.jars.ensure`) and compiles
  when needed: ``lab fetch`` does it once, online; a run finds it done.

Delivery effect: none; the classes are what the pipelines run.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.host import jars
from lab.host.jar_sets import ECJ_JARS
from lab.host.java import find_java

#: Seconds a compilation may take (measured: 1.6 s for the Storm topology on 2 cores).
COMPILE_TIMEOUT_S = 120.0
#: Seconds after its last use that another version's classes are removed when a new version is compiled. Not at
#: once: two checkouts with different sources (a clone under test beside a working copy) share the cache, and
#: the other's JVMs load its classes as they first use them, from a directory removed under them.
UNUSED_FOR_S = 7 * 86400.0


@dataclass(frozen=True)
class JavaSources:
    """Java files compiled against one jar set.

    Attributes
    ----------
    name : str
        The cache directory's name, and what messages call them (``storm``, ``samza``).
    source_dir : Path
        The root of the package tree (``lab/<name>/java``).
    jar_set : str
        The jar set of :mod:`lab.host.jar_sets` they compile and run against.
    main_class : str
        The class whose ``main`` runs them.
    """

    name: str
    source_dir: Path
    jar_set: str
    main_class: str

    def sources(self) -> list[Path]:
        """The Java files, sorted."""
        return sorted(self.source_dir.rglob("*.java"))

    def key(self) -> str:
        """The classes' key: the sources' bytes and the jar set's pins."""
        h = hashlib.sha256()
        for path in self.sources():
            h.update(path.relative_to(self.source_dir).as_posix().encode() + b"\0" + path.read_bytes())
        for jar in jars.jar_set(self.jar_set).jars:
            h.update(f"{jar.coord}:{jar.sha1}".encode())
        return h.hexdigest()[:16]

    def classes_dir(self, cache: str | Path | None = None) -> Path:
        """Where today's sources' classes are (or will be)."""
        return Path(cache or jars.cache_dir()) / self.name / f"classes-{self.key()}"

    def _main_class_file(self) -> Path:
        return self.classes_dir() / (self.main_class.replace(".", "/") + ".class")

    def problems(self) -> list[str]:
        """What keeps them from starting without the network: missing jars, classes not compiled."""
        found = []
        missing = jars.missing(self.jar_set)
        if missing:
            found.append(f"the {self.name} jars are not in the jar cache ({missing[0].coord})")
        if not self._main_class_file().exists():
            found.append(f"the {self.name} classes are not compiled")
        return found

    def _compile(self, target: Path) -> None:
        compiler = jars.ensure(ECJ_JARS)[0]
        tmp = Path(tempfile.mkdtemp(prefix=".classes-", dir=target.parent))
        try:
            cmd = [find_java().executable, "-jar", str(compiler), "--release", "17", "-nowarn", "-encoding", "UTF-8",
                   "-d", str(tmp), "-cp", jars.classpath(self.jar_set), *map(str, self.sources())]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
            if done.returncode != 0:
                text = done.stdout + done.stderr
                first = next((line for line in text.splitlines() if "ERROR" in line), text.strip()[-300:])
                raise LabError(f"the {self.name} classes did not compile: {first}")
            tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def command(self, *jvm_flags: str) -> list[str]:
        """The JVM command line that runs :attr:`main_class` (compiled first if missing, :meth:`ensure`): the
        arguments follow it. ``jvm_flags`` go before the classpath; C1 only, as these programs are short."""
        return [find_java().executable, *jvm_flags, "-XX:TieredStopAtLevel=1", "-cp", self.ensure(), self.main_class]

    def ensure(self, progress=None) -> str:
        """The classpath (the classes first, then the jar set), fetching and compiling what is missing.

        Raises
        ------
        LabError
            When a jar cannot be fetched or the sources do not compile (the compiler's first error).
        """
        jar_cp = jars.classpath(self.jar_set)
        target = self.classes_dir()
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target.parent / ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not target.exists():
                    if progress:
                        progress(f"{self.name}: compiling {len(self.sources())} Java files into {target}")
                    self._compile(target)
                    for old in target.parent.glob("classes-*"):
                        if old != target and time.time() - old.stat().st_mtime > UNUSED_FOR_S:
                            shutil.rmtree(old, ignore_errors=True)
        try:
            os.utime(target)  # its last use, for UNUSED_FOR_S
        except OSError:
            pass  # a read-only cache (a bundle): nothing is removed from it either
        return f"{target}:{jar_cp}"
