"""Notebook 04's questions: one prediction per row of a grid, and the outcome each row measured.

A learner predicts every scenario of the default grid before the measured grid
is drawn. The questions come from the grid file (its names in order, the
notebook where each runs, and which words may answer it); each answer comes
from a results table: the learner's own for the scenarios it ran, else the
committed reference (``docs/reference/matrix.csv``), so a learner whose own
table is ``make demo``'s five rows is still answered on every row, and told
which table answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lab.audit.expectations import TOPIC_EXPECTATIONS
from lab.matrix.grid import Grid
from lab.outcomes import GUARANTEES, SEVERITY, TOPIC_WORDS


@dataclass(frozen=True)
class GridQuestion:
    """One row to predict: the scenario's name, the notebook where it runs, the words that may answer it.

    A row judged on the topic's final read (an ``acked-*`` expectation) is
    answered with :data:`lab.outcomes.TOPIC_WORDS`, every other row with
    :data:`lab.outcomes.GUARANTEES`: the words the matrix measures it in.
    """

    name: str
    notebook: str
    choices: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.notebook} · {self.name}" if self.notebook else self.name


def grid_questions(grid: Grid) -> list[GridQuestion]:
    """The grid's scenarios as questions, one per name (a name run with several seeds is asked once), in order."""
    seen: dict[str, GridQuestion] = {}
    for s in grid.scenarios:
        if s.name not in seen:
            words = TOPIC_WORDS if s.expect in TOPIC_EXPECTATIONS else GUARANTEES
            seen[s.name] = GridQuestion(s.name, s.notebook, tuple(words))
    return list(seen.values())


@dataclass(frozen=True)
class GridAnswer:
    """What a row measured: the worst outcome of its runs in the table that answered, the counts, that table."""

    name: str
    measured: str
    detail: str
    table: str


def _detail(row) -> str:
    if row.get("measured") in TOPIC_WORDS:
        return f"{int(row['topic_lost'])} of {int(row['acked'])} acknowledged sends not in the topic"
    return f"{int(row['lost'])} lost, {int(row['duplicated'])} duplicated of {int(row['acked'])}"


def grid_answers(questions: Sequence[GridQuestion],
                 tables: Sequence[tuple[str | Path, object]]) -> dict[str, GridAnswer]:
    """Each question's answer from the first table that ran it.

    Parameters
    ----------
    questions : sequence of GridQuestion
    tables : sequence of (path, view)
        Results views (:func:`lab.matrix.report.matrix_view`: a ``measured``
        column recomputed from the counts), the learner's own first. A row
        none of them ran has no answer.

    Returns
    -------
    dict
        ``{name: GridAnswer}``; of a name's several runs (seeds), the worst
        measured outcome (:data:`lab.outcomes.SEVERITY`), as the grid colours its cell.
    """
    answers = {}
    for q in questions:
        for path, view in tables:
            runs = view[view["name"] == q.name]
            if len(runs):
                worst = max((r for _, r in runs.iterrows()), key=lambda r: SEVERITY.get(r["measured"], 99))
                answers[q.name] = GridAnswer(q.name, worst["measured"], _detail(worst), str(path))
                break
    return answers


def answers_for(questions: Sequence[GridQuestion], results_file: str | Path) -> dict[str, GridAnswer]:
    """The answers from ``results_file``, and from the committed reference for the rows it did not run.

    Each answer names its table relative to the project root when it lies there.
    """
    from lab.host.env import project_root
    from lab.matrix.report import REFERENCE_RESULTS, is_reference, matrix_view, read_results

    root = project_root() or Path.cwd()

    def shown(path: Path) -> str:
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            return str(path)

    results_file = Path(results_file)
    tables = [(shown(results_file), matrix_view(read_results(results_file)))]
    reference = root / REFERENCE_RESULTS
    if not is_reference(results_file) and reference.is_file():
        tables.append((shown(reference), matrix_view(read_results(reference))))
    return grid_answers(questions, tables)
