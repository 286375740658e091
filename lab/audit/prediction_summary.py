"""The room's predictions: each run's judged prediction (``prediction.json``), counted per scenario, as table rows.

A workshop runs on the learners' laptops, with no server between them. The facilitator asks each pair to run
``lab predictions`` and read out or paste its lines; :func:`summarise` turns one laptop's runs directory into
what those lines say: per scenario, how many predicted each outcome, what the runs measured, how many were
right. It never says what a scenario "should" give: the measured outcome is the answer.

Which notebook asked a scenario is not in a run's files, so ``--notebook NN`` reads it from the notebook
itself: the labels its ``nb.predict`` calls name, written out or built by an f-string (:func:`questions`).

Pure: files in, a :class:`PredictionSummary` out; :mod:`lab.cli` prints it.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from lab.audit.predictions import ALL_OUTCOMES, PREDICTION_FILE, PREDICTIONS_FILE, Verdict
from lab.errors import LabError, choices_error

#: A result label's seed, as a notebook that runs a scenario with several seeds appends it (lab.views.predict):
#: one question, so one row.
SEED_SUFFIX = re.compile(r" \(seed \d+\)$")
#: A topic notebook's file name, and its number.
NOTEBOOK_FILE = re.compile(r"^(\d\d)_\w+\.ipynb$")
#: The table's columns.
HEADER = ("scenario", "predicted", "measured", "right")


# -- the recorded verdicts ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Recorded:
    """The verdicts found under a runs directory, and the files that could not be read as one."""

    verdicts: tuple[Verdict, ...]
    unreadable: tuple[str, ...] = ()


def prediction_files(runs_dir: Path) -> list[Path]:
    """Every ``prediction.json`` of ``runs_dir``: itself a run, its runs, and the runs one level down.

    One level down because notebook 07's cluster keeps its runs in ``<runs>/cluster/`` (lab.run.kernel). Not
    deeper: a run's ``checkpoint/`` holds thousands of files and never a prediction.
    """
    names = (PREDICTION_FILE, PREDICTIONS_FILE, "question-*.json")  # a run's, notebook 04's grid, a question's
    return sorted({path for name in names for pattern in (name, f"*/{name}", f"*/*/{name}")
                   for path in runs_dir.glob(pattern)})


def read_verdicts(runs_dir: Path | str) -> Recorded:
    """The verdicts recorded under ``runs_dir`` (:func:`lab.audit.predictions.record` wrote each).

    A file that is not one verdict (half written while its run ends, or edited) is listed as unreadable
    rather than stopping the summary: the other runs still count.
    """
    names = {f.name for f in fields(Verdict)}
    found, bad = [], []
    for path in prediction_files(Path(runs_dir)):
        try:
            data = json.loads(path.read_text())
            # notebook 04's grid writes its rows as one list (lab.audit.predictions.record_all)
            verdicts = [Verdict(**{k: v for k, v in d.items() if k in names}) for d in
                        (data if isinstance(data, list) else [data])]
        except (OSError, ValueError, TypeError, AttributeError):
            bad.append(str(path))
            continue
        for verdict in verdicts:
            if isinstance(verdict.scenario, str) and isinstance(verdict.recorded_at, (int, float)):
                found.append(verdict)
            else:  # the summary sorts by the time and groups by the label
                bad.append(str(path))
    return Recorded(tuple(found), tuple(bad))


def scenario_of(label: str) -> str:
    """A verdict's scenario without its ``(seed N)``."""
    return SEED_SUFFIX.sub("", label)


# -- the summary -------------------------------------------------------------------------------------------------

def _order(counts: Counter) -> tuple[tuple[str, int], ...]:
    # Most first; a tie in the order the outcome words are listed, so every laptop prints one order.
    rank = {w: i for i, w in enumerate(ALL_OUTCOMES)}
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], rank.get(kv[0], len(rank)), kv[0])))


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _counted(pairs: Sequence[tuple[str, int]], runs: int) -> str:
    if len(pairs) == 1 and runs == 1:
        return pairs[0][0]
    return ", ".join(f"{word} {n}" for word, n in pairs)


@dataclass(frozen=True)
class ScenarioTally:
    """One scenario's runs: what was predicted, what was measured, how many predictions were right.

    Attributes
    ----------
    scenario : str
        The run label the notebook asked about, without its ``(seed N)``.
    runs : int
        Runs of it with a ``prediction.json``.
    predicted : tuple of (str, int)
        Each outcome predicted and how many runs had it, most first.
    unpredicted : int
        Runs with no prediction (none was clicked before the cell started).
    measured : tuple of (str, int)
        Each outcome measured and in how many runs, most first.
    right : int
        Predictions the measured outcome bore out.
    judged : int
        Predictions judged: made, on a run that could show its lesson.
    not_judged : int
        Predictions on a run that could not (a fault that never fired, a crash before any output).
    """

    scenario: str
    runs: int
    predicted: tuple[tuple[str, int], ...]
    unpredicted: int
    measured: tuple[tuple[str, int], ...]
    right: int
    judged: int
    not_judged: int

    def row(self) -> tuple[str, str, str, str]:
        """The scenario's line: its label, the predictions, the measured outcomes, ``right of judged``."""
        predicted = [*self.predicted, *([("no prediction", self.unpredicted)] if self.unpredicted else [])]
        right = [f"{self.right} of {self.judged}"] if self.judged else []
        right += [f"{self.not_judged} not judged"] if self.not_judged else []
        return (self.scenario, _counted(predicted, self.runs), _counted(self.measured, self.runs),
                ", ".join(right) or "-")


@dataclass(frozen=True)
class PredictionSummary:
    """A runs directory's predictions, one :class:`ScenarioTally` per scenario in the order they were first run."""

    tallies: tuple[ScenarioTally, ...]
    unreadable: tuple[str, ...] = ()

    def rows(self) -> list[tuple[str, str, str, str]]:
        """:data:`HEADER`, then one row per scenario."""
        return [HEADER, *(t.row() for t in self.tallies)]

    def total(self) -> str:
        """The closing line: runs, scenarios, predictions made, right of judged, not judged."""
        runs = sum(t.runs for t in self.tallies)
        made = sum(t.runs - t.unpredicted for t in self.tallies)
        right, judged = sum(t.right for t in self.tallies), sum(t.judged for t in self.tallies)
        not_judged = sum(t.not_judged for t in self.tallies)
        return (f"total: {_n(runs, 'run')} of {_n(len(self.tallies), 'scenario')}, {made} predicted, "
                f"{right} of {judged} right" + (f", {not_judged} not judged" if not_judged else ""))


def summarise(verdicts: Iterable[Verdict], keep: Callable[[str], bool] | None = None,
              unreadable: Sequence[str] = ()) -> PredictionSummary:
    """Count ``verdicts`` per scenario; ``keep(scenario)`` chooses the scenarios (default: all)."""
    by_scenario: dict[str, list[Verdict]] = {}
    for v in sorted(verdicts, key=lambda v: v.recorded_at):
        name = scenario_of(v.scenario)
        if keep is None or keep(name):
            by_scenario.setdefault(name, []).append(v)
    tallies = []
    for name, vs in by_scenario.items():
        made = [v for v in vs if v.predicted is not None]
        tallies.append(ScenarioTally(
            scenario=name, runs=len(vs), predicted=_order(Counter(v.predicted for v in made)),
            unpredicted=len(vs) - len(made), measured=_order(Counter(v.measured for v in vs)),
            right=sum(v.right is True for v in made), judged=sum(v.right is not None for v in made),
            not_judged=sum(bool(v.not_judged) for v in made)))
    return PredictionSummary(tuple(tallies), tuple(unreadable))


# -- which notebook asks which scenario --------------------------------------------------------------------------

#: How deep a label's expression is followed through names, calls and functions; past it, a label is not read.
_DEPTH = 8
#: At most this many patterns from one expression (an f-string concatenated with choices multiplies them).
_PATTERNS_AT_MOST = 64


class _Labels:
    """The labels an expression of a notebook's code can give, as regular expressions (``.+?`` for a ``{...}``)."""

    def __init__(self, trees: Sequence[ast.AST]):
        self.values: dict[str, list[ast.expr]] = {}
        self.returns: dict[str, list[ast.expr]] = {}
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            self.values.setdefault(target.id, []).append(node.value)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                    self.values.setdefault(node.target.id, []).append(node.value)
                elif isinstance(node, ast.FunctionDef):
                    self.returns[node.name] = [n.value for n in ast.walk(node)
                                               if isinstance(n, ast.Return) and n.value is not None]

    def many(self, node: ast.expr, depth: int = 0) -> bool:
        """Whether ``node`` gives several labels (a list, a dict's keys), not one string."""
        if depth > _DEPTH:
            return False
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            return True
        if isinstance(node, ast.Name):
            return any(self.many(v, depth + 1) for v in self.values.get(node.id, []))
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in self.returns:
                return any(self.many(r, depth + 1) for r in self.returns[name])
            return name in ("list", "sorted", "tuple", "set", "choose", "keys")
        if isinstance(node, ast.BinOp):
            return self.many(node.left, depth + 1)
        if isinstance(node, ast.IfExp):
            return self.many(node.body, depth + 1)
        return False

    def patterns(self, node: ast.expr | None, depth: int = 0) -> list[str]:
        """Every label ``node`` can give, as patterns; ``[]`` for what cannot be read without running it."""
        if node is None or depth > _DEPTH:
            return []
        deeper = depth + 1
        if isinstance(node, ast.Constant):
            return [re.escape(node.value)] if isinstance(node.value, str) else []
        if isinstance(node, ast.JoinedStr):
            return ["".join(re.escape(v.value) if isinstance(v, ast.Constant) else ".+?" for v in node.values)]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [p for e in node.elts for p in self.patterns(e.value if isinstance(e, ast.Starred) else e, deeper)]
        if isinstance(node, ast.Dict):
            return [p for k, v in zip(node.keys, node.values) for p in self.patterns(k if k is not None else v, deeper)]
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self.patterns(node.elt, deeper)
        if isinstance(node, ast.DictComp):
            return self.patterns(node.key, deeper)
        if isinstance(node, ast.IfExp):
            return self.patterns(node.body, deeper) + self.patterns(node.orelse, deeper)
        if isinstance(node, ast.Name):
            return [p for v in self.values.get(node.id, []) for p in self.patterns(v, deeper)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.patterns(node.left, deeper), self.patterns(node.right, deeper)
            if self.many(node.left, deeper) or self.many(node.right, deeper):
                return left + right  # two lists of labels joined
            return [a + b for a in left for b in right][:_PATTERNS_AT_MOST]  # one label built of two strings
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in self.returns:  # a function of the notebook's that builds a label
                return [p for r in self.returns[name] for p in self.patterns(r, deeper)]
            if name == "keys" and isinstance(func, ast.Attribute):
                return self.patterns(func.value, deeper)
            if name in ("list", "sorted", "tuple", "set", "choose") and node.args:  # nb.choose(labels, ...)
                return self.patterns(node.args[0], deeper)
        return []


def _code_cells(notebook_text: str) -> list[ast.AST]:
    trees = []
    for cell in json.loads(notebook_text).get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell.get("source", []))
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            trees.append(ast.parse(source))
        except SyntaxError:  # a cell a learner is halfway through: its questions are not read
            continue
    return trees


def questions(notebook_text: str, grid_rows: Sequence[str] = ()) -> tuple[re.Pattern, ...]:
    """The scenarios a notebook asks to predict, as patterns: the labels of its ``nb.predict``, ``nb.ask`` and
    ``nb.Panel(label=...)`` calls, ``grid_rows`` (the default grid's scenario names, which the caller reads: the
    grid is the matrix's, a floor above this one) for ``nb.predict_grid``, ``exercise NN.n`` for its exercises.

    A label written out matches itself; one built by an f-string (``f"real-time {i:g}s"``) matches any text in
    place of each ``{...}``; one built by a function of the notebook's (07's ``label(*row)``) is read from that
    function's ``return``.
    """
    trees = _code_cells(notebook_text)
    labels = _Labels(trees)
    found: list[str] = []
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "nb"):
                continue
            if node.func.attr in ("predict", "ask"):  # ask: a dict whose keys are the labels
                asked = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "scenarios"),
                                                            None)
                found += labels.patterns(asked)
            elif node.func.attr == "Panel":  # the panel's label= names its run
                found += labels.patterns(next((k.value for k in node.keywords if k.arg == "label"), None))
            elif node.func.attr == "predict_grid":  # notebook 04: the grid's rows, given by the caller
                found += [re.escape(name) for name in grid_rows]
    # the exercises' lines, in the notebook's last markdown cell: each run is recorded as "exercise NN.n"
    cells = json.loads(notebook_text).get("cells", [])
    text = "".join("".join(c.get("source", [])) for c in cells if c.get("cell_type") == "markdown")
    found += [re.escape(f"exercise {i}") for i in re.findall(r'nb\.exercise\("([\d.]+)"', text)]
    return tuple(re.compile(p) for p in dict.fromkeys(found))


def asks(patterns: Iterable[re.Pattern], scenario: str) -> bool:
    """Whether ``scenario`` (a verdict's label without its seed) is one of a notebook's questions."""
    return any(p.fullmatch(scenario) for p in patterns)


def notebooks(directory: Path | str) -> dict[str, Path]:
    """The topic notebooks of ``directory`` by number: ``{"00": .../00_start_here.ipynb, ...}``."""
    return {m.group(1): p for p in sorted(Path(directory).glob("*.ipynb")) if (m := NOTEBOOK_FILE.match(p.name))}


def notebook_number(value: str, known: Mapping[str, object]) -> str:
    """``value`` as a notebook number of ``known``: ``2``, ``02`` and ``02_direct_kafka`` are ``"02"``.

    Raises
    ------
    LabError
        One line naming ``value`` and the numbers there are.
    """
    text = str(value).strip()
    number = text.split("_", 1)[0]
    number = number.zfill(2) if number.isdigit() else number
    if number not in known:
        raise choices_error("notebook", value, known)
    return number


def runs_directory(value: Path | str) -> Path:
    """``value`` as a directory to read runs from.

    Raises
    ------
    LabError
        When it does not exist or is not a directory, naming it and what to give instead.
    """
    path = Path(value)
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise LabError(f"runs directory {str(path)!r} {what}; give a directory of runs (runs/ at the lab's root, "
                       "or LAB_RUNS_DIR), or one run's directory")
    return path
