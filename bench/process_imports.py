"""What a run's Python processes import before they work: an earlier commit and the checkout, in turns.

Every ``lab run`` starts three kinds of Python process whose imports come before
their work: the command itself (``lab run``: the CLI, its configuration and the
supervisor, all imported before the first driver starts), each driver (the
driver module and what the structured pipeline imports before its JVM), and
each Python worker daemon (the modules it imports before it forks workers,
``lab.spark.session.SQL_WORKER_IMPORTS``). A run of the 3,000-event crash scenario has
one command, two drivers and two daemons.

Each figure is the time one fresh interpreter takes to import those modules,
measured inside it (``time.perf_counter`` around the imports), in the tree's
own venv; the earlier commit and the checkout in turns, ``--rounds`` times,
medians. The earlier commit's worktree and venv are ``bench/code_pair.py``'s
(made once under ``--trees``).

Run with ``python bench/process_imports.py --baseline COMMIT [--rounds N]``;
writes ``bench/results/process_imports.json``.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` importable
from bench.code_pair import baseline_commit, baseline_tree, checkout_info  # noqa: E402
from bench.machine import machine  # noqa: E402
from bench.testbed import emit, summary  # noqa: E402


def driver_imports(tree: Path) -> str:
    """What a structured driver of ``tree`` imports before its JVM, as code: read from its source, so it cannot drift.

    ``lab.pipelines.driver`` runs the pipeline through the registry; the structured module's
    own imports come with it, and ``run`` imports the rest at its top, before it
    starts the session. Those import statements are taken from ``run`` as written.

    Raises
    ------
    RuntimeError
        When the tree's module has no top-level ``run`` (named with the file).
    """
    path = tree / "lab" / "pipelines" / "structured" / "pipeline.py"
    module = "lab.pipelines.structured.pipeline"
    if not path.exists():  # a tree from before the structured pipeline became a folder
        path, module = tree / "lab" / "pipelines" / "structured.py", "lab.pipelines.structured"
    run = next((n for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == "run"),
               None)
    if run is None:
        raise RuntimeError(f"{path}: no function run() at the top of the module, so no driver imports to time")
    inside = [ast.unparse(n) for n in run.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join([f"import lab.pipelines.driver, lab.registry, {module}", *inside])


#: What each process imports before its work, as code for a tree (each side of a pair times its own).
PROCESSES = {
    "lab run (until its first driver starts)": lambda tree: "import lab.cli, lab.config, lab.run.supervisor",
    "driver (structured, before its JVM)": driver_imports,
    "Python worker daemon (before its first fork)": lambda tree: (
        "import importlib, lab.spark.session\n"
        "for name in lab.spark.session.SQL_WORKER_IMPORTS: importlib.import_module(name)"),
}


def seconds(python: Path, cwd: Path, code: str) -> float:
    """Seconds a fresh ``python`` takes for ``code``'s imports, measured inside it.

    Raises
    ------
    RuntimeError
        When the interpreter fails (its last line of standard error).
    """
    script = f"import time\nt0 = time.perf_counter()\n{code}\nprint(time.perf_counter() - t0)"
    p = subprocess.run([str(python), "-c", script], cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{python} in {cwd}: {(p.stderr.strip().splitlines() or ['no output'])[-1]}")
    return float(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="the earlier commit (any git revision)")
    ap.add_argument("--rounds", type=int, default=15, help="interpreters per process and side, in turns (default 15)")
    ap.add_argument("--trees", default=str(Path(tempfile.gettempdir()) / "lab-code-pair"),
                    help="where bench/code_pair.py keeps the earlier commits' worktrees and venvs")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        ap.error(f"--rounds {a.rounds}: must be 1 or more")
    base = baseline_commit(ap, a.baseline)
    sides = {"baseline": baseline_tree(base["commit"], Path(a.trees)), "current": ROOT}
    times: dict = {name: {side: [] for side in sides} for name in PROCESSES}
    for _ in range(a.rounds):
        for name in PROCESSES:
            for side, tree in sides.items():
                times[name][side].append(seconds(tree / ".venv" / "bin" / "python", tree, PROCESSES[name](tree)))
    figures = {}
    for name, by_side in times.items():
        b, c = summary(by_side["baseline"]), summary(by_side["current"])
        figures[name] = {"baseline_s": b, "current_s": c, "saved_s": round(b["median"] - c["median"], 3)}
    emit({"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine(), "baseline": base,
          "current": checkout_info(),
          "rounds": a.rounds, "processes": figures}, ROOT / "bench" / "results" / "process_imports.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
