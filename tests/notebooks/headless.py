"""How the notebook tests execute a notebook: papermill, headless, the executed notebook written once."""

from __future__ import annotations

from pathlib import Path


def execute_headless(path: Path, out: Path, parameters: dict, save_each_cell: bool = False) -> None:
    """Execute the notebook ``path`` with ``parameters`` in its own directory; the executed notebook goes to ``out``.

    Written once, when papermill ends, rather than at each cell's start and end (papermill's default,
    ``save_each_cell=True``, for watching a long run): a lab notebook carries plotly.js, so each write
    serialises about 5 MB. Measured, the test process's CPU seconds (medians of 3 in turns,
    ``bench/results/notebook_saves.json``): notebook 02 2.74 against 0.46, notebook 04 1.31 against 0.22.
    ``out`` is removed first: a run that writes none (its kernel died, or it was interrupted) must not
    leave an earlier run's notebook there as if it were its own.

    Raises
    ------
    papermill.PapermillExecutionError
        A cell failed; ``out`` is written first, the failing cell's traceback in it.
    nbclient.exceptions.DeadKernelError
        The kernel died. With ``save_each_cell=False`` no ``out`` is written then, nor at an interrupt.
    """
    import papermill

    Path(out).unlink(missing_ok=True)
    papermill.execute_notebook(str(path), str(out), parameters=parameters, cwd=str(path.parent),
                               kernel_name="python3", progress_bar=False, request_save_on_cell_execute=save_each_cell)
