"""Build the images docker-compose.yml names, without a registry, under the tags it names.

No image registry is reachable from these machines, Debian's archive is: each stand-in is a
Debian root file system made by ``mmdebstrap`` with what the official image has for the settings
the compose file uses, imported by ``podman import`` under the official image's tag. Then the
lab's own image is built from ``docker/jupyter.Dockerfile``, unchanged, FROM the Spark stand-in.
``docs/docker.md`` lists every difference between a stand-in and the image it stands in for.

An image is rebuilt only when its recipe changed: each carries the SHA-256 of its recipe as the
label ``lab.recipe``: of this file and what it puts in (a stand-in), or of the files the Dockerfile
copies, its build arguments and the Spark stand-in's recipe (the lab's image).

``--rebuild-probe`` then measures what a change in ``lab/`` costs: the lab's image built again, from podman's
layer cache, out of a copy of its build context with one comment line appended to ``lab/cli.py``
(:data:`PROBE_FILE`; the checkout is not touched), under a tag of its own that is removed afterwards. It logs
``image rebuild after a one-line change in lab/: N s`` and which steps came from the cache.

Usage: ``.venv/bin/python tests/stack/images.py [--force] [--only NAME] [--rebuild-probe]`` (root; podman,
mmdebstrap, patchelf; ``make test-stack`` runs it with ``--rebuild-probe``). The CPython it runs on (the venv's
base) is the one packed into the Spark stand-in.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lab.host import jars  # noqa: E402

SPARK_TAG = "docker.io/apache/spark:4.3.0-scala2.13-java17-python3-ubuntu"
KAFKA_TAG = "docker.io/apache/kafka:4.4.0"
POSTGRES_TAG = "docker.io/library/postgres:17.6-bookworm"
LAB_TAG = "localhost/lab-spark-python:0.1.0"
LAB_DOCKERFILE = "docker/jupyter.Dockerfile"
#: The rebuild probe's image (removed after it is measured) and the file of its context copy it changes: a module
#: that none of the Dockerfile's layers before ``COPY lab`` copies (those before it: pyproject.toml, constraints.txt
#: and the few files of lab/ that fetch the jars and make the Flink environment).
PROBE_TAG = "localhost/lab-spark-python:rebuild-probe"
PROBE_FILE = "lab/cli.py"

# The CPython uv installs in the lab's image (the Dockerfile asks for 3.11, >= 3.11.5): python-build-standalone
# comes from GitHub, which these machines cannot reach, so the stand-in carries the CPython this script runs on
# (the venv's base) packed as python-build-standalone packs it, and a downloads list naming it
# (UV_PYTHON_DOWNLOADS_JSON_URL); the lab's image is built with LAB_PYTHON set to its version.
HOST_PYTHON = Path(sys.base_prefix)
LAB_PYTHON = platform.python_version()

# The health check's tool is in kafka-tools, which the broker's own jar set does not need: pinned here, fetched and
# verified by the lab's own jar fetcher.
KAFKA_TOOLS = jars.Jar("org.apache.kafka:kafka-tools:4.4.0", "kafka-tools-4.4.0.jar", 751995,
                       "e06eb64725be56b94b738307fc1ff247bcf78478")

# The machine's extra CAs: outbound HTTPS here is re-signed by them, so images that fetch need them.
EXTRA_CAS = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))

JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
CACHE = Path(os.environ.get("LAB_STACK_CACHE", Path.home() / ".cache/lab/stack"))

# What the official Kafka image does with KAFKA_* variables (docker/resources/common-scripts/configure
# in Apache Kafka): a variable names a server property after KAFKA_, lower case, "___" -> "-",
# "__" -> "_", "_" -> "."; these name JVM or tool settings instead.
KAFKA_RUN = r'''#!/usr/bin/python3
"""The stand-in's /etc/kafka/docker/run: server.properties from KAFKA_*, storage formatted, broker exec'd."""
import os, subprocess
SKIP = {"KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
        "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
        "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME", "KAFKA_JMX_PORT"}
props = {}
for k, v in os.environ.items():
    if k.startswith("KAFKA_") and k not in SKIP:
        props[k[6:].lower().replace("___", "-").replace("__", "\0").replace("_", ".").replace("\0", "_")] = v
if not props:
    props = {l.split("=", 1)[0]: l.split("=", 1)[1] for l in open("/opt/kafka/config/server.properties")
             .read().splitlines() if "=" in l and not l.startswith("#")}
props.setdefault("log.dirs", "/tmp/kraft-combined-logs")
os.makedirs("/opt/kafka/config/run", exist_ok=True)
path = "/opt/kafka/config/run/server.properties"
with open(path, "w") as f:
    f.writelines(f"{k}={v}\n" for k, v in sorted(props.items()))
java = ["java", "-Xmx" + os.environ.get("KAFKA_HEAP_MAX", "512m"), "-cp", "/opt/kafka/libs/*"]
subprocess.run(java + ["kafka.tools.StorageTool", "format", "--ignore-formatted", "-c", path,
                       "--cluster-id", os.environ.get("CLUSTER_ID", "5L6g3nShT-eMCtK--X86sw")], check=True)
os.execvp("java", java + ["kafka.Kafka", path])
'''

POSTGRES_ENTRYPOINT = r'''#!/bin/bash
# The stand-in's docker-entrypoint.sh for POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB and PGDATA:
# an empty data directory is initialised (scram-sha-256 over TCP, trust on the socket), the
# database made, then the server runs in the foreground listening on every address.
set -euo pipefail
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
: "${POSTGRES_PASSWORD:?the official image refuses to start without POSTGRES_PASSWORD}"
mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 0700 "$PGDATA"
as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; }
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pw=$(mktemp); printf '%s' "$POSTGRES_PASSWORD" >"$pw"; chown postgres "$pw"
  as_pg initdb -D "$PGDATA" --username="$POSTGRES_USER" --pwfile="$pw" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pw"
  printf "host all all all scram-sha-256\n" >>"$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    as_pg pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    as_pg psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres -q \
      -c "CREATE DATABASE \"$POSTGRES_DB\"" >/dev/null 2>&1 || true
    as_pg pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups -- postgres -D "$PGDATA" -c listen_addresses='*'
'''


def say(line: str) -> None:
    print(f"[images {time.strftime('%H:%M:%S')}] {line}", flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


def image_id(tag: str) -> str | None:
    out = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def drop_replaced(old: str | None, tag: str) -> None:
    """Remove the image ``tag`` named before a rebuild (kept when a container still uses it)."""
    if old and old != image_id(tag):
        subprocess.run(["podman", "rmi", old], capture_output=True)


def recipe_label(tag: str) -> str | None:
    out = subprocess.run(["podman", "image", "inspect", "--format", '{{index .Labels "lab.recipe"}}', tag],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, Path):
            files = (sorted(f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts) if p.is_dir()
                     else [p])
            for f in files:
                h.update(str(f.relative_to(p) if p.is_dir() else f.name).encode())
                h.update(f.read_bytes())
        else:
            h.update(str(p).encode())
    return h.hexdigest()[:16]


def mmdebstrap(suite: str, packages: list[str], hooks: list[str], out: Path) -> None:
    """A minbase root file system of ``suite`` with ``packages``; ``hooks`` run with the root as $1."""
    cmd = ["mmdebstrap", "--quiet", "--variant=minbase", "--mode=root", "--format=tar",
           "--include=" + ",".join(packages),
           "--aptopt=Acquire::Retries \"3\"",
           "--customize-hook=rm -rf \"$1\"/var/lib/apt/lists/* \"$1\"/var/cache/apt/*"]
    cmd += [f"--customize-hook={h}" for h in hooks]
    cmd += [suite, str(out), "http://deb.debian.org/debian"]
    t0 = time.monotonic()
    run(cmd)
    say(f"  {suite} root file system: {out.stat().st_size / 2**20:.0f} MB in {time.monotonic() - t0:.0f} s")


def stand_in_digest(name: str, *parts) -> str:
    """A stand-in's recipe: this file (its hooks, package lists and scripts) and what it copies in."""
    return digest(name, Path(__file__), *EXTRA_CAS, *parts)


def ca_hooks() -> list[str]:
    return [f'cp {c} "$1"/usr/local/share/ca-certificates/' for c in EXTRA_CAS] + \
           ['chroot "$1" update-ca-certificates >/dev/null']


def podman_import(tar: Path, tag: str, label: str, changes: list[str]) -> None:
    cmd = ["podman", "import", "--quiet", "--change", f"LABEL lab.recipe={label}"]
    for c in changes:
        cmd += ["--change", c]
    old = image_id(tag)
    run(cmd + [str(tar), tag], stdout=subprocess.DEVNULL)
    drop_replaced(old, tag)


def pack_python(stage: Path) -> tuple[Path, Path]:
    """This machine's CPython as python-build-standalone's install_only archive, and uv's list naming it."""
    if not (sys.version_info[:2] == (3, 11) and sys.version_info >= (3, 11, 5)
            and (HOST_PYTHON / "bin/python3.11").exists()):
        raise SystemExit(f"the lab's image needs CPython 3.11.5 or later to pack; this is {LAB_PYTHON} at "
                         f"{HOST_PYTHON}")
    tree = stage / "pytree"
    keep = ("python", "python3", "python3.11")
    excludes = ["./lib/python3.11/site-packages/*", "./lib/python3.11/test", "*/__pycache__",
                "./lib/python3.11/config-3.11-x86_64-linux-gnu/*.a", "./lib/python3.11/idlelib",
                "./lib/python3.11/tkinter", "./lib/python3.11/lib2to3/tests"]
    tree.mkdir()
    src = subprocess.Popen(["tar", "-C", str(HOST_PYTHON)] + [f"--exclude={e}" for e in excludes] + ["-cf", "-", "."],
                           stdout=subprocess.PIPE)
    run(["tar", "-C", str(tree), "--transform", r"s,^\.,python,", "-xf", "-"], stdin=src.stdout)
    src.wait()
    for f in (tree / "python/bin").iterdir():
        if f.name not in keep:
            f.unlink()
    # pyenv links the interpreter to its own prefix; python-build-standalone's is relative.
    run(["patchelf", "--set-rpath", "$ORIGIN/../lib", str(tree / "python/bin/python3.11")])
    name = f"cpython-{LAB_PYTHON}-x86_64-unknown-linux-gnu-install_only.tar.gz"
    archive = stage / name
    with tarfile.open(archive, "w:gz") as t:
        t.add(tree / "python", arcname="python")
    shutil.rmtree(tree)
    major, minor, patch = (int(x) for x in LAB_PYTHON.split("."))
    listing = {f"cpython-{LAB_PYTHON}-linux-x86_64-gnu": {
        "name": "cpython", "arch": {"family": "x86_64", "variant": None}, "os": "linux", "libc": "gnu",
        "major": major, "minor": minor, "patch": patch, "prerelease": "",
        "url": f"file:///opt/stand-in/{name}", "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
        "variant": None, "build": "local"}}
    downloads = stage / "python-downloads.json"
    downloads.write_text(json.dumps(listing, indent=1))
    return archive, downloads


def pyspark_wheel() -> Path:
    """The pinned pyspark's files (constraints.txt): the Spark distribution the official image has."""
    pin = next(l.split("==")[1].strip() for l in (ROOT / "constraints.txt").read_text().splitlines()
               if l.startswith("pyspark=="))
    found = sorted((Path.home() / ".cache/pip").rglob(f"pyspark-{pin}-*.whl"))
    if found:
        return found[0]
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dest), f"pyspark=={pin}"])
    return sorted(dest.glob(f"pyspark-{pin}-*.whl"))[0]


def build_spark(force: bool) -> None:
    wheel = pyspark_wheel()
    label = stand_in_digest("spark", wheel.name, LAB_PYTHON)
    if not force and recipe_label(SPARK_TAG) == label:
        say(f"{SPARK_TAG}: up to date")
        return
    say(f"{SPARK_TAG}: Debian 12, OpenJDK 17, Spark from {wheel.name}")
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        stage = Path(tmp)
        archive, downloads = pack_python(stage)
        (stage / "entrypoint.sh").write_text("#!/bin/bash\n# Anything but driver/executor (Kubernetes) runs as given.\n"
                                            "exec \"$@\"\n")
        spark_version = wheel.name.split("-")[1]
        hooks = ca_hooks() + [
            # Ubuntu 22.04's python3 (the official image's) lets pip install system-wide; Debian 12's refuses.
            'rm -f "$1"/usr/lib/python3.*/EXTERNALLY-MANAGED',
            'chroot "$1" groupadd --system --gid=185 spark',
            'chroot "$1" useradd --system --uid=185 --gid=spark --home-dir /nonexistent spark',
            f'mkdir -p "$1"/opt/spark/work-dir "$1"/opt/stand-in && cd "$1"/opt/spark && '
            f'python3 -m zipfile -e {wheel} /tmp/pyspark-whl.$$ && cp -r /tmp/pyspark-whl.$$/pyspark/jars '
            f'/tmp/pyspark-whl.$$/pyspark/bin /tmp/pyspark-whl.$$/pyspark/sbin . && rm -rf /tmp/pyspark-whl.$$ && '
            'chmod -R a+rx bin sbin && chmod g+w work-dir',
            f'printf "Spark {spark_version} built for Hadoop 3.4.2\\nStand-in: files of the pyspark wheel\\n" '
            '> "$1"/opt/spark/RELEASE',
            f'cp {archive} {downloads} "$1"/opt/stand-in/',
            f'install -m 0755 {stage}/entrypoint.sh "$1"/opt/entrypoint.sh',
        ]
        tar = stage / "spark.tar"
        mmdebstrap("bookworm", ["ca-certificates", "openjdk-17-jre-headless", "python3", "python3-pip",
                                "python3-venv", "procps", "wget", "tini", "libssl3", "libffi8", "libsqlite3-0",
                                "libbz2-1.0", "liblzma5", "libreadline8", "libncursesw6", "libuuid1", "libgdbm6",
                                "zlib1g", "passwd"], hooks, tar)
        cert = "/etc/ssl/certs/ca-certificates.crt"
        podman_import(tar, SPARK_TAG, label, [
            f"ENV JAVA_HOME={JAVA_HOME}", "ENV SPARK_HOME=/opt/spark",
            f"ENV PATH={JAVA_HOME}/bin:/opt/spark/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV UV_PYTHON_DOWNLOADS_JSON_URL=/opt/stand-in/python-downloads.json",
            f"ENV PIP_CERT={cert}", f"ENV SSL_CERT_FILE={cert}",
            "WORKDIR /opt/spark/work-dir", "USER 185", 'ENTRYPOINT ["/opt/entrypoint.sh"]'])
    say(f"{SPARK_TAG}: built")


def kafka_tools(dest: Path) -> Path:
    jar = dest / KAFKA_TOOLS.file
    if not jar.exists() or jars._sha1(jar) != KAFKA_TOOLS.sha1:
        jars._fetch_https([KAFKA_TOOLS], dest, os.environ.get("LAB_MAVEN_REPO") or jars.CENTRAL)
    return jar


def build_kafka(force: bool) -> None:
    broker = jars.ensure("kafka-broker")
    label = stand_in_digest("kafka", *[j.name for j in broker])
    if not force and recipe_label(KAFKA_TAG) == label:
        say(f"{KAFKA_TAG}: up to date")
        return
    say(f"{KAFKA_TAG}: Debian 12, OpenJDK 17, the lab's kafka-broker jars")
    CACHE.mkdir(parents=True, exist_ok=True)
    tools = kafka_tools(CACHE)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        stage = Path(tmp)
        (stage / "run").write_text(KAFKA_RUN)
        (stage / "kafka-broker-api-versions.sh").write_text(
            "#!/bin/sh\nexec java -Xmx128m -cp '/opt/kafka/libs/*' org.apache.kafka.tools.BrokerApiVersionsCommand "
            "\"$@\"\n")
        libs = " ".join(str(j) for j in broker) + f" {tools}"
        hooks = [
            'mkdir -p "$1"/opt/kafka/libs "$1"/opt/kafka/bin "$1"/opt/kafka/config "$1"/etc/kafka/docker',
            f'cp {libs} "$1"/opt/kafka/libs/',
            f'install -m 0755 {stage}/run "$1"/etc/kafka/docker/run',
            f'install -m 0755 {stage}/kafka-broker-api-versions.sh "$1"/opt/kafka/bin/',
            'printf "process.roles=broker,controller\\nnode.id=1\\n" > "$1"/opt/kafka/config/server.properties',
            'chroot "$1" useradd --uid 1000 --user-group --home-dir /home/appuser --create-home appuser',
            'chown -R 1000:1000 "$1"/opt/kafka/config',
        ]
        tar = stage / "kafka.tar"
        mmdebstrap("bookworm", ["openjdk-17-jre-headless", "python3-minimal", "passwd"], hooks, tar)
        podman_import(tar, KAFKA_TAG, label, [
            f"ENV JAVA_HOME={JAVA_HOME}", f"ENV PATH={JAVA_HOME}/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "USER appuser", "WORKDIR /home/appuser", 'ENTRYPOINT ["/etc/kafka/docker/run"]'])
    say(f"{KAFKA_TAG}: built")


def build_postgres(force: bool) -> None:
    label = stand_in_digest("postgres")
    if not force and recipe_label(POSTGRES_TAG) == label:
        say(f"{POSTGRES_TAG}: up to date")
        return
    say(f"{POSTGRES_TAG}: Debian 13's PostgreSQL 17 (Debian 12 has 15)")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        stage = Path(tmp)
        (stage / "entrypoint").write_text(POSTGRES_ENTRYPOINT)
        hooks = [f'install -m 0755 {stage}/entrypoint "$1"/usr/local/bin/docker-entrypoint.sh',
                 'mkdir -p "$1"/var/lib/postgresql/data && chroot "$1" chown -R postgres:postgres /var/lib/postgresql']
        tar = stage / "postgres.tar"
        mmdebstrap("trixie", ["postgresql-17", "util-linux"], hooks, tar)
        podman_import(tar, POSTGRES_TAG, label, [
            "ENV PATH=/usr/lib/postgresql/17/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV PGDATA=/var/lib/postgresql/data", "ENV LANG=C.UTF-8", "STOPSIGNAL SIGINT",
            'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]'])
    say(f"{POSTGRES_TAG}: built")


@dataclass
class Build:
    """One ``podman build``: its wall time, its steps (``STEP n/m``), those it took from podman's layer cache
    (``--> Using cache``), the first it ran, the image it made, and the end of its output when it failed."""

    seconds: float
    returncode: int
    steps: int = 0
    cached: int = 0
    first_run: str | None = None
    image: str | None = None
    tail: list[str] = field(default_factory=list)

    def reuse(self) -> str:
        """``24 of 25 steps from the cache, the first that ran: STEP 22/26: COPY lab ./lab`` (FROM not counted)."""
        ran = f", the first that ran: {self.first_run[:80]}" if self.first_run else ", none ran"
        return f"{self.cached} of {max(self.steps - 1, 0)} steps from the cache{ran}"


def lab_build_args() -> dict[str, str]:
    """The compose file's build arguments for the lab's image, and LAB_PYTHON (the CPython the Spark stand-in packs)."""
    return {"LAB_UID": os.environ.get("LAB_UID", "185"),
            # docker-compose.yml's default: Maven Central's address (the Dockerfile reads empty as the same).
            "LAB_MAVEN_REPO": os.environ.get("LAB_MAVEN_REPO") or jars.CENTRAL, "LAB_PYTHON": LAB_PYTHON}


def podman_build(context: Path, tag: str, dockerfile: str = LAB_DOCKERFILE, build_args: dict | None = None,
                 labels: dict | None = None, no_cache: bool = False, log: Path | None = None) -> Build:
    """``podman build`` of ``context``'s ``dockerfile`` (the lab's image by default) as :func:`build_lab` runs it,
    timed, its output parsed (and written to ``log``). The build's own exit status is in the result, not raised."""
    cmd = ["podman", "build", "--network", "host", "--runtime", "runc", "--cgroup-manager", "cgroupfs",
           "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096", "-f", dockerfile, "-t", tag]
    cmd += ["--no-cache"] if no_cache else []
    cmd += [a for k, v in (labels or {}).items() for a in ("--label", f"{k}={v}")]
    build_args = lab_build_args() if build_args is None else build_args
    cmd += [a for k, v in build_args.items() for a in ("--build-arg", f"{k}={v}")]
    t0 = time.monotonic()
    # --network host: the build's downloads (PyPI, Maven Central) go out as this machine's do.
    done = subprocess.run(cmd + ["."], cwd=context, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    b = Build(round(time.monotonic() - t0, 1), done.returncode)
    if log:
        log.write_text(done.stdout)
    lines = done.stdout.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"STEP (\d+)/(\d+): (.*)", line)
        if not m:
            continue
        b.steps = int(m.group(2))
        nxt = next((l for l in lines[i + 1:] if l.startswith(("STEP ", "--> "))), "")
        if nxt.startswith("--> Using cache"):
            b.cached += 1
        elif m.group(1) != "1" and b.first_run is None:
            b.first_run = line
    b.image = image_id(tag) if done.returncode == 0 else None
    b.tail = lines[-40:] if done.returncode else []
    return b


def build_context_copy(dest: Path, source: Path = ROOT, dockerfile: str = LAB_DOCKERFILE) -> Path:
    """The lab's build context copied into ``dest``: what the Dockerfile's ``.dockerignore`` lets in (its ``!``
    paths; ``__pycache__`` and ``*.pyc`` left out), modification times kept, with the Dockerfile and that file."""
    ignore = source / (dockerfile + ".dockerignore")
    keep = sorted({l.strip()[1:].strip("/").split("/")[0] for l in ignore.read_text().splitlines()
                   if l.strip().startswith("!")})
    for name in keep:
        src = source / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dest / name)
    for f in (source / dockerfile, ignore):
        (dest / f.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest / f.relative_to(source))
    return dest


def append_probe_line(context: Path, path: str = PROBE_FILE) -> None:
    """One harmless line (a comment that names when it was made) appended to ``path`` in a context copy."""
    with open(context / path, "a") as f:
        f.write(f"# rebuild probe {time.strftime('%Y-%m-%dT%H:%M:%S')} {os.urandom(4).hex()}\n")


def remove_images(*ids: str | None) -> None:
    """``podman rmi`` of each image (and its layers no other image uses); a missing one is no error."""
    for i in ids:
        if i:
            subprocess.run(["podman", "rmi", "--force", i], capture_output=True)


def build_lab(force: bool) -> None:
    """The lab's image from its Dockerfile, with the compose file's build arguments."""
    copied = [ROOT / LAB_DOCKERFILE, ROOT / "pyproject.toml", ROOT / "constraints.txt", ROOT / "README.md",
              ROOT / "lab"]
    build_args = lab_build_args()
    label = digest("lab", recipe_label(SPARK_TAG), json.dumps(build_args, sort_keys=True), *copied)
    if not force and recipe_label(LAB_TAG) == label:
        say(f"{LAB_TAG}: up to date")
        return
    say(f"{LAB_TAG}: podman build -f {LAB_DOCKERFILE} (pip install, jars fetched: minutes)")
    old = image_id(LAB_TAG)
    b = podman_build(ROOT, LAB_TAG, build_args=build_args, labels={"lab.recipe": label})
    if b.returncode:
        print("\n".join(b.tail), file=sys.stderr)
        raise SystemExit(f"podman build of {LAB_TAG} exited {b.returncode}")
    drop_replaced(old, LAB_TAG)
    say(f"{LAB_TAG}: built in {b.seconds:.0f} s ({b.reuse()})")


def rebuild_probe() -> None:
    """The lab's image built again from a copy of its context with one line appended to :data:`PROBE_FILE`:
    what a change in lab/ costs with podman's layer cache. Logged; the probe's image is removed."""
    with tempfile.TemporaryDirectory(prefix="lab-rebuild-probe-") as tmp:
        context = build_context_copy(Path(tmp))
        append_probe_line(context)
        say(f"rebuild probe: {PROBE_TAG} from a copy of the build context, one line appended to {PROBE_FILE}")
        remove_images(image_id(PROBE_TAG))  # an interrupted probe's
        b = podman_build(context, PROBE_TAG)
    remove_images(b.image)
    if b.returncode:
        print("\n".join(b.tail), file=sys.stderr)
        raise SystemExit(f"the rebuild probe's podman build exited {b.returncode}")
    say(f"image rebuild after a one-line change in lab/: {b.seconds:.0f} s ({b.reuse()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rebuild every image")
    ap.add_argument("--only", choices=["spark", "kafka", "postgres", "lab"], action="append")
    ap.add_argument("--rebuild-probe", action="store_true",
                    help=f"then rebuild the lab's image with one line appended to a copy of {PROBE_FILE}, and log its "
                         "time")
    args = ap.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    steps = {"spark": build_spark, "kafka": build_kafka, "postgres": build_postgres, "lab": build_lab}
    for name in args.only or list(steps):
        steps[name](args.force)
    if args.rebuild_probe:
        rebuild_probe()


if __name__ == "__main__":
    main()
