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

from lab.outcomes import GUARANTEES
from lab.audit.predictions import (Prediction, check_given, check_mapping, freeze, judge, measured_guarantee,
                             record, score)


#: The choices made on this kernel's prediction rows, by scenario. A learner who clicks and then presses
#: Shift-Enter in the buttons' own cell runs that cell again: the new row starts from the choice, not empty.
_CHOSEN: dict[str, str] = {}


class PredictionSheet:
    """One prediction per scenario: buttons interactively, the ``PREDICTIONS`` parameter headless.

    Call :meth:`freeze` first thing in the cell that runs the scenarios: what is
    chosen after that does not count, and the buttons are locked with the choice
    marked. A row (:func:`lab.views.choice.choice_row`) starts from the choice
    made for its scenario earlier in this kernel, else from ``PREDICTIONS``; a
    choice selects the next cell, so Shift-Enter runs the scenarios.
    """

    def __init__(self, scenarios: Sequence[str], given: Mapping[str, str | None], choices: Sequence[str],
                 interactive: bool, question: str):
        self.scenarios = list(scenarios)
        self.choices = tuple(choices)
        self.interactive = interactive
        self.question = question
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
                start = _CHOSEN.get(s) if _CHOSEN.get(s) in self.choices else self._given.get(s)
                row = choice_row(self.choices, start, label=s, hand_over=True)
                row.observe(lambda change, s=s: self._remember(s, change["new"]), names="value")
                self._buttons[s] = row
            self._status = w.HTML(f"<i>{self.question} Pick one per row, then run the next cell.</i>")
        return w.VBox([*self._buttons.values(), self._status])

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
    colour = {True: "#d8f3dc", False: "#fde0dc", None: "#f1f1f1"}
    rows = "".join(
        f"<tr style='background:{colour[v.right]}'><td>{v.mark}</td><td>{v.scenario}</td>"
        f"<td>{v.predicted or '<i>none</i>'}</td><td><b>{v.measured}</b></td>"
        f"<td>{v.detail}{'<br><i>not judged: ' + v.not_judged + '</i>' if v.not_judged else ''}</td></tr>"
        for v in out)
    display(HTML(f"<p><b>Your predictions: {score(out)}</b></p><table><tr><th></th><th>run</th>"
                 f"<th>predicted</th><th>measured</th><th>counts</th></tr>{rows}</table>"))
    print("\n".join(v.sentence() for v in out))
