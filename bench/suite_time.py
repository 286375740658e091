"""Where the test suite's time goes: test-seconds per kind of test (unit, integration, notebooks, browser) and per file.

``make test`` runs in two processes (``TEST_WORKERS``), both busy to the end, so
its wall time is about its test-seconds over two; this says which tests those
seconds belong to, from pytest's own JUnit XML (each test's setup, call and
teardown; a module-scoped fixture's runs count in the test that first asks for it).
:mod:`bench.suite_cpu` says which processes burn the CPU meanwhile.

Run with ``python bench/suite_time.py [--out FILE] [--junit XML] [-- COMMAND ...]``:
runs ``make test`` (its ``TEST_ARGS`` gets ``--junitxml``) or a pytest ``COMMAND``
(``--junitxml`` added to it), or reads an XML a run already wrote
(``--junit``, with ``--commit`` the commit that run was of), and writes the
split to ``FILE`` (default ``bench/results/suite_time.json``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` importable from the checkout
from bench.machine import core_seconds, machine  # noqa: E402

#: The test directories, the kinds of the split (tests/<kind>/...); anything else counts as "other".
KINDS = ("unit", "integration", "notebooks", "browser")


def read_junit(path: Path) -> tuple[list[tuple[str, str, float]], float | None, str | None]:
    """Every test case of a JUnit XML as ``(classname, name, seconds)``, the run's wall seconds and start (None if absent)."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    wall = sum(float(s.get("time", 0)) for s in suites) if suites else None
    started = suites[0].get("timestamp") if suites else None
    cases = [(c.get("classname", ""), c.get("name", ""), float(c.get("time", 0) or 0)) for c in root.iter("testcase")]
    return cases, wall, started


def split(cases: list[tuple[str, str, float]], top: int = 20) -> dict:
    """Test-seconds per kind and per file, and the ``top`` slowest tests.

    ``cases``: ``(classname, name, seconds)`` as JUnit has them
    (``tests.notebooks.test_solutions``, ``test_solution_holds[06_stateful_streaming]``).
    Shares are of the total test-seconds; files are sorted slowest first.
    """
    total = sum(s for _, _, s in cases)
    kinds: dict[str, list] = defaultdict(lambda: [0.0, 0])
    files: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for classname, _, seconds in cases:
        parts = classname.split(".")
        kind = parts[1] if len(parts) > 2 and parts[0] == "tests" and parts[1] in KINDS else "other"
        path = "/".join(parts[:3]) + ".py" if len(parts) >= 3 else classname
        for table, key in ((kinds, kind), (files, path)):
            table[key][0] += seconds
            table[key][1] += 1

    def rows(table):
        return {k: {"test_s": round(s, 1), "share": round(s / total, 3) if total else 0.0, "tests": n}
                for k, (s, n) in sorted(table.items(), key=lambda kv: -kv[1][0])}

    slowest = sorted(cases, key=lambda c: -c[2])[:top]
    return {
        "tests": len(cases),
        "test_s": round(total, 1),
        "kinds": rows(kinds),
        "files": rows(files),
        "slowest": [{"test": f"{c.replace('.', '/')}.py::{n}", "s": round(s, 1)} for c, n, s in slowest],
    }


def _commit(rev: str) -> str | None:
    """``rev`` as a full commit id of the checkout (None outside a git checkout or for an unknown revision)."""
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=ROOT,
                         capture_output=True, text=True)
    return out.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "suite_time.json")
    ap.add_argument("--junit", type=Path, help="read this JUnit XML instead of running the suite")
    ap.add_argument("--commit", default="HEAD", help="with --junit: the commit its run was of (default: the checkout's)")
    ap.add_argument("command", nargs="*", help="a pytest command to run (after --); default: make test")
    args = ap.parse_args(argv)
    info: dict = {"machine": machine(), "commit": _commit(args.commit if args.junit is not None else "HEAD")}
    if args.junit is not None:
        if not args.junit.is_file():
            ap.error(f"--junit {args.junit}: no such file")
        command, exit_code = None, None
        info["machine"].pop("load_average", None)  # today's, not the run's
        cases, wall, started = read_junit(args.junit)
    else:
        info["machine"]["core_seconds_before"] = core_seconds()
        command = args.command or ["make", "test"]
        with tempfile.TemporaryDirectory(prefix="suite-time-") as tmp:
            xml = Path(tmp) / "junit.xml"
            junit = f"TEST_ARGS=--junitxml={xml}" if not args.command else f"--junitxml={xml}"
            t0 = time.monotonic()
            exit_code = subprocess.call([*command, junit], cwd=ROOT)
            info["command_wall_s"] = round(time.monotonic() - t0, 1)
            if not xml.is_file():
                print(f"suite_time: the command wrote no JUnit XML (exit {exit_code}): {' '.join(command)}",
                      file=sys.stderr)
                return exit_code or 1
            cases, wall, started = read_junit(xml)
    result = {"measured_at": started or time.strftime("%Y-%m-%dT%H:%M:%S"), **info,
              "command": command, "junit": None if command else args.junit.name, "exit": exit_code,
              "wall_s": round(wall, 1) if wall is not None else None, **split(cases)}
    if wall:
        result["test_s_per_wall_s"] = round(result["test_s"] / wall, 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for kind, row in result["kinds"].items():
        print(f"{kind:12s} {row['test_s']:8.1f} test-s  {row['share']:6.1%}  {row['tests']:4d} tests")
    print(f"{'all':12s} {result['test_s']:8.1f} test-s in {result['wall_s']} s; written to {args.out}")
    return exit_code or 0


if __name__ == "__main__":
    sys.exit(main())
