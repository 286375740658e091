"""Notebook 07's "your turn": pick acks, min.insync.replicas and unclean election, predict, run, compare.

Widgets only; the run is :func:`lab.views.progress.run`, the documented claim
:func:`lab.audit.claims.claim`, the row and table :mod:`lab.views.replication`'s.
The Run button's callback runs inside ``Output.capture`` (an error shows in the
output, never lost); it blocks the kernel for the run (about 20 s with the
notebook's defaults), with the run's progress bar live meanwhile.
"""

from __future__ import annotations

from pathlib import Path

from lab.outcomes import TOPIC_WORDS

#: The prediction choices: the words every other question about the topic's final read uses.
PREDICTIONS = TOPIC_WORDS


def prediction_right(prediction: str, lost: int) -> bool:
    """Whether ``prediction`` (one of :data:`PREDICTIONS`) matches ``lost`` acknowledged-and-lost sends."""
    return (lost > 0) == (prediction == "acked-lost")


class SettingsPicker:
    """Three toggles, a prediction, a Run button, and the table of every run made from here.

    Parameters
    ----------
    common : dict
        Parameters for :func:`lab.notebook.config` shared by every run (events, rate, faults, seed).
    runs_dir : Path
        The cluster's runs directory (:func:`lab.notebook.start_cluster`).
    """

    def __init__(self, common: dict, runs_dir: Path | str) -> None:
        import ipywidgets as w

        from lab.views.choice import choice_row

        self.common, self.runs_dir = dict(common), str(runs_dir)
        self.results: list = []
        self.acks = w.ToggleButtons(options=["1", "all"], value="all", description="acks")
        self.min_insync = w.ToggleButtons(options=[1, 2], value=1, description="min.insync")
        self.unclean = w.ToggleButtons(options=["on", "off"], value="on", description="unclean")
        self.prediction = choice_row(PREDICTIONS, None, label="you predict", inline=True)
        self.button = w.Button(description="Run on the cluster", button_style="primary", icon="play")
        self.out = w.Output()
        self.button.on_click(self.out.capture()(lambda _button: self._run()))
        self.box = w.VBox([self.acks, self.min_insync, self.unclean, self.prediction, self.button, self.out])

    def show(self) -> None:
        from IPython.display import display

        display(self.box)

    def _run(self) -> None:
        from IPython.display import display

        from lab.views import replication as rv
        from lab.views.progress import config, run

        if self.prediction.value is None:
            print(f"predict first: {' or '.join(PREDICTIONS)}?")
            return
        self.button.disabled = True
        try:
            result = run(config(**self.common, nodes=3, runs_dir=self.runs_dir, acks=self.acks.value,
                                      idempotence=self.acks.value == "all", min_insync=self.min_insync.value,
                                      unclean=self.unclean.value), quiet=True)
        finally:
            self.button.disabled = False
        self.results.append(result)
        row = rv.row(result)
        right = prediction_right(self.prediction.value, row["lost"])
        print(f"you predicted {self.prediction.value}; measured {row['lost']} acknowledged and lost "
              f"({'right' if right else 'not what you predicted'})")
        rv.show(result)
        display(rv.table(self.results))
        self.prediction.value = None
