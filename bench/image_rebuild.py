"""What a one-line change in ``lab/`` costs a rebuild of the lab's image: an earlier commit's Dockerfile vs the
checkout's.

``docker/jupyter.Dockerfile`` up to commit 0d825f6 copied ``lab/`` before it installed the pinned packages and
fetched the jars, so a change in ``lab/`` ran all of it again; the checkout's installs the packages, fetches the
jars and makes the Flink environment from files that seldom change, then copies ``lab/``. For each Dockerfile
("before": ``git show REV:docker/jupyter.Dockerfile`` and its ``.dockerignore``, ``--before REV``, default HEAD;
"after": the checkout's), built by podman as ``make test-stack`` builds it (``tests/stack/images.py``):

* ``full_build_s``: a build with ``--no-cache`` (from the base image, which is not rebuilt): the first build;
* ``rebuild_s``: the same context with one comment line appended to ``lab/cli.py``, built again with podman's
  layer cache, and which of its steps came from the cache.

Both build the same context: ``pyproject.toml``, ``constraints.txt``, ``README.md`` and ``lab/`` of the commit
HEAD names when the bench starts (``git archive``, once), so the lab's code is that commit's whatever the checkout
holds or commits meanwhile. The build arguments are the stack's (``LAB_PYTHON`` is the CPython the Spark stand-in
packs). The base image is the stack's Spark stand-in (run ``make test-stack``, or ``tests/stack/images.py --only
spark``, once before) with one label more, an image of its own: podman looks a step up in its cache among the
children of the image the step starts from and takes the first whose step matches, so a rebuild could follow the
layers of another build (the stack's) where they match and miss its own further on; on this base only the bench's
own layers are found. Each variant's images are removed before the next is built, and the base at the end. Root
and podman; downloads from PyPI and Maven Central (about 1.5 GB a full build).

Run with ``.venv/bin/python bench/image_rebuild.py [--before REV] [--out FILE] [--keep-logs DIR]``; prints one
JSON object and writes it to ``FILE`` (default ``bench/results/image_rebuild.json``).
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench`, `lab` and `tests` importable from the checkout

from bench.machine import machine  # noqa: E402
from bench.testbed import emit  # noqa: E402
from tests.stack import images  # noqa: E402

CONTEXT = ["pyproject.toml", "constraints.txt", "README.md", "lab"]
TAG = "localhost/lab-image-rebuild-bench"
BASE = f"{TAG}:base"


def git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True).stdout


def context(dest: Path, snapshot: Path, dockerfile: bytes, ignore: bytes) -> Path:
    """A copy of ``snapshot`` (the commit's build context) in ``dest``, with ``dockerfile`` and its
    ``.dockerignore``."""
    shutil.copytree(snapshot, dest)
    df = dest / images.LAB_DOCKERFILE
    df.parent.mkdir(parents=True, exist_ok=True)
    df.write_bytes(re.sub(rb"^FROM\s+\S+", f"FROM {BASE}".encode(), dockerfile, count=1, flags=re.M))
    df.with_name(df.name + ".dockerignore").write_bytes(ignore)
    return dest


def measure(name: str, work: Path, dockerfile: bytes, ignore: bytes, logs: Path | None) -> dict:
    """A full build, then a rebuild after a one-line change in lab/; the images removed."""
    ctx = context(work / name, work / "snapshot", dockerfile, ignore)
    tag = f"{TAG}:{name}"
    images.say(f"{name}: full build (--no-cache)")
    full = images.podman_build(ctx, tag, no_cache=True, log=logs / f"{name}_full.log" if logs else None)
    out = {"full_build_s": full.seconds, "full_build_exit": full.returncode, "steps": full.steps}
    if full.returncode == 0:
        images.append_probe_line(ctx)
        images.say(f"{name}: full build {full.seconds:.0f} s; rebuild after a one-line change in {images.PROBE_FILE}")
        rb = images.podman_build(ctx, tag, log=logs / f"{name}_rebuild.log" if logs else None)
        images.say(f"{name}: rebuild {rb.seconds:.0f} s ({rb.reuse()})")
        out.update({"rebuild_s": rb.seconds, "rebuild_exit": rb.returncode, "rebuild_steps_from_cache": rb.cached,
                    "rebuild_first_step_run": rb.first_run[:120] if rb.first_run else None,
                    "image_size_mb": image_size_mb(rb.image)})
        images.remove_images(rb.image)
        if rb.returncode:
            out["tail"] = rb.tail
    else:
        out["tail"] = full.tail
    images.remove_images(full.image)
    return out


def base_image() -> str | None:
    """:data:`BASE`: the Spark stand-in with one label more, a new image (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="lab-image-rebuild-base-") as tmp:
        (Path(tmp) / "Dockerfile").write_text(f"FROM {images.SPARK_TAG}\nLABEL bench=image_rebuild\n")
        b = images.podman_build(Path(tmp), BASE, dockerfile="Dockerfile", build_args={}, no_cache=True)
    if b.returncode:
        raise SystemExit("the bench's base image could not be built:\n" + "\n".join(b.tail))
    return b.image


def image_size_mb(image: str | None) -> float | None:
    if not image:
        return None
    done = subprocess.run(["podman", "image", "inspect", "--format", "{{.Size}}", image], capture_output=True,
                          text=True)
    return round(int(done.stdout.strip()) / 1e6) if done.returncode == 0 else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="HEAD", help="the commit whose Dockerfile is the before (default HEAD)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/image_rebuild.json")
    ap.add_argument("--keep-logs", type=Path, help="write each podman build's output into this directory")
    a = ap.parse_args()
    if not images.image_id(images.SPARK_TAG):
        raise SystemExit(f"no {images.SPARK_TAG}: build the stand-in first (tests/stack/images.py --only spark)")
    if a.keep_logs:
        a.keep_logs.mkdir(parents=True, exist_ok=True)
    df = images.LAB_DOCKERFILE
    commit = git("rev-parse", "HEAD").decode().strip()
    variants = {"before": (git("show", f"{a.before}:{df}"), git("show", f"{a.before}:{df}.dockerignore")),
                "after": ((ROOT / df).read_bytes(), (ROOT / f"{df}.dockerignore").read_bytes())}
    result = {"command": " ".join([".venv/bin/python", "bench/image_rebuild.py", *sys.argv[1:]]), "exit_status": None,
              "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "commit": git("rev-parse", "--short", commit).decode().strip(),
              "before_dockerfile": git("rev-parse", "--short", a.before).decode().strip(),
              "machine": machine(), "context": f"{' '.join(CONTEXT)} of the commit", "probe_file": images.PROBE_FILE,
              "build_args": images.lab_build_args()}
    with tempfile.TemporaryDirectory(prefix="lab-image-rebuild-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(git("archive", commit, *CONTEXT))) as t:
            t.extractall(Path(tmp) / "snapshot", filter="tar")
        base = base_image()
        try:
            for name, (dockerfile, ignore) in variants.items():
                result[name] = measure(name, Path(tmp), dockerfile, ignore, a.keep_logs)
        finally:
            images.remove_images(base)
    ok = all(result[n].get("full_build_exit") == 0 and result[n].get("rebuild_exit") == 0 for n in variants)
    result["exit_status"] = 0 if ok else 1
    if ok:
        result["rebuild_saved_s"] = round(result["before"]["rebuild_s"] - result["after"]["rebuild_s"], 1)
    result["machine"]["load_average_at_end"] = machine()["load_average"]
    emit(result, a.out)
    return result["exit_status"]


if __name__ == "__main__":
    sys.exit(main())
