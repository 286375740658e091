"""How the notebook tests execute a notebook: papermill, headless, the executed notebook written once."""

from __future__ import annotations

from pathlib import Path


def execute_headless(path: Path, out: Path, parameters: dict) -> None:
    """Execute the notebook ``path`` with ``parameters`` in its own directory; the executed notebook goes to ``out``.

    Raises papermill's ``PapermillExecutionError`` when a cell fails; ``out`` is written first, the
    failing cell's traceback in it. Written once rather than at each cell's start and end (papermill's
    default, for watching a long run): a lab notebook carries plotly.js, so each write serialises 5 MB.
    Measured, the test process's CPU seconds (medians of 3 in turns, ``bench/results/notebook_saves.json``):
    notebook 02 3.10 against 0.52, notebook 04 1.41 against 0.23.
    """
    import papermill

    papermill.execute_notebook(str(path), str(out), parameters=parameters, cwd=str(path.parent),
                               kernel_name="python3", progress_bar=False, request_save_on_cell_execute=False)
