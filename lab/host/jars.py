"""Pinned jars from Maven Central, fetched once into a cache outside git and verified.

Manifest
--------
``lab/jars.json`` (shipped with the package) names each **set** of jars the lab
can use; every jar is pinned by Maven coordinate ``group:artifact:version``,
file name, size in bytes and SHA-1:

``spark-kafka``
    Spark's Kafka connector for pyspark 4.3.0 (4 jars, 9.9 MB). There is no 4.3.0
    release of ``spark-sql-kafka-0-10`` on Central; 4.2.0 runs batch and streaming
    inside pyspark 4.3.0 (4.1.1's streaming fails with ``NoSuchMethodError``).
``kafka-broker``
    Apache Kafka 4.4.0's runtime closure plus ``slf4j-simple`` (45 jars, 44.6 MB):
    everything ``java -cp ... kafka.Kafka`` needs (:mod:`lab.broker.embedded`).
``flink-kafka``
    Flink's Kafka connector for apache-flink 2.2.1 (``flink-sql-connector-kafka``
    5.0.0-2.2, Kafka's client shaded in; 1 jar, 10.7 MB), for the flink pipeline
    (:mod:`lab.flink.env`). Central has no release for Flink 2.3.

Cache
-----
``<cache>/jars/<set>/<file>``, where ``<cache>`` is ``LAB_CACHE_DIR``, else
``$XDG_CACHE_HOME/lab``, else ``~/.cache/lab``. Copying that directory from a
machine that has it is a valid way to fill it offline.

Protocol of :func:`ensure`
--------------------------
1. Every jar of the set whose file is present with the pinned size is checked:
   against ``.verified.json`` in the set's directory (pinned SHA-1, size,
   ``mtime_ns`` and inode recorded when the file was last hashed): a match needs
   one ``stat``; anything else is hashed again. Measured on the 50 jars (54 MB):
   0.15 ms for the stats, 44-55 ms to hash them all from the page cache. No
   network call is made when every jar passes.
2. What is missing or fails is fetched. Route ``auto``: ``mvn`` when it is on
   ``PATH`` (it honours ``~/.m2/settings.xml``: mirrors, proxies, credentials),
   else plain HTTPS with the standard library from ``LAB_MAVEN_REPO`` (default
   :data:`CENTRAL`). Should ``mvn`` fail, HTTPS is tried for what is still
   missing. A repository given explicitly (argument or ``LAB_MAVEN_REPO``) makes
   ``auto`` use HTTPS only, from that repository.
3. Every fetched file is checked against the **pinned** size and SHA-1 (never a
   downloaded ``.sha1``) before it takes its name: it is written to a temporary
   file in the set's directory and renamed into place (``os.replace``), so an
   interrupted or refused fetch never leaves a jar that looks complete.
4. The marker is rewritten (atomically) and the jars' paths are returned in
   manifest order.

Progress goes to stderr: one line per jar over HTTPS, one for the set after
``mvn``. A failure is one :class:`LabError` line naming the coordinate, where
it came from, why, and the fix.

Measured (2 cores, this machine's network path to Central, 2026-11):

============================  ===========  ============
route                          spark-kafka  kafka-broker
============================  ===========  ============
HTTPS, empty cache             0.2-0.3 s    2.1 s
mvn, empty ``~/.m2``           11.0 s [1]_  8.2 s
mvn, jars already in ``~/.m2`` 4.4 s        4.4 s
cached and verified            0.3 ms       0.6-1.8 ms
============================  ===========  ============

.. [1] including the dependency plugin's own first download.

``mvn`` is mostly its own JVM start; it is the default all the same when
installed, because it is the route that works behind a corporate mirror.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError, choices_error
from lab.host.atomic_file import write_atomic

MANIFEST = Path(__file__).resolve().parent.parent / "jars.json"

#: Where the HTTPS route fetches from unless ``LAB_MAVEN_REPO`` names another repository.
CENTRAL = "https://repo1.maven.org/maven2/"

#: ``auto``: mvn when installed, else HTTPS; ``mvn`` or ``https`` alone.
ROUTES = ("auto", "mvn", "https")

#: The dependency plugin the mvn route runs, pinned (its own first download is part of a cold fetch).
MVN_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"

MARKER = ".verified.json"


@dataclass(frozen=True)
class Jar:
    """One pinned jar: ``coord`` is ``group:artifact:version``; ``size`` in bytes; ``sha1`` hex."""

    coord: str
    file: str
    size: int
    sha1: str

    @property
    def gav(self) -> tuple[str, str, str]:
        group, artifact, version = self.coord.split(":")
        return group, artifact, version

    def url(self, repo: str) -> str:
        """The jar's address in a Maven 2 layout repository ``repo`` (``https://`` or ``file://``)."""
        group, artifact, version = self.gav
        return f"{repo.rstrip('/')}/{group.replace('.', '/')}/{artifact}/{version}/{self.file}"


@dataclass(frozen=True)
class JarSet:
    name: str
    version: str
    description: str
    jars: tuple[Jar, ...]

    @property
    def size(self) -> int:
        return sum(j.size for j in self.jars)


@dataclass
class FetchResult:
    """What :func:`fetch` did: the set's ``paths`` (manifest order), the jars it ``fetched``, by which ``route``."""

    set_name: str
    directory: Path
    paths: list[Path]
    fetched: list[Jar] = field(default_factory=list)
    route: str | None = None
    seconds: float = 0.0


@functools.cache
def _load_manifest(path: str) -> dict[str, JarSet]:
    data = json.loads(Path(path).read_text())
    return {
        name: JarSet(name, s["version"], s["description"], tuple(Jar(**j) for j in s["jars"]))
        for name, s in data["sets"].items()
    }


def manifest() -> dict[str, JarSet]:
    """The pinned sets of ``lab/jars.json``, by name (read once, on first use)."""
    return _load_manifest(str(MANIFEST))


def jar_set(name: str) -> JarSet:
    """The set called ``name``; :class:`LabError` naming the valid sets otherwise."""
    sets = manifest()
    if name not in sets:
        raise choices_error("jar set", name, sets)
    return sets[name]


def cache_dir() -> Path:
    """``LAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/lab``, else ``~/.cache/lab`` (nothing is created)."""
    if os.environ.get("LAB_CACHE_DIR"):
        return Path(os.environ["LAB_CACHE_DIR"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "lab"


def set_dir(name: str, cache: str | Path | None = None) -> Path:
    """Where the jars of set ``name`` live: ``<cache>/jars/<name>``."""
    return Path(cache if cache is not None else cache_dir()) / "jars" / name


def _sha1(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _read_marker(directory: Path) -> dict:
    try:
        data = json.loads((directory / MARKER).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _stamp(st: os.stat_result, jar: Jar) -> dict:
    return {"sha1": jar.sha1, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}


def _check(directory: Path, jars, rehash: bool = False) -> tuple[list[Jar], dict]:
    """Split ``jars`` into the ones missing or not matching their pin, and the marker of the good ones.

    A jar counts as good when its file has the pinned size and either the marker
    recorded this very file (same SHA-1 pin, size, mtime, inode) or its SHA-1,
    hashed now, is the pinned one. ``rehash`` ignores the marker.
    """
    marker = {} if rehash else _read_marker(directory)
    bad, good = [], {}
    for jar in jars:
        path = directory / jar.file
        try:
            st = path.stat()
        except OSError:
            bad.append(jar)
            continue
        stamp = _stamp(st, jar)
        if st.st_size == jar.size and (marker.get(jar.file) == stamp or _sha1(path) == jar.sha1):
            good[jar.file] = stamp
        else:
            bad.append(jar)
    return bad, good


def _save_marker(directory: Path, good: dict) -> None:
    old = _read_marker(directory)
    if old != good:
        try:
            write_atomic(directory / MARKER, json.dumps(good, indent=0, sort_keys=True))
        except OSError:
            pass  # a read-only cache (copied in, shared) still works: each check then hashes again


def missing(name: str, cache: str | Path | None = None, rehash: bool = False) -> list[Jar]:
    """The jars of set ``name`` not yet in the cache with their pinned size and SHA-1. Never uses the network.

    ``rehash`` hashes every file instead of trusting the marker (``lab doctor``).
    """
    directory = set_dir(name, cache)
    bad, good = _check(directory, jar_set(name).jars, rehash)
    if directory.is_dir():
        _save_marker(directory, good)
    return bad


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _place(tmp: Path, jar: Jar, directory: Path, source: str) -> None:
    """Give ``tmp`` the name of ``jar`` if its size and SHA-1 are the pinned ones; delete it otherwise.

    Raises
    ------
    LabError
        Naming the coordinate, the source, what was found and what is pinned.
    """
    try:
        size = tmp.stat().st_size
        got = _sha1(tmp) if size == jar.size else None
        if got != jar.sha1:
            found = f"SHA-1 {got}" if got else f"{size} bytes"
            pinned = f"SHA-1 {jar.sha1}" if got else f"{jar.size} bytes"
            raise LabError(
                f"{jar.coord} from {source} has {found}, pinned {pinned}; refused and deleted: check the "
                f"repository (LAB_MAVEN_REPO, or the mirror in ~/.m2/settings.xml), then run `lab fetch` again")
        os.replace(tmp, directory / jar.file)
    finally:
        tmp.unlink(missing_ok=True)


def _cannot_fetch(what: str, where: str, reason: str, directory: Path) -> LabError:
    return LabError(
        f"cannot fetch {what} from {where} ({reason}): connect to the internet once, or copy a cache "
        f"from a machine that has it into {directory}")


def _fetch_https(jars, directory: Path, repo: str, progress=_progress) -> None:
    """Download each of ``jars`` from ``repo`` (Maven 2 layout; ``https://`` or ``file://``) into ``directory``.

    Streams to ``.<file>.<random>.part`` in ``directory`` while hashing, then
    :func:`_place`. A connection error is retried once after 1 s.

    Raises
    ------
    LabError
        The first jar that cannot be downloaded or does not match its pin.
    """
    for i, jar in enumerate(jars, 1):
        url = jar.url(repo)
        started = time.monotonic()
        for attempt in (1, 2):
            tmp = directory / f".{jar.file}.{uuid.uuid4().hex[:8]}.part"
            try:
                with urllib.request.urlopen(url, timeout=60) as r, open(tmp, "wb") as out:
                    shutil.copyfileobj(r, out, 1 << 20)
                break
            except (OSError, urllib.error.URLError, ValueError) as e:
                tmp.unlink(missing_ok=True)
                reason = getattr(e, "reason", None) or e
                # Retried once: a reset connection; not: an answer (HTTP 404) or a missing file.
                if attempt == 2 or isinstance(e, urllib.error.HTTPError) or isinstance(reason, FileNotFoundError):
                    raise _cannot_fetch(jar.coord, repo, f"{url}: {reason}", directory) from None
                time.sleep(1)
        _place(tmp, jar, directory, url)
        progress(f"  [{i}/{len(jars)}] {jar.file} {_mb(jar.size)} in {time.monotonic() - started:.1f} s (SHA-1 "
                 "verified)")


def _pom(jars) -> str:
    """A pom whose dependencies are exactly ``jars``: each excludes everything it would pull in."""
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
        "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
        "</dependency>\n"
        for g, a, v in (j.gav for j in jars)
    )
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>\n'
            "<groupId>lab.fetch</groupId><artifactId>jars</artifactId><version>1</version><packaging>pom</packaging>\n"
            f"<dependencies>\n{deps}</dependencies></project>\n")


def _fetch_mvn(jars, directory: Path, progress=_progress, mvn: str = "mvn") -> None:
    """Fetch ``jars`` with one ``mvn`` run over a generated pom, then verify each into ``directory``.

    The pom lists exactly ``jars``, each with a ``*:*`` exclusion, and
    ``dependency:copy-dependencies -DexcludeTransitive=true`` copies them to a
    staging directory beside ``directory`` (removed afterwards); each file then
    goes through :func:`_place`. One run for the whole set, because each
    ``mvn`` start costs a JVM (measured for the 4 spark-kafka jars already in
    ``~/.m2``: one ``dependency:copy`` per jar 17.7 s, one generated pom 4.4 s;
    all 46 kafka-broker jars by one pom also 4.4 s).

    Raises
    ------
    LabError
        When ``mvn`` fails (its first ``[ERROR]`` line is quoted) or a file does not match its pin.
    """
    what = jars[0].coord if len(jars) == 1 else f"{len(jars)} jars of {directory.name} ({jars[0].coord}, ...)"
    staging = Path(tempfile.mkdtemp(prefix=".mvn-", dir=directory))
    try:
        (staging / "pom.xml").write_text(_pom(jars))
        out = staging / "out"
        started = time.monotonic()
        try:
            p = subprocess.run(
                [mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(staging / "pom.xml"),
                 f"{MVN_PLUGIN}:copy-dependencies", f"-DoutputDirectory={out}", "-DexcludeTransitive=true"],
                capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise _cannot_fetch(what, "Maven (mvn)", str(e), directory) from None
        if p.returncode != 0:
            lines = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout + p.stderr).splitlines()
            first = next((line for line in lines if "[ERROR]" in line), lines[-1] if lines else "no output")
            raise _cannot_fetch(what, "Maven (mvn)", f"mvn exited {p.returncode}: {first.strip()[:300]}", directory)
        for jar in jars:
            staged = out / jar.file
            if not staged.exists():
                raise _cannot_fetch(jar.coord, "Maven (mvn)", f"mvn did not produce {jar.file}", directory)
            _place(staged, jar, directory, "Maven (mvn)")
        progress(f"  {len(jars)} jars, {_mb(sum(j.size for j in jars))}, by mvn in {time.monotonic() - started:.1f} s "
                 "(SHA-1 of each verified)")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _remove_leftovers(directory: Path, older_than_s: float = 3600.0) -> None:
    """Delete what a killed fetch left (``.*.part`` files, ``.mvn-*`` staging directories) after an hour.

    Never a jar: those only ever appear under their own name once verified. The
    hour spares the files of a fetch another process is running right now.
    """
    cutoff = time.time() - older_than_s
    for path in list(directory.glob(".*.part")) + list(directory.glob(".mvn-*")):
        try:
            if path.stat().st_mtime < cutoff:
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        except OSError:
            pass


def fetch(name: str, *, cache: str | Path | None = None, route: str = "auto", repo: str | None = None,
          progress=_progress) -> FetchResult:
    """Make every jar of set ``name`` present and verified in the cache; see the module's protocol.

    Parameters
    ----------
    name : str
        A set of ``lab/jars.json``: ``spark-kafka`` or ``kafka-broker``.
    cache : path, optional
        The cache root (default :func:`cache_dir`).
    route : str
        One of :data:`ROUTES`.
    repo : str, optional
        Base URL of a Maven 2 layout repository for the HTTPS route (``https://``
        or ``file://``); default ``LAB_MAVEN_REPO``, else :data:`CENTRAL`.
    progress : callable
        Called with one line per step (default: print to stderr).

    Returns
    -------
    FetchResult
        ``fetched`` is empty and ``route`` None when everything was cached
        (then no network call was made).

    Raises
    ------
    LabError
        For an unknown set or route, a jar that cannot be fetched, or one that
        does not match its pin (it is deleted).
    """
    if route not in ROUTES:
        raise choices_error("fetch route", route, ROUTES)
    js = jar_set(name)
    directory = set_dir(name, cache)
    started = time.monotonic()
    todo = missing(name, cache)
    result = FetchResult(name, directory, [directory / j.file for j in js.jars])
    if not todo:
        return result
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LabError(f"cannot create the jar cache {directory} ({e.strerror or e}): "
                       "set LAB_CACHE_DIR to a writable directory") from None
    _remove_leftovers(directory)
    explicit = repo or os.environ.get("LAB_MAVEN_REPO")
    repo = explicit or CENTRAL
    mvn = shutil.which("mvn")
    if route == "mvn" and not mvn:
        raise LabError("route 'mvn' needs Maven's mvn on PATH; install Maven, or use --route https")
    use_mvn = route == "mvn" or (route == "auto" and mvn and not explicit)
    progress(f"{name}: fetching {len(todo)} of {len(js.jars)} jars ({_mb(sum(j.size for j in todo))}) "
             f"{'with mvn' if use_mvn else 'from ' + repo} into {directory}")
    result.route = "mvn" if use_mvn else "https"
    if use_mvn:
        try:
            _fetch_mvn(todo, directory, progress, mvn)
        except LabError as e:
            if route == "mvn":
                raise
            progress(f"  mvn failed ({e}); trying {repo}")
            result.route = "mvn+https"
            try:
                _fetch_https(missing(name, cache), directory, repo, progress)
            except LabError as e2:
                raise LabError(f"{e2} [mvn also failed: {e}]") from None
    else:
        _fetch_https(todo, directory, repo, progress)
    still = missing(name, cache)
    if still:  # a jar replaced while being fetched; never hand out an unverified classpath
        raise LabError(f"{still[0].coord} in {directory} does not match its pin after fetching; run `lab fetch` again")
    result.fetched = todo
    result.seconds = time.monotonic() - started
    return result


def ensure(name: str, *, cache: str | Path | None = None, route: str = "auto", repo: str | None = None) -> list[Path]:
    """The paths of every jar of set ``name``, in manifest order, fetched first if needed.

    Offline and without any network call when every jar is cached and verified
    (one ``stat`` per jar). See :func:`fetch` for the parameters and errors.
    """
    return fetch(name, cache=cache, route=route, repo=repo).paths


def classpath(name: str, **kwargs) -> str:
    """:func:`ensure`'s paths joined for ``java -cp`` (only the pinned files, never a directory wildcard)."""
    return os.pathsep.join(str(p) for p in ensure(name, **kwargs))
