"""A row of choice buttons that the keyboard cannot clear: the lab's prediction buttons.

ipywidgets' ``ToggleButtons`` keeps the keyboard focus on the clicked button,
so a learner's next Shift-Enter went to the button and JupyterLab ran the
buttons' own cell again: a new row, the choice gone. This row (an anywidget,
``choice.js`` and ``choice.css`` beside this file) differs in three ways:

* a click chooses; a click on the chosen button keeps it; only a visible
  "clear" clears;
* with ``hand_over`` (a prediction sheet, whose next cell runs the scenarios),
  a choice selects the next cell and gives it the focus, so Shift-Enter runs
  that cell;
* locked (``disabled``), the chosen button keeps its colour, a tick and a
  border while the others fade.

The kernel reads :attr:`value` (the chosen option or ``None``) as it would a
``ToggleButtons``' value.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path


@functools.cache
def _row_class():
    """The widget class, made once: its front end is read from the files beside this module."""
    import anywidget
    import traitlets

    here = Path(__file__).parent

    class ChoiceRow(anywidget.AnyWidget):
        _esm = (here / "choice.js").read_text()
        _css = (here / "choice.css").read_text()
        options = traitlets.List(traitlets.Unicode()).tag(sync=True)
        value = traitlets.Unicode(None, allow_none=True).tag(sync=True)
        disabled = traitlets.Bool(False).tag(sync=True)
        label = traitlets.Unicode("").tag(sync=True)
        inline = traitlets.Bool(False).tag(sync=True)
        hand_over = traitlets.Bool(False).tag(sync=True)

        @traitlets.validate("value")
        def _known(self, proposal):
            v = proposal["value"]
            if v is not None and v not in self.options:
                raise traitlets.TraitError(f"{v!r} is not a choice; choose one of: {', '.join(self.options)}")
            return v

    return ChoiceRow


def choice_row(options: Sequence[str], value: str | None = None, *, label: str = "", inline: bool = False,
               hand_over: bool = False):
    """A :class:`ChoiceRow` widget.

    Parameters
    ----------
    options : sequence of str
        The buttons, in order.
    value : str, optional
        The starting choice (``None``: nothing chosen).
    label : str
        Text above the buttons (``inline``: before them, for a short label).
    hand_over : bool
        After a choice, select the next notebook cell and focus it (so Shift-Enter runs it).
    """
    row = _row_class()(options=list(options), label=label, inline=inline, hand_over=hand_over)
    row.value = value  # after the options, which the value is checked against
    return row
