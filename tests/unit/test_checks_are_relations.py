"""A lesson's check states a relation the run's own files decide, never a count or a duration against a fixed number.

A busy laptop shifts every time and every count that depends on one: how many events a crash finds written, how
long a restart takes. A check such as ``duplicated > 100`` or ``restart_s < 10`` passes on a quiet machine and
fails on a loaded one (or passes when the lesson did not show). What holds on any machine is a relation between
two things the run measured independently: "the duplicates are the events written before the kill past the
offsets the restart resumed at". A ``> 0`` may guard such a relation (``a == b > 0``: the run had something to
show), never stand alone; a count equal to a fixed number is the run's own setting (``settings["events"]``) or an
event the run recorded, not a copied figure.

The lesson checks are the evidence checks (:mod:`lab.lessons.evidence`, what :func:`lab.lessons.solve.solve`
judges), and what each notebook's runs must show (``tests/notebooks/test_notebooks.py``'s ``check_*`` with their
helpers, and the ``tests/integration`` checks they call). :data:`STAY` lists the few comparisons with a fixed number
that stay, and why.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

#: Comparisons that stay: (file, function, the comparison as ``ast.unparse`` writes it) and why.
STAY = {
    ("tests/notebooks/test_notebooks.py", "check_08", "storm['unacked']['duplicated'] == 0 < storm['unacked']['lost']"):
        "Storm without an acker commits a poll's offsets before it emits the tuples: what was lost is what was in "
        "the topology between that commit and the sink, which no file of the run records; the relation holds in "
        "the audit (acked = exactly once + lost), and > 0 says the crash found tuples in flight.",
    ("tests/notebooks/test_notebooks.py", "check_08", "stored['aligned'] == 0 < stored['unaligned']"):
        "Flink's own checkpoint statistics (persisted_data) are the only record of the in-flight records an "
        "unaligned checkpoint stored; how many depends on how full the buffers were when the barrier came "
        "(61 KB to 640 KB measured at the first checkpoint), so the lesson is that unaligned stores some and "
        "aligned none.",
}

#: Names that hold a duration: compared with a fixed number, they make a check a timing.
_DURATION = re.compile(r"(_s|_ms|seconds|elapsed|duration|took)\b")


@dataclass(frozen=True)
class Flag:
    file: str
    function: str
    line: int
    comparison: str


def _number(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def _scaled(node) -> bool:
    """``100 * n``: a fixed figure scaled by a parameter."""
    return isinstance(node, ast.BinOp) and any(_number(s) and s.value >= 3 for s in (node.left, node.right))


def _judged(fn: ast.FunctionDef) -> list[ast.expr]:
    """The expressions a check function passes or fails on: its asserts, and what it hands to ``Finding`` or
    names ``holds``."""
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            out.append(node.test)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding" and node.args:
            out.append(node.args[0])
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) in ("holds", "once") for t in node.targets):
            out.append(node.value)
    return out


def flags_of(source: str, file: str, functions=None) -> list[Flag]:
    """Every comparison with a fixed number in the judged expressions of ``functions`` (all when ``None``).

    A ``> 0`` (``0 <``, ``>= 1``) passes when the same expression relates its operand to something measured: it
    guards a relation. Equality with 0, 1 or 2 passes (none, one crash, a batch run twice); with a larger number
    or a scaled one it is a copied figure. Any fixed number against a duration is a timing.
    """
    flags = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef) or (functions is not None and fn.name not in functions):
            continue
        for expr in _judged(fn):
            related = set()  # operands compared with something that is not a fixed number
            for c in (n for n in ast.walk(expr) if isinstance(n, ast.Compare)):
                items = [c.left, *c.comparators]
                for a, b in zip(items, items[1:]):
                    if not _number(a) and not _number(b):
                        related |= {ast.unparse(a), ast.unparse(b)}
            for c in (n for n in ast.walk(expr) if isinstance(n, ast.Compare)):
                items = [c.left, *c.comparators]
                for op, a, b in zip(c.ops, items, items[1:]):
                    for fixed, other in ((a, b), (b, a)):
                        if _scaled(fixed) and isinstance(op, (ast.Eq, ast.NotEq)):
                            bad = True
                        elif not _number(fixed):
                            continue
                        elif _DURATION.search(ast.unparse(other)):
                            bad = True
                        elif isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                            bad = fixed.value >= 3
                        else:
                            guard = fixed.value == 0 or (fixed.value == 1 and isinstance(op, (ast.GtE, ast.LtE)))
                            bad = not (guard and ast.unparse(other) in related)
                        if bad:
                            flags.append(Flag(file, fn.name, c.lineno, ast.unparse(c)))
    return flags


def _imported_checks(path: Path) -> dict[str, set[str]]:
    """The ``tests/integration`` functions a notebook check imports: {module file: names}."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests.integration."):
            file = node.module.replace(".", "/") + ".py"
            found.setdefault(file, set()).update(a.name for a in node.names)
    return found


def lesson_checks() -> list[tuple[str, set[str] | None]]:
    """(file, functions or ``None`` for all) of every lesson check."""
    notebooks = ROOT / "tests" / "notebooks" / "test_notebooks.py"
    checks = {n.name for n in ast.walk(ast.parse(notebooks.read_text()))  # the checks and their helpers, not the
              if isinstance(n, ast.FunctionDef) and not n.name.startswith("test_")}  # rendering tests
    out = [(str(p.relative_to(ROOT)), None) for p in sorted((ROOT / "lab" / "lessons").glob("*.py"))]
    out.append(("tests/notebooks/test_notebooks.py", checks))
    out += sorted(_imported_checks(notebooks).items())
    return out


def all_flags() -> list[Flag]:
    return [f for file, functions in lesson_checks() for f in flags_of((ROOT / file).read_text(), file, functions)]


def test_no_lesson_check_compares_a_count_or_a_duration_with_a_fixed_number():
    flags = [f for f in all_flags() if (f.file, f.function, f.comparison) not in STAY]
    assert not flags, "a fixed number where a relation exists:\n" + "\n".join(
        f"  {f.file}:{f.line} {f.function}: {f.comparison}" for f in flags)


def test_every_comparison_that_stays_is_still_there():
    found = {(f.file, f.function, f.comparison) for f in all_flags()}
    assert set(STAY) <= found, f"no longer in the checks, remove from STAY: {set(STAY) - found}"


def test_the_rule_flags_thresholds_and_passes_relations():
    source = '''
def check(r, a, b):
    assert r["duplicated"] > 0
    assert r["duplicated"] >= 100
    assert r["acked"] == 1500
    assert r["aborted"] == 100 * n
    assert r["restart_s"] < 10
    assert r["duplicated"] == a["written"] > 0
    assert 0 < r["lost"] <= b
    assert r["restarts"] == 1 and r["lost"] == 0
    assert r["acked"] == r["settings"]["events"]
'''
    flagged = [f.comparison for f in flags_of(source, "x.py")]
    assert flagged == ["r['duplicated'] > 0", "r['duplicated'] >= 100", "r['acked'] == 1500",
                       "r['aborted'] == 100 * n", "r['restart_s'] < 10"], flagged
