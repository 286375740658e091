"""Both test tiers' time: ``make test`` (the quick tier) over ``make test-all`` (everything), each split per kind and
file.

``make test`` runs the unit tests and one short scenario per pipeline family,
``make test-all`` every test; both in two processes (``TEST_WORKERS``), both
busy to the end, so a tier's wall time is about its test-seconds over two. This
says how the two compare (the goal: the quick tier in a third of the full suite's
time at most) and which tests each one's seconds belong to, from pytest's own
JUnit XML (each test's setup, call and teardown; a module-scoped fixture's runs
count in the test that first asks for it). :mod:`bench.suite_cpu` says which
processes burn the CPU meanwhile.

Run with ``python bench/suite_time.py [--out FILE] [--tier TIER ...] [--junit [TIER=]XML ...] [-- COMMAND ...]``:
runs ``make test`` then ``make test-all`` (``--tier``: only the tiers named; each
run's ``TEST_ARGS`` gets a ``--junitxml`` of its own in a temporary directory),
or a pytest ``COMMAND`` (``--junitxml`` added to it; its tier is ``command``),
or reads XMLs runs already wrote (``--junit``, with ``--commit`` the commit those
runs were of): given twice, the first is ``make test``'s and the second
``make test-all``'s; ``test=XML`` or ``test-all=XML`` names the tier. Writes one
JSON to ``FILE`` (default ``bench/results/suite_time.json``): each tier's split
under ``tiers``, and ``quick_over_full``, the quick tier's wall time over the
full suite's, beside its ``goal`` and whether it ``meets_goal``.
"""

from __future__ import annotations

import argparse
import json
import shlex
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
#: The tiers, each the make target that runs it, in the order they run: the quick one first, as a contributor would.
TIERS = {"test": ["make", "test"], "test-all": ["make", "test-all"]}
#: The quick tier's wall time as a share of the full suite's, at most.
GOAL = 1 / 3


def read_junit(path: Path) -> tuple[list[tuple[str, str, float]], float | None, str | None]:
    """Every test case of a JUnit XML as ``(classname, name, seconds)``, the run's wall seconds and start (None if
    absent)."""
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


def tier_record(xml: Path, command: list[str] | None, exit_code: int | None) -> dict:
    """One tier's record from the JUnit XML its run wrote: how it was run, its wall time, its split.

    ``command`` and ``exit_code``: the command that wrote ``xml`` and its exit
    status, None for an XML read as given (its ``junit`` is then the file's name).
    """
    cases, wall, started = read_junit(xml)
    record = {"measured_at": started, "command": command, "junit": None if command else xml.name, "exit": exit_code,
              "wall_s": round(wall, 1) if wall is not None else None, **split(cases)}
    if wall:
        record["test_s_per_wall_s"] = round(record["test_s"] / wall, 2)
    return record


def compare(tiers: dict[str, dict]) -> dict:
    """``quick_over_full``: ``make test``'s wall time over ``make test-all``'s, beside the goal and whether it is met.

    The walls are pytest's own (the JUnit XMLs'), not the make commands': the first
    command may alone pay for a venv, the Flink environment or the jars made anew.
    None where a tier or its wall time is missing.
    """
    quick, full = (tiers.get(name, {}).get("wall_s") for name in TIERS)
    ratio = quick / full if quick is not None and full else None
    return {"quick_over_full": round(ratio, 3) if ratio is not None else None, "goal": GOAL,
            "meets_goal": ratio <= GOAL if ratio is not None else None}


def junit_tiers(values: list[str]) -> dict[str, Path]:
    """``--junit`` values as ``{tier: XML}``: ``TIER=XML`` names its tier, a bare XML takes the next unnamed one.

    Raises
    ------
    ValueError
        For more XMLs than tiers, or two for one tier.
    """
    named: dict[str, Path] = {}
    bare: list[Path] = []
    for value in values:
        tier, sep, path = value.partition("=")
        if sep and tier in TIERS:
            if tier in named:
                raise ValueError(f"two XMLs for tier {tier}")
            named[tier] = Path(path)
        else:
            bare.append(Path(value))
    free = [t for t in TIERS if t not in named]
    if len(bare) > len(free):
        raise ValueError(f"{len(values)} XMLs for the {len(TIERS)} tiers {', '.join(TIERS)}")
    named.update(zip(free, bare))
    return {t: named[t] for t in TIERS if t in named}


def _commit(rev: str) -> str | None:
    """``rev`` as a full commit id of the checkout (None outside a git checkout or for an unknown revision)."""
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=ROOT,
                         capture_output=True, text=True)
    return out.stdout.strip() or None


def _run_tier(name: str, command: list[str], tmp: Path, make: bool) -> tuple[dict | None, int]:
    """Run one tier's command with a JUnit XML of its own; its record (None when it wrote no XML) and exit status."""
    xml = tmp / f"junit-{name}.xml"
    t0 = time.monotonic()
    exit_code = subprocess.call([*command, f"TEST_ARGS=--junitxml={xml}" if make else f"--junitxml={xml}"], cwd=ROOT)
    took = round(time.monotonic() - t0, 1)
    if not xml.is_file():
        print(f"suite_time: {' '.join(command)} wrote no JUnit XML (exit {exit_code})", file=sys.stderr)
        return None, exit_code or 1
    return {**tier_record(xml, command, exit_code), "command_wall_s": took}, exit_code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "suite_time.json")
    ap.add_argument("--tier", action="append", choices=list(TIERS),
                    help="run only this tier (again for another; default: test, then test-all)")
    ap.add_argument("--junit", action="append", metavar="[TIER=]XML",
                    help="read this JUnit XML instead of running a tier: the first test's, the second test-all's")
    ap.add_argument("--commit", default="HEAD",
                    help="with --junit: the commit its runs were of (default: the checkout's)")
    ap.add_argument("command", nargs="*", help="a pytest command to run (after --), as tier `command`")
    args = ap.parse_args(argv)
    if sum(map(bool, (args.junit, args.command, args.tier))) > 1:
        ap.error("--junit, --tier and a COMMAND exclude one another")
    info: dict = {"machine": machine(), "commit": _commit(args.commit if args.junit else "HEAD")}
    tiers: dict[str, dict] = {}
    status = 0
    if args.junit:
        try:
            given = junit_tiers(args.junit)
        except ValueError as e:
            ap.error(f"--junit: {e}")
        for path in given.values():
            if not path.is_file():
                ap.error(f"--junit {path}: no such file")
        info["machine"].pop("load_average", None)  # today's, not the runs'
        tiers = {name: tier_record(path, None, None) for name, path in given.items()}
    else:
        info["machine"]["core_seconds_before"] = core_seconds()
        todo = {"command": args.command} if args.command else {t: TIERS[t] for t in TIERS if t in (args.tier or TIERS)}
        with tempfile.TemporaryDirectory(prefix="suite-time-") as tmp:
            for name, command in todo.items():
                record, exit_code = _run_tier(name, command, Path(tmp), make=not args.command)
                status = status or exit_code
                if record is None:
                    break  # a tier that could not start its tests: the next one's prerequisites are the same
                tiers[name] = record
        info["machine"]["load_average_at_end"] = machine()["load_average"]
    if not tiers:
        return status or 1
    started = sorted(r["measured_at"] for r in tiers.values() if r["measured_at"])
    result = {"measured_at": started[0] if started else time.strftime("%Y-%m-%dT%H:%M:%S"), **info,
              "command": shlex.join([".venv/bin/python", "bench/suite_time.py", *argv]), "exit_status": status,
              "tiers": tiers, **compare(tiers)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for name, tier in tiers.items():
        print(f"{name}:")
        for kind, row in tier["kinds"].items():
            print(f"  {kind:12s} {row['test_s']:8.1f} test-s  {row['share']:6.1%}  {row['tests']:4d} tests")
        print(f"  {'all':12s} {tier['test_s']:8.1f} test-s in {tier['wall_s']} s")
    if result["quick_over_full"] is not None:
        print(f"make test / make test-all: {result['quick_over_full']:.3f} of the wall time "
              f"(goal {GOAL:.3f}: {'met' if result['meets_goal'] else 'not met'})")
    print(f"written to {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
