"""Predict, then look, in a notebook: buttons to record a prediction, and the verdict after the run.

The protocol (what counts as recorded, how an outcome is measured) is
:mod:`lab.audit.predictions`; this module only displays. Interactively each scenario
gets a row of buttons; headless (``INTERACTIVE = False``) the ``PREDICTIONS``
parameter gives the same answers and nothing waits for a click.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence

from lab.audit.predictions import (
    Prediction,
    Verdict,
    as_choice,
    check_given,
    check_mapping,
    freeze,
    judge,
    measured_guarantee,
    record,
    record_all,
    score,
)
from lab.outcomes import GUARANTEES

#: The choices made on this kernel's prediction rows, by scenario. A learner who clicks and then presses
#: Shift-Enter in the buttons' own cell runs that cell again: the new row starts from the choice, not empty.
_CHOSEN: dict[str, str] = {}


#: A verdict row's colour: right, wrong, not judged.
COLOURS = {True: "#d8f3dc", False: "#fde0dc", None: "#f1f1f1"}


def verdict_table(verdicts, first: str, last: str, label=lambda v: v.scenario) -> str:
    """The verdicts as one HTML table under the score: mark, ``first`` column, predicted, measured, ``last`` column.

    JupyterLab right-aligns table cells and wraps "exactly-once" at its hyphen: rows read left to right, words whole.
    """
    left, whole = "style='text-align:left'", "style='white-space:nowrap'"
    rows = "".join(
        f"<tr style='background:{COLOURS[v.right]}'><td>{v.mark}</td><td {left}>{label(v)}</td>"
        f"<td {whole}>{v.predicted or '<i>none</i>'}</td><td {whole}><b>{v.measured}</b></td>"
        f"<td {left}>{v.detail}{'<br><i>not judged: ' + v.not_judged + '</i>' if v.not_judged else ''}</td></tr>"
        for v in verdicts)
    return (f"<table><tr><th></th><th>{first}</th><th>predicted</th><th>measured</th><th>{last}</th></tr>"
            f"{rows}</table>")


class PredictionSheet:
    """One prediction per scenario: buttons interactively, the ``PREDICTIONS`` parameter headless.

    Call :meth:`freeze` first thing in the cell that runs the scenarios: what is
    chosen after that does not count, and the buttons are locked with the choice
    marked. A row (:func:`lab.views.choice.choice_row`) starts from the choice
    made for its scenario earlier in this kernel, else from ``PREDICTIONS``; a
    choice selects the next cell, so Shift-Enter runs the scenarios.
    """

    def __init__(self, scenarios: Sequence[str], given: Mapping[str, str | None],
                 choices: Sequence[str] | Mapping[str, Sequence[str]], interactive: bool, question: str,
                 labels: Mapping[str, str] | None = None, hand_over: bool = True):
        self.scenarios = list(scenarios)
        self.choices = ({s: tuple(choices[s]) for s in self.scenarios} if isinstance(choices, Mapping)
                        else {s: tuple(choices) for s in self.scenarios})
        self.interactive = interactive
        self.question = question
        self.labels = {s: (labels or {}).get(s, s) for s in self.scenarios}
        self.hand_over = hand_over
        self._given = dict(given)
        self._frozen: dict[str, Prediction] | None = None
        self._buttons = {}
        self._status = None

    def widget(self):
        """The buttons (built once): one row per scenario, its label above it, a status line under them."""
        import ipywidgets as w

        from lab.views.choice import choice_row

        if not self._buttons:
            for s in self.scenarios:
                start = _CHOSEN.get(s) if _CHOSEN.get(s) in self.choices[s] else self._given.get(s)
                row = choice_row(self.choices[s], start, label=self.labels[s], hand_over=self.hand_over)
                row.observe(lambda change, s=s: self._remember(s, change["new"]), names="value")
                self._buttons[s] = row
            self._status = w.HTML(self._status_text())
        return w.VBox([*self._buttons.values(), self._status])

    def _status_text(self) -> str:
        return f"<i>{self.question} Pick one per row, then run the next cell.</i>"

    def _remember(self, scenario: str, outcome: str | None) -> None:
        if self._frozen is not None:
            return
        if outcome is None:
            _CHOSEN.pop(scenario, None)
        else:
            _CHOSEN[scenario] = outcome

    def chosen(self) -> dict[str, str | None]:
        """The outcomes chosen so far (the buttons' values, or the parameter's)."""
        if self._buttons:
            return {s: b.value for s, b in self._buttons.items()}
        return dict(self._given)

    def freeze(self) -> dict[str, Prediction]:
        """Record the predictions now; later clicks do not count. Calling it again returns the first record."""
        if self._frozen is None:
            source = "buttons" if self._buttons else "PREDICTIONS"
            self._frozen = freeze(self.chosen(), source)
            for b in self._buttons.values():
                b.disabled = True
            made = sum(p.outcome is not None for p in self._frozen.values())
            note = f"{made} of {len(self.scenarios)} predictions recorded at {time.strftime('%H:%M:%S')}"
            if self._status is not None:
                self._status.value = f"<i>{note}; later clicks do not count.</i>"
            elif len(self.scenarios) > 5:  # a grid's rows: the verdicts' table lists each
                print(f"{note} (from {source})")
            else:
                print(f"{note} (from {source}): " + "; ".join(
                    f"{s}: {p.outcome or '-'}" for s, p in self._frozen.items()))
        return self._frozen


def predict(scenarios: Sequence[str], predictions: Mapping | None = None, *, interactive: bool = True,
            choices: Sequence[str] = GUARANTEES,
            question: str = "What will each run measure?") -> PredictionSheet:
    """Show the prediction buttons for ``scenarios`` (interactively) and return the sheet.

    Parameters
    ----------
    scenarios : sequence of str
        The labels the scenario cell will use for its runs.
    predictions : mapping, optional
        The ``PREDICTIONS`` parameter, ``{scenario: outcome}``: headless the
        predictions, interactively the buttons' starting values. It may hold
        the keys of other cells too; only ``scenarios`` are taken here.
    interactive : bool
        The notebook's ``INTERACTIVE``.
    choices : sequence of str
        :data:`lab.audit.predictions.GUARANTEES` or :data:`lab.audit.predictions.TOPIC_OUTCOMES`.

    Raises
    ------
    lab.errors.LabError
        When ``predictions`` is not a mapping, or holds an outcome no question
        has (every value is checked, whichever cell it is for), or an outcome of
        one of ``scenarios`` that is not among ``choices``, naming the valid ones.
        A key that names no run of the notebook is not an error: that run's
        verdict says "no prediction".
    """
    # PREDICTIONS holds the answers for every cell of the notebook: each value is checked here, at the
    # first prediction cell, against every outcome one may predict; this cell takes its own runs' keys.
    given = check_mapping(predictions)
    mine = {k: v for k, v in given.items() if k in scenarios}
    sheet = PredictionSheet(scenarios, check_given(mine, scenarios, choices), choices, interactive, question)
    if interactive:
        from IPython.display import display

        display(sheet.widget())
    return sheet


def _scenario_of(key: str, predicted: Mapping) -> str:
    """A result's label without its ``(seed N)`` suffix, when only the plain label was predicted."""
    return key if key in predicted else re.sub(r" \(seed \d+\)$", "", key)


def verdicts(frozen: Mapping[str, Prediction] | PredictionSheet, results: Mapping,
             measure: Callable[[Mapping], tuple[str, str]] = measured_guarantee) -> None:
    """Judge each run against its frozen prediction, record it in the run's directory, and show the verdicts.

    Parameters
    ----------
    frozen : dict or PredictionSheet
        :meth:`PredictionSheet.freeze`'s record (a sheet is frozen now if it was not).
    results : mapping
        ``{label: lab.run.supervisor.RunResult}``; a label may carry a ``(seed N)`` suffix.
    measure : callable
        ``report -> (outcome, detail)``, the same rule for every run of the cell.

    Returns nothing (a notebook cell ending with it shows the table, not a list);
    each :class:`lab.audit.predictions.Verdict` is written to its run's ``prediction.json``.
    """
    from IPython.display import HTML, display

    if isinstance(frozen, PredictionSheet):
        frozen = frozen.freeze()
    out = []
    for key, result in results.items():
        base = _scenario_of(key, frozen)
        p = frozen.get(base) or Prediction(base, None, "none", time.time())
        v = judge(Prediction(key, p.outcome, p.source, p.recorded_at), result.report, measure)
        record(v, result.run_dir)
        out.append(v)
    display(HTML(f"<p><b>Your predictions: {score(out)}</b></p>{verdict_table(out, 'run', 'counts')}"))
    print("\n".join(v.sentence() for v in out))


class GridSheet(PredictionSheet):
    """Notebook 04's sheet: one row of buttons per scenario of a grid, and the measured grid kept back until all are in.

    Interactively, :meth:`ready` is false (and says how many rows are left)
    until every row has a choice; the cells that draw the measured grid call it
    first. Headless, the ``PREDICTIONS`` parameter gives the choices and the
    grid is drawn whatever it holds: a row it leaves out is shown as not predicted.
    """

    def _status_text(self) -> str:
        made = sum(v is not None for v in self.chosen().values()) if self._buttons else 0
        left = len(self.scenarios) - made
        tail = ("every row predicted: run the cells below to see the measured grid." if not left else
                f"{left} rows left; the measured grid below stays closed until every row has a prediction.")
        return f"<i>{self.question} {made} of {len(self.scenarios)} predicted; {tail}</i>"

    def _remember(self, scenario: str, outcome: str | None) -> None:
        super()._remember(scenario, outcome)
        if self._status is not None and self._frozen is None:
            self._status.value = self._status_text()

    def missing(self) -> list[str]:
        """The rows without a choice yet."""
        return [s for s, o in self.chosen().items() if o is None]

    def ready(self) -> bool:
        """Whether the measured grid may be shown: headless always; interactively once every row has a choice."""
        if not self.interactive or self._frozen is not None:
            return True
        left = self.missing()
        if left:
            print(f"{len(left)} of {len(self.scenarios)} rows have no prediction yet (the first: "
                  f"{self.labels[left[0]]!r}). Predict them in the buttons above, then run this cell again.")
            return False
        return True

    def verdicts(self, answers: Mapping, runs_dir) -> list[Verdict]:
        """Freeze the choices, judge each row against its answer, record them, and show the score and the table.

        Parameters
        ----------
        answers : mapping
            ``{scenario: lab.matrix.questions.GridAnswer}``; a row without one is
            shown as not run and not judged.
        runs_dir : path
            Where ``04-grid-<time>/predictions.json`` is written (:func:`lab.audit.predictions.record_all`).
        """
        from pathlib import Path

        from IPython.display import HTML, display

        frozen = self.freeze()
        out = []
        for s in self.scenarios:
            a = answers.get(s)
            p = frozen[s]
            if a is None:
                out.append(Verdict(s, p.outcome, "not run", None, "no results table holds this row", "",
                                   p.recorded_at, p.source, "no table ran it" if p.outcome else ""))
                continue
            out.append(judge(Prediction(s, p.outcome, p.source, p.recorded_at), {"run_dir": a.table},
                             lambda _report, a=a: (a.measured, a.detail)))
        where = record_all(out, Path(runs_dir) / f"04-grid-{time.strftime('%Y%m%d-%H%M%S')}")
        tables = sorted({a.table for a in answers.values()})
        display(HTML(f"<p><b>Your grid: {score(out)}</b> (answered by {', '.join(tables) or 'no table'}; "
                     f"recorded in {where})</p>"
                     + verdict_table(out, "scenario", "counts", label=lambda v: self.labels[v.scenario])))
        return out


def predict_grid(questions: Sequence, predictions: Mapping | None = None, *, interactive: bool = True,
                 question: str = "What will each row of the grid measure?") -> GridSheet:
    """Show one row of buttons per grid question (interactively) and return the sheet.

    Parameters
    ----------
    questions : sequence of lab.matrix.questions.GridQuestion
        The rows, in order; each row offers its own words (a cluster row: ``acked-kept`` or ``acked-lost``).
    predictions : mapping, optional
        Notebook 04's ``PREDICTIONS``, ``{scenario name: outcome}``.

    Raises
    ------
    lab.errors.LabError
        When ``predictions`` is not a mapping, names a row the grid does not
        have (naming the rows there are), or gives a row a word it cannot be
        answered with (naming that row's words).
    """
    from lab.errors import choices_error

    given = check_mapping(predictions)
    names = [q.name for q in questions]
    unknown = [k for k in given if k not in names]
    if unknown:
        raise choices_error("PREDICTIONS key (a row of the grid)", unknown[0], names)
    choices = {q.name: q.choices for q in questions}
    start = {n: as_choice(given.get(n), choices[n], n) for n in names}
    sheet = GridSheet(names, start, choices, interactive, question, labels={q.name: q.label for q in questions},
                      hand_over=False)
    if interactive:
        from IPython.display import display

        display(sheet.widget())
    return sheet


def ask(questions: Mapping[str, str], predictions: Mapping | None = None, *, interactive: bool = True,
        question: str = "What will you see?") -> PredictionSheet:
    """Buttons for questions that are not a run's guarantee: ``{label: key of lab.audit.predictions.QUESTIONS}``.

    Raises
    ------
    lab.errors.LabError
        For a question key the lab does not have, or a ``PREDICTIONS`` value
        that is not one of its question's choices (naming them).
    """
    from lab.audit.predictions import QUESTIONS
    from lab.errors import choices_error

    for key in questions.values():
        if key not in QUESTIONS:
            raise choices_error("question", key, QUESTIONS)
    given = check_mapping(predictions)
    choices = {label: QUESTIONS[key] for label, key in questions.items()}
    start = {label: as_choice(given.get(label), choices[label], label) for label in questions}
    sheet = PredictionSheet(list(questions), start, choices, interactive, question)
    if interactive:
        from IPython.display import display

        display(sheet.widget())
    return sheet


def answers(frozen: Mapping[str, Prediction] | PredictionSheet, measured: Mapping[str, tuple[str, str]],
            where) -> None:
    """Judge each question's frozen prediction against its measured ``(outcome, detail)``, record it, show the table.

    Each verdict goes to ``question-<n>.json`` in ``where`` (the run or experiment
    directory the answer was measured in), next to the run's own ``prediction.json``.
    """
    from pathlib import Path

    from IPython.display import HTML, display

    if isinstance(frozen, PredictionSheet):
        frozen = frozen.freeze()
    out = []
    for label, (outcome, detail) in measured.items():
        p = frozen.get(label) or Prediction(label, None, "none", time.time())
        v = judge(p, {"run_dir": str(where)}, lambda _report, o=outcome, d=detail: (o, d))
        record(v, Path(where), name=f"question-{re.sub(r'[^a-z0-9]+', '-', label.lower()).strip('-')}.json")
        out.append(v)
    display(HTML(f"<p><b>Your predictions: {score(out)}</b></p>{verdict_table(out, 'question', 'what decided it')}"))
    print("\n".join(v.sentence() for v in out))
