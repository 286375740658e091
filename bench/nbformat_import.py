"""What the venv's removal of rfc3987-syntax (and lark) buys every process that imports nbformat.

jsonschema imports rfc3987-syntax when it is installed (it comes with
jupyter-events' ``jsonschema[format-nongpl]``), and that package builds a Lark
grammar at import. nbformat imports jsonschema, and papermill, each kernel's
plotly set-up (``lab.notebook.setup``), Jupyter and nbconvert import nbformat.
The Makefile's venv target uninstalls both (``UNUSED``). Three figures, each a
before/after pair measured in turns in one call (before, after, before ...):

* ``papermill_import``: ``python -c "import papermill.cli"``, what every
  ``lab matrix`` row and notebook test pays before its kernel starts;
* ``setup_cell``: ``from lab import notebook as nb; nb.setup()`` in a new
  interpreter, the notebooks' setup cell without the kernel around it;
* ``matrix_row``: one whole ``lab matrix`` row (papermill, its kernel, a
  1,000-event run of the plain pipeline on a broker of its own, the HTML).

"Before" puts the pinned rfc3987-syntax and lark (``constraints.txt``) back
with ``PYTHONPATH`` (installed once into a temporary directory with pip, from
the package index or ``PIP_FIND_LINKS``); "after" is the venv as ``make venv``
leaves it.

Run with ``python bench/nbformat_import.py [--rounds N] [--row-rounds M] [--out FILE]``;
prints one JSON object and writes it to ``FILE`` (default
``bench/results/nbformat_import.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout

from bench.testbed import summary  # noqa: E402

PACKAGES = ("rfc3987-syntax", "lark")
PAPERMILL = [sys.executable, "-c", "import papermill.cli"]
SETUP = [sys.executable, "-c", "from lab import notebook as nb; nb.setup()"]


def pinned(names: tuple[str, ...]) -> list[str]:
    """``name==version`` of each of ``names`` as ``constraints.txt`` pins it."""
    text = (ROOT / "constraints.txt").read_text()
    out = []
    for name in names:
        m = re.search(rf"^{re.escape(name)}==(\S+)$", text, re.M)
        if not m:
            raise SystemExit(f"constraints.txt does not pin {name}")
        out.append(f"{name}=={m.group(1)}")
    return out


def install_before(target: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    *pinned(PACKAGES)], check=True)


def env_for(mode: str, before_path: Path) -> dict:
    env = dict(os.environ)
    if mode == "before":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(before_path), env.get("PYTHONPATH")]))
    return env


def timed(cmd: list[str], env: dict) -> float:
    t = time.monotonic()
    subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True, timeout=300)
    return time.monotonic() - t


def matrix_row_s(env: dict, work: Path, n: int) -> float:
    grid = work / f"grid-{n}.json"
    grid.write_text(json.dumps({"scenarios": [{
        "name": f"plain, no fault ({n})", "expect": "exactly-once",
        "params": {"pipeline": "plain", "sink": "idempotent", "events": 1000, "rate": 0}}]}))
    out = work / f"matrix-{n}"
    env = {**env, "LAB_RUNS_DIR": str(work / f"runs-{n}")}
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "lab", "matrix", "--grid", str(grid), "--out", str(out)], env=env,
                   cwd=ROOT, check=True, capture_output=True, timeout=600)
    seconds = time.monotonic() - t
    table = (out / "matrix.csv").read_text()
    if "as expected" not in table:
        raise RuntimeError(f"the bench's matrix row did not hold: {table}")
    return seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7, help="pairs of the two import figures (default 7)")
    ap.add_argument("--row-rounds", type=int, default=3, help="pairs of matrix rows (default 3)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "nbformat_import.json"))
    args = ap.parse_args(argv)
    figures = {k: {"before": [], "after": []} for k in ("papermill_import", "setup_cell", "matrix_row")}
    with tempfile.TemporaryDirectory(prefix="bench-nbformat-") as tmp:
        work = Path(tmp)
        install_before(work / "before")
        envs = {mode: env_for(mode, work / "before") for mode in ("before", "after")}
        for _ in range(args.rounds):
            for mode in ("before", "after"):
                figures["papermill_import"][mode].append(timed(PAPERMILL, envs[mode]))
                figures["setup_cell"][mode].append(timed(SETUP, envs[mode]))
        rows = 0
        for _ in range(args.row_rounds):
            for mode in ("before", "after"):
                rows += 1  # each row in a results directory of its own: none is skipped as already done
                figures["matrix_row"][mode].append(matrix_row_s(envs[mode], work, rows))
    result = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpus": os.cpu_count(), "python": platform.python_version(),
        "load_average_at_end": os.getloadavg(), "removed": pinned(PACKAGES),
        **{name: {mode: summary(xs) for mode, xs in pair.items()} | {"saved_s": round(
            summary(pair["before"])["median"] - summary(pair["after"])["median"], 3)}
           for name, pair in figures.items()},
    }
    text = json.dumps(result, indent=1)
    print(text)
    Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
