"""Static checks of the files that deploy the lab beyond one machine (no Docker engine needed).

* ``docker-compose.yml`` is valid against the Compose specification's JSON schema
  (``compose/config/compose_spec.json`` from the PyPI wheel ``docker-compose==1.29.2``,
  downloaded once with pip into a cache under ``.venv``);
* every image is pinned to a release (compose services, Dockerfile ``FROM`` lines);
* one Spark version everywhere: the ``pyspark`` pin in ``pyproject.toml``, the
  ``apache/spark`` image tags, ``environment.yml`` and the docs pages, each read
  independently, so any single drift fails; every ``spark-sql-kafka`` coordinate named
  is the connector ``lab/jars.json`` pins (4.2.0: Central has no 4.3.0), for the image's Scala;
* the lab's image bakes every jar set of ``lab/jars.json`` (``lab fetch``) into the
  ``LAB_CACHE_DIR`` its containers see, and no service downloads jars (``LAB_SPARK_PACKAGES``);
* one Kafka version: the ``apache/kafka`` image is the embedded broker's release
  (``lab/jars.json`` set ``kafka-broker``), in compose and in the docs;
* published ports are on 127.0.0.1 only;
* ``environment.yml`` pins equal ``pyproject.toml``'s, both ways;
* ``.devcontainer/devcontainer.json`` parses (comments aside), builds the lab's Dockerfile from the
  repository root, and forwards the port the lab's JupyterLab listens on (and the Spark UI's range);
* the stack is wired consistently (listeners, master URL, sink URL, shared runs volume,
  health-gated start order, one image for driver and executors), and the lab reaches
  Kafka through its proxy (``kafka-proxy``), whose listener Kafka advertises.

Every failure message names the file and the offending value.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
PYPROJECT = ROOT / "pyproject.toml"
ENV_YML = ROOT / "environment.yml"
README = ROOT / "README.md"
DOCKER_DIR = ROOT / "docker"
LAB_DOCKERFILE = DOCKER_DIR / "jupyter.Dockerfile"
DOC_PAGES = ("docs/docker.md", "docs/cluster.md", "docs/conda.md")

SPEC_DIST = "docker-compose==1.29.2"
SPEC_MEMBER = "compose/config/compose_spec.json"
SPEC_SHA256 = "0dc04bd346dcfee1b1419628fff79937bbf076925f298f272a2b490e2b112bac"

WORKERS = ("spark-worker-1", "spark-worker-2")
LOOPBACK = "127.0.0.1"


# -- reading the files -----------------------------------------------------------
def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


_VAR = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?", re.S)


def interpolate(value, env: dict | None = None):
    """Compose's variable interpolation with the given (default: empty) environment."""
    env = env or {}
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group("escaped"):
            return "$"
        if m.group("plain"):
            return env.get(m.group("plain"), "")
        b = _BRACED.fullmatch(m.group("braced"))
        assert b, f"{rel(COMPOSE)}: bad interpolation {m.group(0)!r}"
        val, op, arg = env.get(b["name"]), b["op"], b["arg"] or ""
        unset_or_empty = not val if op and op.startswith(":") else val is None
        if op in (":-", "-"):
            return arg if unset_or_empty else val
        if op in (":?", "?"):
            assert not unset_or_empty, f"{rel(COMPOSE)}: {m.group(0)!r} makes the variable required"
            return val
        if op in (":+", "+"):
            return "" if unset_or_empty else arg
        return val or ""

    return _VAR.sub(sub, value)


def compose(raw: bool = False) -> dict:
    doc = yaml.safe_load(COMPOSE.read_text())  # the safe loader resolves `<<:` merge keys
    return doc if raw else interpolate(doc)


def services() -> dict:
    return compose()["services"]


def environment(service: dict) -> dict:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return {k: (None if v is None else str(v)) for k, v in env.items()}


def command(service: dict) -> list[str]:
    """The service's command; of ``sh -c "...; exec <command>"``, the command the shell becomes."""
    cmd = service.get("command") or []
    cmd = cmd.split() if isinstance(cmd, str) else [str(c) for c in cmd]
    if cmd[:2] == ["sh", "-c"]:
        cmd = shlex.split(cmd[2].rsplit("exec ", 1)[-1])
    return cmd


def option(cmd: list[str], flag: str) -> str | None:
    return cmd[cmd.index(flag) + 1] if flag in cmd and cmd.index(flag) + 1 < len(cmd) else None


def pyproject() -> dict:
    return tomllib.loads(PYPROJECT.read_text())


def dockerfiles() -> list[Path]:
    return sorted(p for p in DOCKER_DIR.glob("*Dockerfile") if p.is_file())


def dockerfile_lines(path: Path) -> list[str]:
    """Instructions with continuation lines joined and comments dropped."""
    out, cur = [], ""
    for line in path.read_text().splitlines():
        if not cur and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        if cur.strip():
            out.append(cur.strip())
        cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


def dockerfile_args(path: Path) -> dict[str, str]:
    args = {}
    for line in dockerfile_lines(path):
        m = re.match(r"ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)$", line)
        if m:
            args[m.group(1)] = m.group(2).strip("\"'")
    return args


_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<extras>\[[^\]]*\])?\s*==\s*(?P<version>[^\s;,]+)$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(reqs: list[str], where: str) -> dict[str, str]:
    """``{canonical name[extras]: version}``; anything but an exact ``==`` pin fails naming it."""
    pins = {}
    for req in reqs:
        m = _PIN.match(req.strip())
        assert m, f"{where}: {req!r} is not an exact pin (name==version)"
        extras = ",".join(sorted(canonical(e) for e in m["extras"][1:-1].split(","))) if m["extras"] else ""
        key = canonical(m["name"]) + (f"[{extras}]" if extras else "")
        assert key not in pins, f"{where}: {req!r} is listed twice"
        pins[key] = m["version"]
    return pins


def pyproject_pins() -> dict[str, str]:
    return parse_pins(pyproject()["project"]["dependencies"], f"{rel(PYPROJECT)} [project.dependencies]")


def environment_yml() -> dict:
    return yaml.safe_load(ENV_YML.read_text())


def env_yml_pip() -> list[str]:
    pip = [d for d in environment_yml()["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, f"{rel(ENV_YML)}: expected one `pip:` list under dependencies, found {len(pip)}"
    return [str(r) for r in pip[0]["pip"]]


def env_yml_conda(name: str) -> str | None:
    for dep in environment_yml()["dependencies"]:
        if isinstance(dep, str) and re.split(r"[=<>! ]", dep, maxsplit=1)[0] == name:
            return dep
    return None


def pyspark_pin() -> str:
    pins = pyproject_pins()
    assert "pyspark" in pins, f"{rel(PYPROJECT)}: no pyspark==X.Y.Z in [project.dependencies]"
    return pins["pyspark"]


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


def satisfies(version: str, spec: str) -> bool:
    """``version`` against a PEP 440 specifier set of plain release numbers (``>=3.10,<3.14``)."""
    v = version_tuple(version)
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        m = re.fullmatch(r"(>=|<=|==|!=|>|<|~=)\s*([\d.]+)", clause)
        assert m, f"{rel(PYPROJECT)}: cannot read requires-python clause {clause!r}"
        op, bound = m.group(1), version_tuple(m.group(2))
        w = v[: len(bound)] if op in ("==", "!=") else v + (0,) * max(0, len(bound) - len(v))
        ok = {">=": w >= bound, "<=": w <= bound, ">": w > bound, "<": w < bound, "==": w == bound,
              "!=": w != bound, "~=": w >= bound and v[: len(bound) - 1] == bound[:-1]}[op]
        if not ok:
            return False
    return True


# -- (a) the Compose specification's schema --------------------------------------
def _spec_cache(pytestconfig) -> Path:
    venv = ROOT / ".venv"
    d = venv / ".cache" / "compose-spec" if venv.is_dir() else Path(pytestconfig.cache.mkdir("compose-spec"))
    d.mkdir(parents=True, exist_ok=True)
    return d / "compose_spec-docker-compose-1.29.2.json"


@pytest.fixture(scope="module")
def compose_spec(pytestconfig) -> dict:
    """The Compose spec JSON schema shipped in the docker-compose 1.29.2 wheel (downloaded once, checked by hash)."""
    target = _spec_cache(pytestconfig)
    if not target.is_file() or hashlib.sha256(target.read_bytes()).hexdigest() != SPEC_SHA256:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "--quiet", "--dest", tmp, SPEC_DIST]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            wheels = list(Path(tmp).glob("docker_compose-1.29.2-*.whl"))
            if r.returncode != 0 or not wheels:
                pytest.fail(f"could not download {SPEC_DIST} for its {SPEC_MEMBER} (needs PyPI): "
                            f"{(r.stderr or r.stdout).strip()[-500:]}")
            with zipfile.ZipFile(wheels[0]) as z:
                data = z.read(SPEC_MEMBER)
        digest = hashlib.sha256(data).hexdigest()
        assert digest == SPEC_SHA256, f"{SPEC_MEMBER} from {SPEC_DIST} has sha256 {digest}, expected {SPEC_SHA256}"
        tmp_target = target.with_suffix(".tmp")
        tmp_target.write_bytes(data)
        tmp_target.replace(target)
    return json.loads(target.read_text())


def schema_errors(schema: dict, doc: dict) -> list[str]:
    # The file says draft 2019-09 with an http:// id that jsonschema's lookup does not
    # recognise, so the validator class is named here instead of guessed from "$schema".
    from jsonschema import Draft201909Validator

    errors = sorted(Draft201909Validator(schema).iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{rel(COMPOSE)}: at {'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message[:300]}"
            for e in errors]


def test_compose_file_matches_the_compose_spec(compose_spec):
    problems = schema_errors(compose_spec, compose())
    assert not problems, "\n".join(problems)


def test_the_schema_check_catches_mistakes(compose_spec):
    bad = compose()
    bad["name"] = "lab"  # not in this schema: why docker-compose.yml has no top-level name
    bad["services"]["jupyter"]["depends_on"]["kafka"]["condition"] = "service_ready"
    problems = "\n".join(schema_errors(compose_spec, bad))
    assert "at (top level): 'name'" in problems, problems
    assert "depends_on" in problems, problems


# -- (b) pinned images --------------------------------------------------------------
def image_problem(ref: str) -> str | None:
    """Why ``ref`` is not pinned to a release (None when it is)."""
    if "$" in ref:
        return "is not a literal reference"
    name, _, digest = ref.partition("@")
    if digest:
        return None if re.fullmatch(r"sha256:[0-9a-f]{64}", digest) else "has a malformed digest"
    last = name.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag (that means latest)"
    tag = last.split(":", 1)[1]
    if tag == "latest" or "latest" in tag.split("-"):
        return "is tagged latest"
    if not re.match(r"\d+\.\d+", tag):
        return "has a floating tag (pin a release: major.minor[.patch]...)"
    return None


def image_refs() -> list[tuple[str, str]]:
    refs = [(f"{rel(COMPOSE)} service {name}", svc["image"]) for name, svc in services().items() if "image" in svc]
    for path in dockerfiles():
        for line in dockerfile_lines(path):
            m = re.match(r"FROM\s+(?:--platform=\S+\s+)?(\S+)", line, re.I)
            if m:
                refs.append((f"{rel(path)} FROM", m.group(1)))
            for src in re.findall(r"COPY\s+.*?--from=(\S+)", line, re.I):
                if "/" in src or ":" in src:
                    refs.append((f"{rel(path)} COPY --from", src))
    return refs


def test_every_image_is_pinned():
    refs = image_refs()
    assert any("FROM" in where for where, _ in refs), f"no FROM line found in {rel(DOCKER_DIR)}/*Dockerfile"
    problems = [f"{where}: image {ref!r} {why}" for where, ref in refs if (why := image_problem(ref))]
    for name, svc in services().items():
        if "image" not in svc and "build" not in svc:
            problems.append(f"{rel(COMPOSE)} service {name}: neither image nor build")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("ref, pinned", [
    ("postgres", False), ("postgres:latest", False), ("postgres:17", False), ("apache/spark:python3", False),
    ("postgres:17.6-bookworm", True), ("apache/spark:4.3.0-scala2.13-java17-python3-ubuntu", True),
    ("localhost:5000/x:1.2", True), ("localhost:5000/x", False), ("x@sha256:" + "a" * 64, True),
])
def test_the_pin_rule(ref, pinned):
    assert (image_problem(ref) is None) == pinned, image_problem(ref)


# -- (c) one Spark version everywhere ---------------------------------------------------
_SPARK_IMAGE = re.compile(r"apache/spark:(?P<version>\d+\.\d+\.\d+[^\s\"'`]*?)(?=[\s\"'`),]|$)")
_KAFKA_PKG = re.compile(r"org\.apache\.spark:spark-sql-kafka-0-10_(?P<scala>\d+\.\d+):(?P<version>[0-9A-Za-z.\-]+)")
_PYSPARK_PIN = re.compile(r"\bpyspark==(?P<version>[0-9A-Za-z.\-]+)")
_SPARK_WORD = re.compile(r"\b(?:Py)?Spark (?P<version>\d+\.\d+(?:\.\d+)?)\b")


def _image_version(tag: str) -> str:
    return tag.split("-", 1)[0]


def spark_in_compose_images(text: str) -> list[tuple[str, str]]:
    doc = interpolate(yaml.safe_load(text))
    return [(f"service {name} image {svc['image']!r}", _image_version(svc["image"].split(":", 1)[1]))
            for name, svc in doc["services"].items() if str(svc.get("image", "")).startswith("apache/spark:")]


def spark_in_dockerfile(text: str) -> list[tuple[str, str]]:
    return [(f"FROM apache/spark:{m['version']}", _image_version(m["version"]))
            for line in text.splitlines() if re.match(r"\s*FROM\s", line, re.I)
            for m in _SPARK_IMAGE.finditer(line)]


def spark_in_environment_yml(text: str) -> list[tuple[str, str]]:
    return [(f"pip pin {m.group(0)!r}", m["version"]) for m in _PYSPARK_PIN.finditer(text)]


def spark_in_prose(text: str, words: bool = True) -> list[tuple[str, str]]:
    found = [(f"image apache/spark:{m['version']}", _image_version(m["version"])) for m in _SPARK_IMAGE.finditer(text)]
    found += [(f"{m.group(0)!r}", m["version"]) for m in _PYSPARK_PIN.finditer(text)]
    if words:
        found += [(f"{m.group(0)!r}", m["version"]) for m in _SPARK_WORD.finditer(text)]
    return found


def _same_spark(found: str, pin: str) -> bool:
    # "Spark 4.3" in prose names the minor release; everything else must be the full version.
    return found == pin or (found.count(".") == 1 and pin.startswith(found + "."))


# label: (file, extractor, at least one mention required)
SPARK_SOURCES = {
    "compose apache/spark images": ("docker-compose.yml", spark_in_compose_images, True),
    "Dockerfile FROM apache/spark": ("docker/jupyter.Dockerfile", spark_in_dockerfile, True),
    "environment.yml pyspark pin": ("environment.yml", spark_in_environment_yml, True),
    **{page: (page, spark_in_prose, True) for page in DOC_PAGES},
    # README: only the exact forms (image tag, coordinate, pin); prose there may name older releases.
    "README.md": ("README.md", lambda text: spark_in_prose(text, words=False), False),
}


def spark_drift(label: str, text: str, pin: str) -> list[str]:
    path, extract, required = SPARK_SOURCES[label]
    found = extract(text)
    if required and not found:
        return [f"{path}: no Spark version found ({label}); pyproject.toml pins pyspark=={pin}"]
    return [f"{path}: {what} says Spark {version}, but pyproject.toml pins pyspark=={pin}"
            for what, version in found if not _same_spark(version, pin)]


@pytest.mark.parametrize("label", list(SPARK_SOURCES))
def test_one_spark_version_everywhere(label):
    path = ROOT / SPARK_SOURCES[label][0]
    assert path.is_file(), f"{rel(path)} is missing"
    problems = spark_drift(label, path.read_text(), pyspark_pin())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("label", [k for k, v in SPARK_SOURCES.items() if v[2]])
def test_a_drift_in_any_one_place_is_caught(label):
    pin = pyspark_pin()
    text = (ROOT / SPARK_SOURCES[label][0]).read_text()
    if spark_drift(label, text, pin):
        pytest.skip(f"{SPARK_SOURCES[label][0]} already drifts: test_one_spark_version_everywhere reports it")
    minor = pin.rsplit(".", 1)[0]
    drifted = text.replace(pin, "9.8.7").replace(f"Spark {minor}", "Spark 9.8")
    problems = spark_drift(label, drifted, pin)
    assert problems and all("9.8" in p for p in problems), problems


def test_the_scala_and_java_variants_agree():
    from lab.host.java import SUPPORTED_MAJORS

    tags = [ref.split(":", 1)[1] for _, ref in image_refs() if ref.startswith("apache/spark:")]
    assert tags, f"no apache/spark image in {rel(COMPOSE)} or {rel(DOCKER_DIR)}"
    assert len(set(tags)) == 1, f"{rel(COMPOSE)} / {rel(LAB_DOCKERFILE)}: apache/spark tags differ: {sorted(set(tags))}"
    scala = re.search(r"scala(\d+\.\d+)", tags[0])
    java = re.search(r"java(\d+)", tags[0])
    assert scala and java, f"apache/spark:{tags[0]} does not name its Scala and Java versions"
    # The image bakes lab/jars.json's connector: its Scala suffix must be the image's Scala.
    for coord in (j.coord for j in jar_set("spark-kafka").jars if j.coord.startswith("org.apache.spark:")):
        suffix = re.search(r"_(\d+\.\d+):", coord)
        assert suffix and suffix.group(1) == scala.group(1), (
            f"lab/jars.json set spark-kafka: {coord} does not match the image's Scala {scala.group(1)} "
            f"(apache/spark:{tags[0]})")
    assert int(java.group(1)) in SUPPORTED_MAJORS, (
        f"apache/spark:{tags[0]}: Java {java.group(1)} is not one of {SUPPORTED_MAJORS}")
    jdk = env_yml_conda("openjdk")
    assert jdk and int(version_tuple(jdk)[0]) in SUPPORTED_MAJORS, (
        f"{rel(ENV_YML)}: openjdk entry {jdk!r} is not Java 17 or 21")


def jar_set(name: str):
    from lab.host import jars

    return jars.jar_set(name)


def connector_coordinate() -> str:
    """``lab/jars.json``'s pinned ``spark-sql-kafka-0-10`` coordinate (what the image bakes)."""
    coords = [j.coord for j in jar_set("spark-kafka").jars if _KAFKA_PKG.fullmatch(j.coord)]
    assert len(coords) == 1, f"lab/jars.json set spark-kafka: expected one spark-sql-kafka-0-10 jar, found {coords}"
    return coords[0]


def connector_drift(text: str, where: str, pinned: str) -> list[str]:
    return [f"{where}: names {m.group(0)!r}, but lab/jars.json pins {pinned!r} (the jar the image bakes)"
            for m in _KAFKA_PKG.finditer(text) if m.group(0) != pinned]


CONNECTOR_FILES = ("docker-compose.yml", "docker/jupyter.Dockerfile", "README.md", *DOC_PAGES)


def test_connector_coordinates_are_the_pinned_one():
    pinned = connector_coordinate()
    problems = [p for path in CONNECTOR_FILES for p in connector_drift((ROOT / path).read_text(), path, pinned)]
    assert not problems, "\n".join(problems)
    assert connector_drift(f"uses {pinned[:-1]}9 today", "x", pinned), "a drifted coordinate must be caught"


def kafka_version() -> str:
    """Apache Kafka's release the embedded broker runs: ``lab/jars.json`` set ``kafka-broker``, read through
    lab.host.jars."""
    js = jar_set("kafka-broker")
    core = [j for j in js.jars if re.fullmatch(r"org\.apache\.kafka:kafka_\d+\.\d+:[^:]+", j.coord)]
    assert len(core) == 1, f"lab/jars.json set kafka-broker: expected one kafka_<scala> broker jar, found {core}"
    assert core[0].gav[2] == js.version, (
        f"lab/jars.json set kafka-broker: version {js.version!r}, but its broker jar is {core[0].coord}")
    return js.version


_KAFKA_IMAGE = re.compile(r"apache/kafka:(?P<tag>[0-9A-Za-z.\-]+)")


def kafka_drift(text: str, where: str, version: str, required: bool) -> list[str]:
    tags = [m["tag"].rstrip(".") for m in _KAFKA_IMAGE.finditer(text)]
    if required and not tags:
        return [f"{where}: no apache/kafka:<version> image named; the embedded broker is Kafka {version}"]
    return [f"{where}: image apache/kafka:{tag}, but the embedded broker is Kafka {version} (lab/jars.json set "
            "kafka-broker): scenarios must see the same broker in the stack as on one machine"
            for tag in tags if tag != version]


def test_the_stacks_kafka_is_the_embedded_brokers_version():
    version = kafka_version()
    image = services()["kafka"]["image"]
    assert image == f"apache/kafka:{version}", (
        f"{rel(COMPOSE)} service kafka: image {image!r}, but the embedded broker is Kafka {version} "
        "(lab/jars.json set kafka-broker)")
    problems = kafka_drift(COMPOSE.read_text(), rel(COMPOSE), version, True)
    problems += kafka_drift((ROOT / "docs/docker.md").read_text(), "docs/docker.md", version, True)
    problems += kafka_drift(README.read_text(), "README.md", version, False)
    assert not problems, "\n".join(problems)
    drifted = COMPOSE.read_text().replace(f"apache/kafka:{version}", "apache/kafka:9.8.7")
    assert kafka_drift(drifted, "x", version, True), "a drifted Kafka image must be caught"


def dockerfile_env(path: Path) -> list[tuple[int, str, str]]:
    """``(instruction index, name, value)`` of every ``ENV name=value`` in ``path``."""
    out = []
    for i, line in enumerate(dockerfile_lines(path)):
        if re.match(r"ENV\s", line, re.I):
            pairs = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|\S+)", line[4:])
            out += [(i, k, v.strip("\"'")) for k, v in pairs]
    return out


def test_the_image_bakes_every_jar_set_into_the_cache_its_containers_see():
    from lab.host import jars

    lines = dockerfile_lines(LAB_DOCKERFILE)
    cache = [(i, v) for i, k, v in dockerfile_env(LAB_DOCKERFILE) if k == "LAB_CACHE_DIR"]
    assert len(cache) == 1, f"{rel(LAB_DOCKERFILE)}: expected one ENV LAB_CACHE_DIR=<dir>, found {cache}"
    env_at, cache_dir = cache[0]
    assert cache_dir.startswith("/") and "$" not in cache_dir, f"{rel(LAB_DOCKERFILE)}: LAB_CACHE_DIR={cache_dir!r}"
    install = next(i for i, l in enumerate(lines) if re.search(r"pip install .*-e \.", l))
    fetches = [(i, l) for i, l in enumerate(lines) if l.startswith("RUN") and re.search(r"(^|[\s/])lab fetch\b", l)]
    assert fetches, f"{rel(LAB_DOCKERFILE)}: no RUN ... lab fetch: the jars would be downloaded at run time"
    for i, line in fetches:
        where = f"{rel(LAB_DOCKERFILE)}: {line[:120]!r}"
        assert i > install, f"{where} runs before the lab is installed"
        assert i > env_at, f"{where} runs before ENV LAB_CACHE_DIR: it would fill another cache than the runtime's"
        assert "LAB_CACHE_DIR=" not in line and "XDG_CACHE_HOME=" not in line, f"{where} fetches into another cache"
        assert "--route mvn" not in line, f"{where}: the image has no mvn"
    named = {m for _, l in fetches for m in re.findall(r"--set[ =](\S+)", l)}
    if named:  # `lab fetch` alone fetches every set
        assert named == set(jars.manifest()), (
            f"{rel(LAB_DOCKERFILE)}: fetches sets {sorted(named)}, lab/jars.json has {sorted(jars.manifest())}")
    ignore = LAB_DOCKERFILE.with_name(LAB_DOCKERFILE.name + ".dockerignore").read_text().split()
    assert "!lab" in ignore and jars.MANIFEST.is_file(), "lab/jars.json must reach the build context (!lab)"

    svcs = services()
    for name in ("jupyter", "kafka-proxy", *WORKERS):
        env = environment(svcs[name])
        assert env.get("LAB_CACHE_DIR", cache_dir) == cache_dir, (
            f"{rel(COMPOSE)} service {name}: LAB_CACHE_DIR={env['LAB_CACHE_DIR']!r}, "
            f"but the image bakes the jars into {cache_dir!r}")
    for name, svc in svcs.items():
        pkgs = environment(svc).get("LAB_SPARK_PACKAGES")
        assert not pkgs, (f"{rel(COMPOSE)} service {name}: LAB_SPARK_PACKAGES={pkgs!r} downloads jars at every driver "
                          f"start; the image has {connector_coordinate()} in {cache_dir}")


# -- (d) ports only on loopback --------------------------------------------------------
def port_problem(entry) -> str | None:
    if isinstance(entry, dict):
        return None if entry.get("host_ip") == LOOPBACK else "long syntax without host_ip: 127.0.0.1"
    spec = str(entry).split("/", 1)[0]
    if spec.startswith("["):
        return f"binds {spec[: spec.index(']') + 1]}, not {LOOPBACK}"
    parts = spec.split(":")
    if len(parts) < 3:
        return "has no host address, so Docker publishes it on every interface"
    return None if parts[0] == LOOPBACK else f"binds {parts[0]}, not {LOOPBACK}"


def test_ports_are_published_on_loopback_only():
    problems = []
    published = 0
    for name, svc in services().items():
        if svc.get("network_mode") == "host":
            problems.append(f"{rel(COMPOSE)} service {name}: network_mode 'host' shares every host interface")
        for entry in svc.get("ports") or []:
            published += 1
            if (why := port_problem(entry)):
                problems.append(f"{rel(COMPOSE)} service {name}: port {entry!r} {why}")
    assert published, f"{rel(COMPOSE)}: no published ports at all"
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("entry, ok", [
    ("127.0.0.1:8888:8888", True), ("127.0.0.1:8888:8888/tcp", True), ("8888:8888", False), ("8888", False),
    ("0.0.0.0:8888:8888", False), ("[::]:8888:8888", False), ({"target": 8888, "published": 8888}, False),
])
def test_the_port_rule(entry, ok):
    assert (port_problem(entry) is None) == ok


# -- (e) environment.yml mirrors pyproject.toml ------------------------------------------
def pin_differences(project: dict[str, str], env: dict[str, str]) -> list[str]:
    out = []
    for key in sorted(project.keys() - env.keys()):
        out.append(f"{rel(ENV_YML)}: missing {key}=={project[key]} (pinned in {rel(PYPROJECT)})")
    for key in sorted(env.keys() - project.keys()):
        out.append(f"{rel(ENV_YML)}: {key}=={env[key]} is not a dependency in {rel(PYPROJECT)}")
    for key in sorted(project.keys() & env.keys()):
        if project[key] != env[key]:
            out.append(f"{rel(ENV_YML)}: {key}=={env[key]}, but {rel(PYPROJECT)} pins {key}=={project[key]}")
    return out


def env_yml_pins() -> dict[str, str]:
    reqs = [r for r in env_yml_pip() if r.strip() not in ("-e .", "--editable .", "-e ./", ".")]
    return parse_pins(reqs, f"{rel(ENV_YML)} pip:")


def test_environment_yml_mirrors_pyproject_pins():
    assert any(r.strip() in ("-e .", "--editable .") for r in env_yml_pip()), (
        f"{rel(ENV_YML)}: pip list lacks `-e .` (the lab itself)")
    problems = pin_differences(pyproject_pins(), env_yml_pins())
    assert not problems, "\n".join(problems)


def test_a_pin_difference_is_caught_both_ways():
    project, env = pyproject_pins(), env_yml_pins()
    changed = dict(env, pandas="0.0.1")
    extra = dict(env, requests="2.0.0")
    missing = {k: v for k, v in env.items() if k != "numpy"}
    assert any("pandas==0.0.1" in p for p in pin_differences(project, changed))
    assert any("requests==2.0.0" in p for p in pin_differences(project, extra))
    assert any("missing numpy" in p for p in pin_differences(project, missing))


def test_python_versions_satisfy_requires_python():
    spec = pyproject()["project"]["requires-python"]
    conda_python = env_yml_conda("python")
    assert conda_python, f"{rel(ENV_YML)}: no python=3.X entry"
    conda_version = re.split(r"[=<>]+", conda_python, maxsplit=1)[1]
    assert satisfies(conda_version, spec), f"{rel(ENV_YML)}: {conda_python!r} is outside requires-python {spec!r}"
    image_python = dockerfile_args(LAB_DOCKERFILE).get("LAB_PYTHON")
    assert image_python, f"{rel(LAB_DOCKERFILE)}: no ARG LAB_PYTHON=X.Y.Z"
    assert satisfies(image_python, spec), (
        f"{rel(LAB_DOCKERFILE)}: LAB_PYTHON={image_python} is outside requires-python {spec!r}")
    assert version_tuple(image_python)[:2] == version_tuple(conda_version)[:2], (
        f"{rel(LAB_DOCKERFILE)}: LAB_PYTHON={image_python} is not the minor version of {rel(ENV_YML)}'s "
        f"{conda_python!r}")


@pytest.mark.parametrize("version, spec, ok", [
    ("3.11.18", ">=3.10,<3.14", True), ("3.14.0", ">=3.10,<3.14", False), ("3.9", ">=3.10", False),
    ("3.11", "==3.11", True), ("3.12.1", "~=3.11", True),
])
def test_the_requires_python_rule(version, spec, ok):
    assert satisfies(version, spec) == ok


# -- the stack's wiring ----------------------------------------------------------------
def test_start_order_waits_for_health():
    svcs, problems = services(), []
    for name, svc in svcs.items():
        deps = svc.get("depends_on") or {}
        if isinstance(deps, list):
            problems.append(f"{rel(COMPOSE)} service {name}: depends_on {deps} has no condition: service_healthy")
            continue
        for dep, how in deps.items():
            if (how or {}).get("condition") != "service_healthy":
                problems.append(f"{rel(COMPOSE)} service {name}: depends_on {dep} with {how!r}, not condition: "
                                "service_healthy")
            if dep not in svcs:
                problems.append(f"{rel(COMPOSE)} service {name}: depends_on unknown service {dep!r}")
            elif not (svcs[dep].get("healthcheck") or {}).get("test"):
                problems.append(f"{rel(COMPOSE)} service {dep}: no healthcheck, yet {name} waits for it to be healthy")
    jupyter_deps = set(svcs.get("jupyter", {}).get("depends_on") or {})
    for needed in ("kafka", "kafka-proxy", "postgres", "spark-master", *WORKERS):
        if needed not in jupyter_deps:
            problems.append(f"{rel(COMPOSE)} service jupyter: does not wait for {needed}")
    assert not problems, "\n".join(problems)


def test_lab_environment_points_at_the_stack():
    svcs = services()
    assert {"kafka", "postgres", "spark-master", "jupyter", *WORKERS} <= set(svcs), (
        f"{rel(COMPOSE)}: services are {sorted(svcs)}")
    env = environment(svcs["jupyter"])
    where = f"{rel(COMPOSE)} service jupyter"

    kafka = environment(svcs["kafka"])
    advertised = kafka_listeners(kafka, "KAFKA_ADVERTISED_LISTENERS")
    proxied = proxy_listener()
    assert env.get("LAB_KAFKA_BOOTSTRAP") == advertised.get(proxied) == "kafka-proxy:19092", (
        f"{where}: LAB_KAFKA_BOOTSTRAP={env.get('LAB_KAFKA_BOOTSTRAP')!r}; the lab must use the listener behind "
        f"the proxy, {proxied} advertised as {advertised.get(proxied)!r}")
    host_port = advertised.get("HOST", "")
    assert host_port.startswith(f"{LOOPBACK}:") and any(
        str(p).startswith(f"{host_port}:") for p in svcs["kafka"].get("ports", [])), (
        f"{rel(COMPOSE)} service kafka: HOST listener advertises {host_port!r}, which is not its published 127.0.0.1 "
        "port")

    master_cmd = command(svcs["spark-master"])
    master_url = f"spark://{option(master_cmd, '--host')}:{option(master_cmd, '--port')}"
    assert env.get("LAB_SPARK_MASTER") == master_url == "spark://spark-master:7077", (
        f"{where}: LAB_SPARK_MASTER={env.get('LAB_SPARK_MASTER')!r}; the master listens at {master_url!r}")
    for w in WORKERS:
        cmd = command(svcs[w])
        assert master_url in cmd, f"{rel(COMPOSE)} service {w}: command {cmd} does not register with {master_url}"
        assert option(cmd, "--host") == svcs[w].get("hostname") == w, (
            f"{rel(COMPOSE)} service {w}: --host {option(cmd, '--host')!r} / hostname {svcs[w].get('hostname')!r}")

    sink = urlsplit(env.get("LAB_SINK_URL", ""))
    pg = environment(svcs["postgres"])
    assert sink.scheme in ("postgresql", "postgres") and sink.hostname == "postgres" and (sink.port or 5432) == 5432, (
        f"{where}: LAB_SINK_URL={env.get('LAB_SINK_URL')!r} is not the postgres service")
    assert (sink.username, sink.password, sink.path.lstrip("/")) == (
        pg.get("POSTGRES_USER"), pg.get("POSTGRES_PASSWORD"), pg.get("POSTGRES_DB")), (
        f"{where}: LAB_SINK_URL={env.get('LAB_SINK_URL')!r} does not match the postgres service's user/password/db")

    assert env.get("LAB_SPARK_DRIVER_HOST") == svcs["jupyter"].get("hostname") == "jupyter", (
        f"{where}: LAB_SPARK_DRIVER_HOST={env.get('LAB_SPARK_DRIVER_HOST')!r} must be the container's hostname")


def kafka_listeners(kafka_env: dict, key: str) -> dict[str, str]:
    """``{listener name: host:port}`` of ``KAFKA_LISTENERS`` or ``KAFKA_ADVERTISED_LISTENERS``."""
    return dict(item.strip().split("://", 1) for item in (kafka_env.get(key) or "").split(",") if item.strip())


PROXY = "kafka-proxy"


def proxy_listener() -> str:
    """The Kafka listener the proxy forwards to, named by its ``--upstream`` (kafka:<port>)."""
    svcs = services()
    cmd = command(svcs[PROXY])
    upstream = option(cmd, "--upstream") or ""
    host, _, port = upstream.rpartition(":")
    assert host == "kafka" == svcs["kafka"].get("hostname"), (
        f"{rel(COMPOSE)} service {PROXY}: --upstream {upstream!r} is not the kafka service")
    bound = kafka_listeners(environment(svcs["kafka"]), "KAFKA_LISTENERS")
    names = [name for name, addr in bound.items() if addr.rpartition(":")[2] == port]
    assert len(names) == 1, f"{rel(COMPOSE)} service {PROXY}: --upstream {upstream!r} is no listener of Kafka's {bound}"
    return names[0]


def test_kafka_is_reached_through_the_lab_proxy():
    svcs = services()
    assert PROXY in svcs, f"{rel(COMPOSE)}: no {PROXY} service: ack-loss and broker-outage need the lab's proxy"
    svc, where = svcs[PROXY], f"{rel(COMPOSE)} service {PROXY}"
    for key in ("image", "build"):
        assert svc.get(key) == svcs["jupyter"][key], f"{where}: {key} {svc.get(key)!r} is not the lab's image"
    cmd = command(svc)
    assert cmd[:3] == ["python", "-m", "lab.broker.proxy"], (
        f"{where}: command {cmd} does not run python -m lab.broker.proxy")
    listen, control = option(cmd, "--listen"), option(cmd, "--control")
    assert listen and listen.isdigit() and control and control.isdigit() and listen != control, (
        f"{where}: --listen {listen!r} / --control {control!r} must be two fixed ports (other containers name them)")
    assert option(cmd, "--host") == "0.0.0.0", (
        f"{where}: --host {option(cmd, '--host')!r}; other containers cannot reach 127.0.0.1")
    assert not svc.get("ports"), (
        f"{where}: publishes {svc['ports']}; its control port takes commands from anyone who reaches it")
    assert svc.get("hostname") == PROXY, f"{where}: hostname {svc.get('hostname')!r}"

    kafka = environment(svcs["kafka"])
    name = proxy_listener()
    advertised = kafka_listeners(kafka, "KAFKA_ADVERTISED_LISTENERS")
    assert advertised.get(name) == f"{PROXY}:{listen}", (
        f"{rel(COMPOSE)} service kafka: listener {name} advertises {advertised.get(name)!r}, not {PROXY}:{listen}: "
        "clients would leave the proxy after their first metadata request")
    assert name not in (kafka.get("KAFKA_INTER_BROKER_LISTENER_NAME"), kafka.get("KAFKA_CONTROLLER_LISTENER_NAMES")), (
        f"{rel(COMPOSE)} service kafka: {name} carries Kafka's own traffic; a proxy fault would hit the broker itself")
    protocols = dict(p.split(":", 1) for p in kafka.get("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "").split(","))
    assert protocols.get(name) == "PLAINTEXT", (
        f"{rel(COMPOSE)} service kafka: listener {name} has protocol {protocols.get(name)!r}")

    env = environment(svcs["jupyter"])
    assert env.get("LAB_KAFKA_BOOTSTRAP") == f"{PROXY}:{listen}", (
        f"{rel(COMPOSE)} service jupyter: LAB_KAFKA_BOOTSTRAP={env.get('LAB_KAFKA_BOOTSTRAP')!r}, "
        f"not the proxy {PROXY}:{listen}")
    assert env.get("LAB_KAFKA_PROXY") == f"{PROXY}:{control}", (
        f"{rel(COMPOSE)} service jupyter: LAB_KAFKA_PROXY={env.get('LAB_KAFKA_PROXY')!r}, "
        f"not the control port {PROXY}:{control}")

    health = " ".join(map(str, (svc.get("healthcheck") or {}).get("test") or []))
    assert control in health and "status" in health, (
        f"{where}: healthcheck {health!r} does not ask the control port for a status")
    assert (svc.get("depends_on") or {}).get("kafka", {}).get("condition") == "service_healthy", (
        f"{where}: does not wait for a healthy kafka")
    assert (svcs["jupyter"].get("depends_on") or {}).get(PROXY, {}).get("condition") == "service_healthy", (
        f"{rel(COMPOSE)} service jupyter: does not wait for a healthy {PROXY}")


def test_the_proxy_healthcheck_runs(tmp_path):
    """The healthcheck's own Python, against a proxy of the lab on 127.0.0.1 (its control port is swapped in)."""
    from lab.host import processes
    from tests.unit.test_proxy import start_proxy, wait_ready

    svc = services()[PROXY]
    test = ["CMD", *shlex.split(svc["healthcheck"]["test"][1])]  # CMD-SHELL: test_both_compose_tools_read_it_alike
    assert test[:3] == ["CMD", "python", "-c"], f"{rel(COMPOSE)} service {PROXY}: healthcheck {test}"
    control = option(command(svc), "--control")
    p, ready = start_proxy(tmp_path, "--upstream", "127.0.0.1:9")
    try:
        port = wait_ready(p, ready)["control"]
        code = test[3].replace(control, str(port))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        processes.stop_process(p)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0, "the healthcheck passes without a proxy"
    finally:
        processes.stop_process(p)


def test_both_compose_tools_read_it_alike():
    """What podman-compose 1.0.3 (Debian 12's, with which `make test-stack` runs this file) reads otherwise than
    Docker Compose, measured there: a health check as a ``CMD`` list becomes ``/bin/sh -c python -c ...``, a bare
    ``python`` that passes whatever the service's state; ``${VAR:-}`` (an empty default) is left as written, set or
    not, so JupyterLab's token was the text ``${LAB_JUPYTER_TOKEN:-}``."""
    problems = []
    for name, svc in services().items():
        test = (svc.get("healthcheck") or {}).get("test")
        if isinstance(test, list) and test[:1] != ["CMD-SHELL"]:
            problems.append(f"service {name}: healthcheck {test[:2]}...: write it as CMD-SHELL")
    problems += [f"{found}: an empty default; give a value or pass the variable through (`NAME:` in environment)"
                 for found in sorted(set(re.findall(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-\}",
                                                    json.dumps(compose(raw=True)))))]
    assert not problems, f"{rel(COMPOSE)}: " + "; ".join(problems)


def test_jupyterlab_takes_its_token_from_lab_jupyter_token():
    """Passed through from the host when set; the command hands it to Jupyter as JUPYTER_TOKEN, which Jupyter
    ignores when empty (it makes a random token then), so an unset variable never means "no token"."""
    svc = services()["jupyter"]
    assert "LAB_JUPYTER_TOKEN" in environment(svc) and environment(svc)["LAB_JUPYTER_TOKEN"] is None, (
        f"{rel(COMPOSE)} service jupyter: LAB_JUPYTER_TOKEN is not passed through from the host")
    shell = svc["command"][2].replace("$$", "$")
    assert svc["command"][:2] == ["sh", "-c"] and 'export JUPYTER_TOKEN="$LAB_JUPYTER_TOKEN";' in shell, svc["command"]
    assert "IdentityProvider.token" not in shell and "ServerApp.token" not in shell, (
        "an empty token there turns auth off")


def test_the_maven_repository_default_is_the_labs():
    from lab.host.jars import CENTRAL

    args = compose()["x-lab-image"]["build"]["args"]
    assert args["LAB_MAVEN_REPO"] == CENTRAL, f"{rel(COMPOSE)}: LAB_MAVEN_REPO defaults to {args['LAB_MAVEN_REPO']!r}"


def _named_mounts(svc: dict, named: set[str]) -> dict[str, str]:
    """``{container path: volume}`` for the service's named-volume mounts."""
    out = {}
    for v in svc.get("volumes") or []:
        if isinstance(v, dict):
            src, dst = v.get("source"), v.get("target")
        else:
            src, _, rest = str(v).partition(":")
            dst = rest.split(":", 1)[0]
        if src in named:
            out[dst] = src
    return out


def test_runs_volume_is_shared_at_the_same_path():
    doc = compose()
    svcs, named = doc["services"], set(doc.get("volumes") or {})
    runs_dir = environment(svcs["jupyter"]).get("LAB_RUNS_DIR")
    assert runs_dir, f"{rel(COMPOSE)} service jupyter: LAB_RUNS_DIR is not set"
    jupyter_volume = _named_mounts(svcs["jupyter"], named).get(runs_dir)
    assert jupyter_volume, f"{rel(COMPOSE)} service jupyter: LAB_RUNS_DIR={runs_dir!r} is not a named-volume mount"
    for w in WORKERS:
        got = _named_mounts(svcs[w], named).get(runs_dir)
        assert got == jupyter_volume, (
            f"{rel(COMPOSE)} service {w}: mounts {got!r} at {runs_dir!r}, not the volume {jupyter_volume!r} "
            "the driver writes checkpoints to")
    notebooks = [v for v in svcs["jupyter"].get("volumes", []) if str(v).startswith("./notebooks:")]
    assert notebooks, f"{rel(COMPOSE)} service jupyter: ./notebooks is not mounted"


def test_driver_and_executors_share_one_image():
    svcs = services()
    jupyter = svcs["jupyter"]
    assert jupyter.get("build") and jupyter.get("image"), f"{rel(COMPOSE)} service jupyter: needs both build and image"
    for w in WORKERS:
        for key in ("image", "build"):
            assert svcs[w].get(key) == jupyter[key], (
                f"{rel(COMPOSE)} service {w}: {key} {svcs[w].get(key)!r} differs from jupyter's {jupyter[key]!r}: "
                "executors would run another Python or lack the lab")
    build = jupyter["build"]
    dockerfile = ROOT / build.get("context", ".") / build["dockerfile"]
    assert dockerfile.resolve() == LAB_DOCKERFILE.resolve(), f"{rel(COMPOSE)}: jupyter builds {build['dockerfile']!r}"


def test_lab_dockerfile_installs_the_pinned_lab():
    lines = dockerfile_lines(LAB_DOCKERFILE)
    installs = [l for l in lines if re.search(r"pip install .*(-e \.|\s\.(\s|;|$))", l)]
    assert installs, f"{rel(LAB_DOCKERFILE)}: no `pip install ... -e .` of the lab"
    for line in installs:
        assert "-c constraints.txt" in line, f"{rel(LAB_DOCKERFILE)}: {line[:160]!r} does not use -c constraints.txt"
    ignore = LAB_DOCKERFILE.with_name(LAB_DOCKERFILE.name + ".dockerignore")
    assert ignore.is_file(), f"{rel(ignore)} is missing: the build context would carry .venv and runs/"
    included = {l.strip()[1:].strip("/") for l in ignore.read_text().splitlines() if l.strip().startswith("!")}
    for line in lines:
        m = re.match(r"COPY\s+(?!--from)(?:--\S+\s+)*(.+)\s+\S+$", line)
        if not m:
            continue
        for src in m.group(1).split():
            src = src.strip("/")
            assert (ROOT / src).exists(), f"{rel(LAB_DOCKERFILE)}: COPY source {src!r} does not exist"
            assert src in included, f"{rel(ignore)}: COPY source {src!r} is not re-included (add !{src})"


# -- (f) the devcontainer: the lab's image for VS Code and Codespaces ----------------------
DEVCONTAINER = ROOT / ".devcontainer" / "devcontainer.json"


def strip_json_comments(text: str) -> str:
    """devcontainer.json's JSON-with-comments as plain JSON: ``//`` and ``/* */`` outside strings dropped."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def devcontainer() -> dict:
    assert DEVCONTAINER.is_file(), f"{rel(DEVCONTAINER)} is missing"
    try:
        return json.loads(strip_json_comments(DEVCONTAINER.read_text()))
    except ValueError as e:
        pytest.fail(f"{rel(DEVCONTAINER)}: not JSON (comments aside): {e}")


def devcontainer_commands(doc: dict) -> list[list[str]]:
    """Every lifecycle command of ``doc`` as an argument list (string, list and named-object forms)."""
    out = []
    for key in ("onCreateCommand", "updateContentCommand", "postCreateCommand", "postStartCommand",
                "postAttachCommand"):
        value = doc.get(key)
        for cmd in (value.values() if isinstance(value, dict) else [value] if value else []):
            out.append(cmd.split() if isinstance(cmd, str) else [str(c) for c in cmd])
    return out


def test_the_comment_stripper_keeps_strings():
    text = '{\n  // a comment\n  "url": "http://127.0.0.1:8888", /* another */ "a\\"//b": 1\n}'
    assert json.loads(strip_json_comments(text)) == {"url": "http://127.0.0.1:8888", 'a"//b': 1}


def test_the_devcontainer_builds_the_labs_image():
    doc, where = devcontainer(), rel(DEVCONTAINER)
    build = doc.get("build") or {}
    assert "image" not in doc and build.get("dockerfile"), f"{where}: must build docker/jupyter.Dockerfile, not pull"
    # Paths in devcontainer.json are relative to the file's own folder.
    dockerfile = (DEVCONTAINER.parent / build["dockerfile"]).resolve()
    context = (DEVCONTAINER.parent / build.get("context", ".")).resolve()
    assert dockerfile.is_file(), f"{where}: build.dockerfile {build['dockerfile']!r} does not exist"
    assert dockerfile == LAB_DOCKERFILE.resolve(), f"{where}: builds {build['dockerfile']!r}, not {rel(LAB_DOCKERFILE)}"
    assert context.is_dir(), f"{where}: build.context {build.get('context')!r} does not exist"
    # The Dockerfile's COPY sources (pyproject.toml, lab/, ...) are relative to the repository root, as in compose.
    assert context == ROOT.resolve(), f"{where}: build.context {build.get('context')!r} is not the repository root"
    assert doc.get("init") is True, f"{where}: no init: zombies of PySpark's workers would pile up under PID 1"


def test_the_devcontainer_forwards_jupyters_port_and_the_spark_ui():
    from lab.spark.session import UI_BASE_PORT, UI_PORT_RETRIES

    doc, where = devcontainer(), rel(DEVCONTAINER)
    compose_port = option(command(services()["jupyter"]), "--port")
    assert compose_port, f"{rel(COMPOSE)} service jupyter: no --port in its command"
    jupyters = [cmd for cmd in devcontainer_commands(doc) if cmd[:2] == ["jupyter", "lab"]]
    assert len(jupyters) == 1, f"{where}: expected one lifecycle command starting `jupyter lab`, found {jupyters}"
    port, ip = option(jupyters[0], "--port"), option(jupyters[0], "--ip")
    assert port == compose_port, (
        f"{where}: JupyterLab on --port {port}, but the lab's image serves it on {compose_port} ({rel(COMPOSE)})")
    assert ip == LOOPBACK, f"{where}: JupyterLab binds --ip {ip!r}; forwarding reaches the container's {LOOPBACK}"
    assert "--ServerApp.port_retries=0" in jupyters[0], (
        f"{where}: a second JupyterLab would move to another port than the forwarded one")
    forwarded = [str(p) for p in doc.get("forwardPorts") or []]
    assert forwarded == [compose_port], f"{where}: forwardPorts {forwarded}, expected [{compose_port}] (JupyterLab)"
    attrs = doc.get("portsAttributes") or {}
    assert compose_port in attrs, f"{where}: no portsAttributes for JupyterLab's port {compose_port}"
    ui_range = f"{UI_BASE_PORT}-{UI_BASE_PORT + UI_PORT_RETRIES}"
    assert ui_range in attrs, (
        f"{where}: portsAttributes lacks {ui_range!r}, the ports a driver's Spark UI binds "
        f"(lab.spark.session.UI_BASE_PORT and spark.port.maxRetries), has {sorted(attrs)}")


def test_the_devcontainer_opens_notebooks_with_the_images_python():
    doc, where = devcontainer(), rel(DEVCONTAINER)
    vscode = (doc.get("customizations") or {}).get("vscode") or {}
    assert "ms-toolsai.jupyter" in (vscode.get("extensions") or []), f"{where}: no Jupyter extension for VS Code"
    python = [v for _, k, v in dockerfile_env(LAB_DOCKERFILE) if k == "PYSPARK_PYTHON"]
    assert python, f"{rel(LAB_DOCKERFILE)}: no ENV PYSPARK_PYTHON"
    interpreter = (vscode.get("settings") or {}).get("python.defaultInterpreterPath")
    assert interpreter == python[-1], (
        f"{where}: python.defaultInterpreterPath {interpreter!r}, but the image's lab Python is {python[-1]!r}")


# -- (g) the offline bundle: `make bundle` downloads what `make venv` installs -------------------
MAKEFILE = ROOT / "Makefile"
VENV_MK = ROOT / "venv.mk"
GITIGNORE = ROOT / ".gitignore"
BOOTSTRAP = ("pip", "setuptools", "wheel")


def make_text() -> str:
    """The Makefile with the files it includes, and ``$(PIP_PINS)`` written out, as make reads them."""
    text = MAKEFILE.read_text()
    assert re.search(r"^include venv\.mk$", text, re.M), f"{rel(MAKEFILE)}: does not include venv.mk"
    text += "\n" + VENV_MK.read_text()
    m = re.search(r"^PIP_PINS\s*:?=\s*(.+)$", text, re.M)
    assert m, f"{rel(VENV_MK)}: no PIP_PINS"
    return text.replace("$(PIP_PINS)", m.group(1).strip())


def make_recipes(text: str) -> dict[str, list[str]]:
    """``{target: recipe lines}`` of a Makefile: continuation lines joined, blanks squeezed, variables as written."""
    recipes, target, cur = {}, None, ""
    for line in text.splitlines():
        if cur or line.startswith("\t"):
            cur += line.lstrip("\t")
            if cur.endswith("\\"):
                cur = cur[:-1] + " "
                continue
            if target is not None and cur.strip():
                recipes[target].append(re.sub(r"\s+", " ", cur.strip()))
            cur = ""
            continue
        m = re.match(r"([^\s:#=][^:#=]*?)\s*::?(?!=)", line)
        target = m.group(1).strip() if m else None
        if target is not None:
            recipes.setdefault(target, [])
    return recipes


def quoted_pins(line: str) -> dict[str, str]:
    """``{canonical name: version}`` of the quoted ``"name==version"`` requirements on a recipe line."""
    pin = r"[\"'](?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\"'\s]+)[\"']"
    return {canonical(m["name"]): m["version"] for m in re.finditer(pin, line)}


def bootstrap_pins(recipe: list[str], verb: str, where: str) -> tuple[str, dict[str, str]]:
    """The recipe line running ``pip <verb>`` with pip/setuptools/wheel pins, and those pins."""
    lines = [l for l in recipe if re.search(rf"-m pip {verb}\b", l) and set(BOOTSTRAP) & set(quoted_pins(l))]
    assert len(lines) == 1, (
        f"{rel(MAKEFILE)} {where}: expected one `pip {verb}` line pinning {BOOTSTRAP}, found {lines}")
    return lines[0], quoted_pins(lines[0])


def bootstrap_differences(venv: dict[str, str], bundle: dict[str, str]) -> list[str]:
    out = []
    for name in BOOTSTRAP:
        if name not in venv:
            out.append(f"{rel(MAKEFILE)} venv: does not pin {name}")
        elif bundle.get(name) != venv[name]:
            out.append(f"{rel(MAKEFILE)} bundle: downloads {name}=={bundle.get(name)}, venv installs "
                       f"{name}=={venv[name]}")
    return out


def test_the_bundle_downloads_what_the_venv_installs():
    recipes = make_recipes(make_text())
    assert "bundle" in recipes and "offline" in recipes, f"{rel(MAKEFILE)}: no bundle or offline target"
    _, venv = bootstrap_pins(recipes["$(STAMP)"], "install", "venv ($(STAMP))")
    download, bundle = bootstrap_pins(recipes["bundle"], "download", "bundle")
    problems = bootstrap_differences(venv, bundle)
    install = [l for l in recipes["$(STAMP)"] if "-e " in l and "pip install" in l]
    assert install and "-c constraints.txt" in install[0], (
        f"{rel(MAKEFILE)} venv: no `pip install -c constraints.txt -e`")
    for flag in ("-r constraints.txt", "-c constraints.txt", "--dest"):
        if flag not in download:
            problems.append(f"{rel(MAKEFILE)} bundle: `pip download` lacks {flag!r}: not every pin would be in wheels/")
    fetch = [l for l in recipes["bundle"] if "lab fetch" in l]
    if not fetch or "LAB_CACHE_DIR=" not in fetch[0]:
        problems.append(f"{rel(MAKEFILE)} bundle: no `LAB_CACHE_DIR=... lab fetch` into the bundle's cache/")
    offline = " ".join(recipes["offline"])
    for needed in ("PIP_NO_INDEX=1", "PIP_FIND_LINKS=", "venv", "lab fetch", "lab doctor"):
        if needed not in offline:
            problems.append(f"{rel(MAKEFILE)} offline: lacks {needed!r}")
    assert not problems, "\n".join(problems)


def test_the_bundles_fetch_flag_exists():
    from lab.cli import _parser

    fetch = [l for l in make_recipes(make_text())["bundle"] if "lab fetch" in l]
    flags = fetch[0].split("lab fetch", 1)[1].split() if fetch else []
    args = _parser().parse_args(["fetch", *flags])  # an unknown flag exits 2
    assert args.no_class_archive, f"{rel(MAKEFILE)} bundle: `lab fetch {' '.join(flags)}` builds the class archive"


def test_a_bootstrap_pin_difference_is_caught():
    venv = {"pip": "26.3", "setuptools": "84.2.1", "wheel": "0.48.0"}
    assert not bootstrap_differences(venv, dict(venv))
    assert bootstrap_differences(venv, {**venv, "setuptools": "84.2.0"})
    assert bootstrap_differences(venv, {"pip": "26.3", "wheel": "0.48.0"})
    recipes = make_recipes("x: y\n\t$(BIN)/python -m pip download \\\n\t  \"pip==1\" -r c.txt\nz:\n\techo\n")
    assert recipes == {"x": ['$(BIN)/python -m pip download "pip==1" -r c.txt'], "z": ["echo"]}


def test_the_bundle_directory_is_ignored():
    lines = {l.strip() for l in GITIGNORE.read_text().splitlines()}
    assert lines & {"bundle/", "/bundle/"}, (
        f"{rel(GITIGNORE)}: no `bundle/` line: `make bundle`'s hundreds of MB would show as untracked")


# -- (h) packages installed only to be removed: the same in the venv and the image ----------------
def unused_packages() -> set[str]:
    """The Makefile's ``UNUSED``: what the venv target uninstalls after installing the lab."""
    m = re.search(r"^UNUSED\s*:?=\s*(.+)$", make_text(), re.M)
    assert m, f"{rel(VENV_MK)}: no UNUSED variable"
    return {canonical(n) for n in m.group(1).split()}


def uninstalled_by(line: str) -> set[str]:
    """The packages a ``pip uninstall`` command line removes (options dropped)."""
    words = re.split(r"[;&|]", line.split("pip uninstall", 1)[1])[0].split()
    return {canonical(w) for w in words if not w.startswith(("-", "$", "\\"))}


def test_the_venv_and_the_image_remove_the_same_unused_packages():
    unused = unused_packages()
    assert canonical("rfc3987-syntax") in unused
    recipe = make_recipes(make_text())["$(STAMP)"]
    removes = [i for i, l in enumerate(recipe) if "pip uninstall" in l and "$(UNUSED)" in l]
    installs = [i for i, l in enumerate(recipe) if "pip install" in l and "-e " in l]
    assert removes, f"{rel(MAKEFILE)} venv: does not uninstall $(UNUSED)"
    assert installs and removes[-1] > installs[-1], (
        f"{rel(MAKEFILE)} venv: uninstalls $(UNUSED) before installing the lab")
    image = [l for l in dockerfile_lines(LAB_DOCKERFILE) if "pip uninstall" in l]
    assert image and uninstalled_by(image[-1]) == unused, (
        f"{rel(LAB_DOCKERFILE)} removes {sorted(uninstalled_by(image[-1])) if image else []}, "
        f"the Makefile's UNUSED {sorted(unused)}")


def test_nbformat_imports_without_a_grammar_build_in_this_environment():
    # what the removal buys, checked where it counts: a fresh interpreter of this environment
    code = ("import sys, nbformat; print(sorted(m for m in sys.modules if m.split('.')[0] in ('rfc3987_syntax', "
            "'lark')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"importing nbformat loaded {out}: run `make venv` (it removes {sorted(unused_packages())})"


# -- (i) the pre-commit hooks: the same ruff as `make lint`, notebooks stripped --------------------------------------
def test_the_pre_commit_hooks_pin_the_linter_make_lint_runs():
    import yaml

    hooks = {h["id"]: h for r in yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"]
             for h in r["hooks"]}
    assert {"ruff", "nbstripout"} <= set(hooks), f".pre-commit-config.yaml: hooks {sorted(hooks)}"
    pinned = re.search(r'"ruff==([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert hooks["ruff"]["additional_dependencies"] == [f"ruff=={pinned}"], (
        f".pre-commit-config.yaml: ruff {hooks['ruff']['additional_dependencies']}, pyproject.toml's [test] {pinned}")
    assert all(d.count("==") == 1 for h in hooks.values() for d in h.get("additional_dependencies", []))
    # the hook and `make lint` look at the same directories
    lint = make_recipes(make_text())["lint"][0].split()
    assert set(lint[lint.index("check") + 2:]) == {"lab", "tests", "bench", "docs/tools", "notebooks"}, lint
    assert hooks["ruff"]["files"] == "^(lab|tests|bench|docs/tools|notebooks)/"
