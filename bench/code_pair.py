"""The machine or the code? One command timed at an earlier commit and at the checkout, in turns, in one hour.

This machine's speed changes from day to day and hour to hour: on 2026-11-25 the default
matrix took 230 s with commit 5027e11; on 2026-11-27 the same commit took 451.5 and 454.9 s
on the same machine. A figure measured on another day cannot tell a slower lab from a slower
machine; the same command run with both commits, in turns, can.

The earlier commit gets a git worktree and its own ``.venv`` (its own ``make venv``, so its
own pins), under ``--trees`` (default ``/tmp/lab-code-pair``), made once and reused; ``--clean``
removes them (not the logs). Each round runs the command in the earlier tree, then in the
checkout, each with its tree as the working directory and its own venv first on ``PATH``.
In the command, ``{python}`` is the tree's venv Python and ``{out}`` a fresh directory for
that run (removed after it). Each run's whole output goes to ``<trees>/logs/NAME-SIDE-ROUND.log``.
Recorded per run: wall time, the machine's CPU seconds (``/proc/stat``), the exit status, the
last line of output (of standard error when standard output has none), and the speed of one
core just before it (``bench/machine.py``). ``--keep REGEX`` records the last line matching it
instead (``--keep guarantee`` for ``lab run``: what the run delivered, to compare too).
``--timeline`` runs the command with ``LAB_RUNS_DIR={out}/runs`` and records, from its runs' timelines,
when the first driver process started, when the first batch was done (seconds after the command
started) and how long the command took after its last run's ``drained`` and ``run-end`` (:func:`milestones`), for
a change whose effect is smaller than the wall time's spread. A new tree's first Spark run builds its
class archive (the jars' paths are in its key, :mod:`lab.spark.archive`): about 35 s more, once, which
the medians of several rounds leave out.

Run with ``python bench/code_pair.py --baseline COMMIT --name NAME [--rounds N] -- COMMAND ...``;
writes ``bench/results/code_pair_NAME.json``. For the default matrix::

    python bench/code_pair.py --baseline 5027e11 --name matrix --rounds 2 --keep 'runs, [0-9]+ not as expected' \
        -- {python} bench/matrix.py --out {out}

Each tree's own bench writes its own results file; the figures compared are this bench's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` importable from the checkout
from bench.machine import core_seconds, machine  # noqa: E402
from bench.run_cpu import machine_busy_s  # noqa: E402
from bench.testbed import emit, summary  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def fill(command: list[str], python: str, out: str) -> list[str]:
    """``command`` with ``{python}`` and ``{out}`` replaced in each word (pure)."""
    return [w.replace("{python}", python).replace("{out}", out) for w in command]


def last_line(text: str, pattern: str | None = None) -> str:
    """The last non-empty line of ``text`` (that matches ``pattern``, a regular expression, when given),
    at most 200 characters, carriage-return progress bars cut (pure)."""
    lines = [l.rsplit("\r", 1)[-1].strip() for l in text.splitlines()]
    lines = [l for l in lines if l and (pattern is None or re.search(pattern, l))]
    return lines[-1][:200] if lines else ""


#: The timeline milestones ``--timeline`` records (:func:`milestones`).
MILESTONES = ("first_driver_s", "first_batch_done_s", "drained_to_exit_s", "end_to_exit_s")


def milestones(timelines: list[list[dict]], launched: float, ended: float) -> dict:
    """When the first driver process started and the first batch was done, seconds after ``launched``,
    and the seconds from the last ``drained`` and from the last ``run-end`` to ``ended`` (pure; ``None``
    where no run has one).

    ``timelines``: the ``events.jsonl`` of each run the command made (``t``: epoch seconds).
    """
    events = [e for timeline in timelines for e in timeline]

    def times(*types):
        return [e["t"] for e in events if e.get("type") in types]

    def first(*types):
        ts = times(*types)
        return round(min(ts) - launched, 3) if ts else None

    def to_exit(kind):
        ts = times(kind)
        return round(ended - max(ts), 3) if ts else None

    return {"first_driver_s": first("standby-start", "driver-start"), "first_batch_done_s": first("batch-done"),
            "drained_to_exit_s": to_exit("drained"), "end_to_exit_s": to_exit("run-end")}


def read_timelines(runs_dir: Path) -> list[list[dict]]:
    """The timeline of each run directory under ``runs_dir`` (:func:`lab.events.read_events`; none when it is
    missing)."""
    from lab.events import read_events

    return [read_events(path.parent) for path in sorted(runs_dir.glob("*/events.jsonl"))]


def summarise(runs: list[dict]) -> dict:
    """Per side, the spread of wall and CPU seconds of the runs that exited 0; and baseline over current (pure).

    ``wall_ratio`` above 1: the checkout is faster than the baseline on the same machine.
    """
    out = {}
    for side in ("baseline", "current"):
        ok = [r for r in runs if r["side"] == side and r["exit"] == 0]
        out[side] = {"runs": len(ok), "failed": sum(1 for r in runs if r["side"] == side and r["exit"] != 0),
                     "wall_s": summary([r["wall_s"] for r in ok]),
                     "machine_cpu_s": summary([r["machine_cpu_s"] for r in ok]),
                     "core_seconds_before": summary([r["core_seconds_before"] for r in ok])}
        for name in MILESTONES:
            values = [r[name] for r in ok if r.get(name) is not None]
            if values:
                out[side][name] = summary(values)
    b, c = out["baseline"]["wall_s"], out["current"]["wall_s"]
    out["wall_ratio"] = round(b["median"] / c["median"], 2) if b and c else None
    bc, cc = out["baseline"]["machine_cpu_s"], out["current"]["machine_cpu_s"]
    out["cpu_ratio"] = round(bc["median"] / cc["median"], 2) if bc and cc else None
    return out


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def commit_info(rev: str) -> dict:
    sha, date, subject = git("log", "-1", "--format=%H%n%cI%n%s", rev).split("\n", 2)
    return {"commit": sha, "date": date, "subject": subject[:160]}


def baseline_commit(ap: argparse.ArgumentParser, rev: str) -> dict:
    """:func:`commit_info` of ``--baseline``; a usage error naming it when it is no commit here."""
    try:
        return commit_info(rev)
    except subprocess.CalledProcessError:
        ap.error(f"--baseline {rev}: not a commit of this repository (a hash, a tag, HEAD~3, ...)")


def checkout_info() -> dict:
    """:func:`commit_info` of the checkout's ``HEAD``, and whether tracked files have uncommitted changes."""
    return commit_info("HEAD") | {"uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no"))}


def baseline_tree(commit: str, trees: Path) -> Path:
    """The worktree of ``commit`` with its own venv, made when missing (its ``make venv``: its own pins)."""
    tree = trees / commit[:12]
    if not (tree / ".git").exists():
        trees.mkdir(parents=True, exist_ok=True)
        print(f"code_pair: a worktree of {commit[:12]} in {tree}", flush=True)
        git("worktree", "add", "--detach", str(tree), commit)
    if not (tree / ".venv" / "bin" / "python").exists() or not (tree / ".venv" / ".installed").exists():
        print("code_pair: its venv (make venv, about a minute)", flush=True)
        subprocess.run(["make", "--no-print-directory", "venv"], cwd=tree, check=True)
    return tree


def clean(trees: Path) -> None:
    """Remove the worktrees (and their venvs) under ``trees`` that belong to this repository.

    The runs' logs (``<trees>/logs``) stay: a run's figures in ``bench/results`` name its log, and what a run
    said (a matrix's row that failed, a test that failed) is known only from it.
    """
    for tree in sorted(trees.glob("*")) if trees.is_dir() else []:
        if (tree / ".git").is_file():
            git("worktree", "remove", "--force", str(tree))
            print(f"code_pair: removed {tree}")
    git("worktree", "prune")


def one(side: str, tree: Path, command: list[str], round_no: int, keep: str | None = None,
        log: Path | None = None, timeline: bool = False) -> dict:
    """Run ``command`` in ``tree`` with its venv; the run's figures (its whole output in ``log``, when given;
    with ``timeline``, its runs' :func:`milestones`)."""
    venv_bin = tree / ".venv" / "bin"
    out = tempfile.mkdtemp(prefix=f"code-pair-{side}-")
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
           "VIRTUAL_ENV": str(tree / ".venv")}
    if timeline:
        env["LAB_RUNS_DIR"] = str(Path(out) / "runs")
    argv = fill(command, str(venv_bin / "python"), out)
    core_s = core_seconds()
    marks = {}
    busy0, t0, launched = machine_busy_s(), time.monotonic(), time.time()
    try:
        # SIGINT's default even when this runs as a shell's background job (which ignores it)
        p = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        if timeline:
            marks = milestones(read_timelines(Path(out) / "runs"), launched, time.time())
    finally:
        shutil.rmtree(out, ignore_errors=True)
    wall, busy = time.monotonic() - t0, machine_busy_s() - busy0
    if log is not None:  # what a failed run said, to look at after
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(p.stdout + ("\n--- standard error ---\n" + p.stderr if p.stderr else ""))
    run = {"side": side, "round": round_no, "wall_s": round(wall, 1), "machine_cpu_s": round(busy, 1),
           "core_seconds_before": core_s, "exit": p.returncode,
           "last_line": last_line(p.stdout, keep) or last_line(p.stderr, keep), **marks,
           **({"log": str(log)} if log is not None else {})}
    said = "".join(f", {k} {v}" for k, v in marks.items())
    print(f"code_pair: round {round_no}, {side}: {run['wall_s']} s, {run['machine_cpu_s']} CPU s, exit {p.returncode}, "
          f"core {core_s} s{said}: {run['last_line']}", flush=True)
    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", help="the earlier commit (any git revision)")
    ap.add_argument("--name", help="results file: bench/results/code_pair_NAME.json")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each, in turns (default 2)")
    ap.add_argument("--trees", default=str(Path(tempfile.gettempdir()) / "lab-code-pair"),
                    help="where the earlier commits' worktrees and venvs are kept")
    ap.add_argument("--keep", metavar="REGEX", default=None,
                    help="record the last output line matching REGEX (default: the last line)")
    ap.add_argument("--timeline", action="store_true",
                    help="runs into {out}/runs (LAB_RUNS_DIR); record when the first driver started and the first "
                         "batch was done, and the time from the last drain and from the last run's end to the exit")
    ap.add_argument("--clean", action="store_true", help="remove the kept worktrees and venvs, then exit")
    ap.add_argument("command", nargs="*", help="the command, run in each tree; {python} and {out} are filled in")
    a = ap.parse_args(argv)
    trees = Path(a.trees)
    if a.clean:
        clean(trees)
        return 0
    if not (a.baseline and a.name and a.command):
        ap.error("--baseline, --name and a command after -- are needed (or --clean)")
    if not re.fullmatch(r"[\w.-]+", a.name):
        ap.error(f"--name {a.name!r}: letters, digits, '_', '.' and '-' only (it names "
                 "bench/results/code_pair_NAME.json)")
    if a.rounds < 1:
        ap.error(f"--rounds {a.rounds}: must be 1 or more")
    base = baseline_commit(ap, a.baseline)
    try:
        tree = baseline_tree(base["commit"], trees)
    except subprocess.CalledProcessError as e:
        print(f"code_pair: could not make the tree of {base['commit'][:12]} in {trees} ({e}); "
              f"`python bench/code_pair.py --clean` removes what was made", file=sys.stderr)
        return 2
    runs = []
    logs = trees / "logs"
    for i in range(1, a.rounds + 1):
        runs.append(one("baseline", tree, a.command, i, a.keep, logs / f"{a.name}-baseline-{i}.log", a.timeline))
        runs.append(one("current", ROOT, a.command, i, a.keep, logs / f"{a.name}-current-{i}.log", a.timeline))
    current = checkout_info()
    result = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine(), "command": a.command,
              "baseline": base, "current": current, "rounds": a.rounds, "summary": summarise(runs), "runs": runs}
    emit(result, RESULTS / f"code_pair_{a.name}.json")
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
