"""The pinned jar manifest and its cache: well-formed pins, refused corrupt downloads, offline reuse.

Fetches here never touch the network: a "repository" is a directory in Maven's
layout reached through a ``file://`` URL, and ``mvn`` is a small fake script
that copies from it, so both routes' verification runs for real.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import urllib.request
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.host import jars

ROOT = Path(__file__).resolve().parents[2]

#: The connector jars pyspark 4.3.0 lacks, with the SHA-1s Maven Central publishes for them.
SPARK_KAFKA_PINS = {
    "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0": "98f199d5da59b1e152dae941cc5037a6495464ad",
    "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.2.0": "807ceb26e2fa509259e74a202d5f2d790446f515",
    "org.apache.kafka:kafka-clients:3.9.2": "a06edbaa01458ed2e8cf1be69a18c2f231fda6e0",
    "org.apache.commons:commons-pool2:2.13.1": "cf7e8c0242d4c483c42c083b8188ab360ab60f9a",
}


# -- the real manifest --------------------------------------------------------------
def test_manifest_is_well_formed():
    sets = jars.manifest()
    assert set(sets) == {"spark-kafka", "kafka-broker", "flink-kafka", "storm", "ecj", "samza"}
    for js in sets.values():
        assert js.jars and js.version and js.description
        assert len({j.file for j in js.jars}) == len(js.jars), f"{js.name}: a file name twice"
        assert len({j.gav[:2] for j in js.jars}) == len(js.jars), f"{js.name}: an artifact in two versions"
        for j in js.jars:
            group, artifact, version = j.gav
            assert group and artifact and version, j
            assert j.file == f"{artifact}-{version}.jar", j
            assert re.fullmatch(r"[0-9a-f]{40}", j.sha1), j
            assert isinstance(j.size, int) and j.size > 0, j
            assert j.url(jars.CENTRAL) == (f"https://repo1.maven.org/maven2/{group.replace('.', '/')}/{artifact}/"
                                           f"{version}/{j.file}")


def test_the_pins_are_the_measured_ones():
    spark = jars.jar_set("spark-kafka")
    assert {j.coord: j.sha1 for j in spark.jars} == SPARK_KAFKA_PINS
    assert spark.size == 9_938_005
    broker = jars.jar_set("kafka-broker")
    coords = {j.coord for j in broker.jars}
    assert broker.version == "4.4.0" and len(broker.jars) == 45 and broker.size == 44_581_600
    assert {"org.apache.kafka:kafka_2.13:4.4.0", "org.apache.kafka:kafka-clients:4.4.0",
            "org.slf4j:slf4j-simple:1.7.36", "org.scala-lang:scala-library:2.13.18"} <= coords


def test_the_manifest_ships_with_the_package():
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "jars.json" in data["tool"]["setuptools"]["package-data"]["lab"]
    assert jars.MANIFEST == ROOT / "lab" / "jars.json"


def test_unknown_set_and_route_name_the_choices(tmp_path):
    with pytest.raises(LabError, match=r"unknown jar set 'spark'; valid choices: ecj, flink-kafka, kafka-broker, "
                                       r"samza, spark-kafka, storm"):
        jars.ensure("spark", cache=tmp_path)
    with pytest.raises(LabError, match=r"unknown fetch route 'ftp'; valid choices: auto, https, mvn"):
        jars.ensure("spark-kafka", cache=tmp_path, route="ftp")


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("LAB_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert jars.cache_dir() == Path.home() / ".cache" / "lab"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jars.cache_dir() == tmp_path / "xdg" / "lab"
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "mine"))
    assert jars.cache_dir() == tmp_path / "mine"
    assert jars.set_dir("kafka-broker") == tmp_path / "mine" / "jars" / "kafka-broker"
    assert not (tmp_path / "mine").exists()  # naming the cache creates nothing


# -- a fake manifest, repository and mvn -------------------------------------------
CONTENT = {"org.example:alpha:1.0": b"alpha jar " * 300, "org.example.deep:beta_2.13:2.1-x": b"beta jar " * 500}


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A two-jar manifest, a Maven-layout repository holding those jars, an empty cache, no real mvn."""
    entries = []
    repo = tmp_path / "repo"
    for coord, data in CONTENT.items():
        group, artifact, version = coord.split(":")
        fn = f"{artifact}-{version}.jar"
        entries.append({"coord": coord, "file": fn, "size": len(data), "sha1": hashlib.sha1(data).hexdigest()})
        path = repo / group.replace(".", "/") / artifact / version / fn
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
    manifest = tmp_path / "jars.json"
    manifest.write_text(json.dumps({"sets": {"demo": {"version": "1", "description": "test", "jars": entries}}}))
    monkeypatch.setattr(jars, "MANIFEST", manifest)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no mvn unless a test puts one there
    monkeypatch.delenv("LAB_MAVEN_REPO", raising=False)
    return {"repo": repo, "url": repo.as_uri() + "/", "cache": tmp_path / "cache", "tmp": tmp_path}


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def _corrupt(fake, coord: str, data: bytes) -> None:
    group, artifact, version = coord.split(":")
    (fake["repo"] / group.replace(".", "/") / artifact / version / f"{artifact}-{version}.jar").write_bytes(data)


def _no_network(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("network or mvn used although every jar is cached")

    for name in ("_fetch_https", "_fetch_mvn"):
        monkeypatch.setattr(jars, name, refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(jars.subprocess, "run", refuse)


def test_https_route_fetches_verifies_and_places_atomically(fake, capsys):
    paths = jars.ensure("demo", cache=fake["cache"], route="https", repo=fake["url"])
    directory = fake["cache"] / "jars" / "demo"
    assert paths == [directory / "alpha-1.0.jar", directory / "beta_2.13-2.1-x.jar"]
    assert [p.read_bytes() for p in paths] == list(CONTENT.values())
    assert _files(directory) == [jars.MARKER, "alpha-1.0.jar", "beta_2.13-2.1-x.jar"]  # no temporary file left
    err = capsys.readouterr().err
    assert "demo: fetching 2 of 2 jars" in err and "[2/2] beta_2.13-2.1-x.jar" in err and "SHA-1 verified" in err


def test_a_corrupt_download_is_refused_by_sha1_and_leaves_no_file(fake):
    good = CONTENT["org.example.deep:beta_2.13:2.1-x"]
    _corrupt(fake, "org.example.deep:beta_2.13:2.1-x", bytes([good[0] ^ 1]) + good[1:])  # same size, one bit
    with pytest.raises(LabError) as e:
        jars.ensure("demo", cache=fake["cache"], route="https", repo=fake["url"])
    msg = str(e.value)
    assert "\n" not in msg
    assert "org.example.deep:beta_2.13:2.1-x" in msg and "has SHA-1 " in msg and "refused and deleted" in msg
    assert hashlib.sha1(good).hexdigest() in msg and "lab fetch" in msg
    directory = fake["cache"] / "jars" / "demo"
    assert "beta_2.13-2.1-x.jar" not in _files(directory)
    assert not [n for n in _files(directory) if n.endswith((".part", ".tmp"))]
    assert jars.missing("demo", cache=fake["cache"]) == [jars.jar_set("demo").jars[1]]


def test_a_truncated_download_is_refused_by_size(fake):
    _corrupt(fake, "org.example:alpha:1.0", CONTENT["org.example:alpha:1.0"][:100])
    with pytest.raises(LabError, match=r"org.example:alpha:1.0 from .* has 100 bytes, pinned 3000 bytes"):
        jars.ensure("demo", cache=fake["cache"], route="https", repo=fake["url"])
    assert "alpha-1.0.jar" not in _files(fake["cache"] / "jars" / "demo")


def test_an_interrupted_download_leaves_no_jar(fake, monkeypatch):
    def broken(src, dst, length=0):
        dst.write(src.read(10))
        raise ConnectionResetError(104, "Connection reset by peer")

    monkeypatch.setattr(jars.shutil, "copyfileobj", broken)
    monkeypatch.setattr(jars.time, "sleep", lambda s: None)
    with pytest.raises(LabError) as e:
        jars.ensure("demo", cache=fake["cache"], route="https", repo=fake["url"])
    msg = str(e.value)
    assert msg.startswith("cannot fetch org.example:alpha:1.0 from file://") and "Connection reset" in msg
    assert "connect to the internet once, or copy a cache from a machine that has it into" in msg
    assert _files(fake["cache"] / "jars" / "demo") == []


def test_an_unreachable_repository_is_one_line_naming_the_jar_and_the_fix(fake):
    with pytest.raises(LabError) as e:
        jars.ensure("demo", cache=fake["cache"], route="https", repo=(fake["tmp"] / "nowhere").as_uri())
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("cannot fetch org.example:alpha:1.0 from file://")
    assert str(fake["cache"] / "jars" / "demo") in msg


def test_a_cached_set_makes_no_network_call(fake, monkeypatch):
    first = jars.fetch("demo", cache=fake["cache"], route="https", repo=fake["url"])
    assert len(first.fetched) == 2 and first.route == "https"
    _no_network(monkeypatch)
    again = jars.fetch("demo", cache=fake["cache"])
    assert again.paths == first.paths and again.fetched == [] and again.route is None


def test_a_cache_copied_in_without_marker_is_hashed_once_then_trusted(fake, monkeypatch):
    directory = fake["cache"] / "jars" / "demo"
    directory.mkdir(parents=True)
    for j, data in zip(jars.jar_set("demo").jars, CONTENT.values()):
        (directory / j.file).write_bytes(data)
    _no_network(monkeypatch)
    assert len(jars.ensure("demo", cache=fake["cache"])) == 2
    marker = json.loads((directory / jars.MARKER).read_text())
    assert set(marker) == {"alpha-1.0.jar", "beta_2.13-2.1-x.jar"}
    hashed = []
    monkeypatch.setattr(jars, "_sha1", lambda p: hashed.append(p) or "")
    assert len(jars.ensure("demo", cache=fake["cache"])) == 2 and hashed == []  # the marker spares the hashing


def test_a_cached_jar_changed_afterwards_is_found_and_fetched_again(fake):
    paths = jars.ensure("demo", cache=fake["cache"], route="https", repo=fake["url"])
    data = bytearray(paths[0].read_bytes())
    data[-1] ^= 0xFF
    paths[0].write_bytes(bytes(data))  # same size, new mtime: the marker no longer vouches for it
    os.utime(paths[0], ns=(1, 1))
    assert [j.file for j in jars.missing("demo", cache=fake["cache"])] == ["alpha-1.0.jar"]
    result = jars.fetch("demo", cache=fake["cache"], route="https", repo=fake["url"])
    assert [j.file for j in result.fetched] == ["alpha-1.0.jar"]
    assert paths[0].read_bytes() == CONTENT["org.example:alpha:1.0"]


def test_rehash_ignores_a_marker_that_lies(fake):
    paths = jars.ensure("demo", cache=fake["cache"], route="https", repo=fake["url"])
    st = paths[1].stat()
    data = bytearray(paths[1].read_bytes())
    data[0] ^= 0xFF
    paths[1].write_bytes(bytes(data))
    os.utime(paths[1], ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime: only a hash tells
    assert jars.missing("demo", cache=fake["cache"]) == []
    assert [j.file for j in jars.missing("demo", cache=fake["cache"], rehash=True)] == ["beta_2.13-2.1-x.jar"]


FAKE_MVN = r'''#!{python}
"""A stand-in for mvn: copies the pom's dependencies from a Maven-layout directory, like copy-dependencies."""
import os, re, shutil, sys
args = sys.argv[1:]
log = os.environ.get("FAKE_MVN_LOG")
if log:
    open(log, "a").write(" ".join(args) + "\n")
pom = open(args[args.index("-f") + 1]).read()
out = next(a.split("=", 1)[1] for a in args if a.startswith("-DoutputDirectory="))
os.makedirs(out, exist_ok=True)
for g, a, v in re.findall(r"<groupId>([^<*]+)</groupId><artifactId>([^<*]+)</artifactId><version>([^<]+)</version>",
                          pom):
    if g == "lab.fetch":
        continue
    src = os.path.join(os.environ["FAKE_REPO"], g.replace(".", "/"), a, v, f"{a}-{v}.jar")
    if not os.path.exists(src):
        print(f"[ERROR] Failed to execute goal: Could not resolve {g}:{a}:{v}")
        sys.exit(1)
    shutil.copy(src, os.path.join(out, f"{a}-{v}.jar"))
'''


@pytest.fixture
def fake_mvn(fake, monkeypatch):
    bin_dir = fake["tmp"] / "no-bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN.replace("{python}", sys.executable))
    mvn.chmod(mvn.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FAKE_REPO", str(fake["repo"]))
    monkeypatch.setenv("FAKE_MVN_LOG", str(fake["tmp"] / "mvn.log"))
    return fake


def test_mvn_route_runs_once_for_the_set_and_verifies_each_jar(fake_mvn):
    result = jars.fetch("demo", cache=fake_mvn["cache"])  # auto: mvn is on PATH
    assert result.route == "mvn" and len(result.fetched) == 2
    calls = (fake_mvn["tmp"] / "mvn.log").read_text().splitlines()
    assert len(calls) == 1 and f"{jars.MVN_PLUGIN}:copy-dependencies" in calls[0]
    assert "-DexcludeTransitive=true" in calls[0]
    directory = fake_mvn["cache"] / "jars" / "demo"
    assert _files(directory) == [jars.MARKER, "alpha-1.0.jar", "beta_2.13-2.1-x.jar"]  # staging removed


def test_mvn_route_refuses_a_corrupt_jar_from_a_mirror(fake_mvn):
    _corrupt(fake_mvn, "org.example:alpha:1.0", b"x" * 3000)
    with pytest.raises(LabError, match=r"org.example:alpha:1.0 from Maven \(mvn\) has SHA-1 .*refused and deleted"):
        jars.fetch("demo", cache=fake_mvn["cache"], route="mvn")
    assert not [n for n in _files(fake_mvn["cache"] / "jars" / "demo") if n.endswith(".jar") or n.startswith(".mvn-")]


def test_auto_falls_back_to_https_when_mvn_fails(fake_mvn, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_REPO", str(fake_mvn["tmp"] / "empty"))  # mvn resolves nothing
    monkeypatch.setattr(jars, "CENTRAL", fake_mvn["url"])  # the HTTPS route's default repository
    result = jars.fetch("demo", cache=fake_mvn["cache"])
    assert result.route == "mvn+https" and len(result.fetched) == 2
    assert "mvn failed (cannot fetch 2 jars of demo" in capsys.readouterr().err


def test_a_repository_named_explicitly_skips_mvn(fake_mvn, monkeypatch):
    monkeypatch.setenv("LAB_MAVEN_REPO", fake_mvn["url"])
    result = jars.fetch("demo", cache=fake_mvn["cache"])
    assert result.route == "https" and not (fake_mvn["tmp"] / "mvn.log").exists()


def test_route_mvn_without_mvn_names_the_fix(fake):
    with pytest.raises(LabError, match=r"route 'mvn' needs Maven's mvn on PATH; install Maven, or use --route https"):
        jars.fetch("demo", cache=fake["cache"], route="mvn")


def test_leftovers_of_a_killed_fetch_are_removed_after_an_hour(fake):
    directory = fake["cache"] / "jars" / "demo"
    (directory / ".mvn-old").mkdir(parents=True)
    old_part, fresh_part = directory / ".alpha-1.0.jar.dead.part", directory / ".beta_2.13-2.1-x.jar.live.part"
    old_part.write_bytes(b"half")
    fresh_part.write_bytes(b"being written by another fetch")
    for p in (old_part, directory / ".mvn-old"):
        os.utime(p, (0, 0))
    jars.fetch("demo", cache=fake["cache"], route="https", repo=fake["url"])
    assert _files(directory) == [".beta_2.13-2.1-x.jar.live.part", jars.MARKER, "alpha-1.0.jar", "beta_2.13-2.1-x.jar"]
