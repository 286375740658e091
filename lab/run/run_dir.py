"""A run's directory: where one scenario keeps everything it reads and writes.

``runs/<time>-<name>/``::

    config.json   broker.json   sink.json      the run's inputs
    events.jsonl                                timeline (supervisor, producer, driver)
    progress.json                               the pipeline's durable position
    progress-N.json                             the same, as driver attempt N last wrote it
    ledger.sqlite sink.sqlite                   what was acknowledged / stored
    checkpoint/                                 Spark checkpoints and WAL
    driver.log                                  the output of each driver started when needed
    driver-N.log  driver-N.go                   standby attempt N's output; created at its turn
    audit.csv     report.json                   the verdict

Processes never share anything else: drivers read their inputs from here and
write their timeline and progress here (:mod:`lab.pipelines.driver`).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from lab.errors import LabError


def new_run_dir(config) -> Path:
    """Create ``<runs_dir>/<time>-<name>/`` for a :class:`lab.config.RunConfig`; :class:`LabError` naming the
    directory when it cannot."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")[:-3]
    path = Path(config.runs_dir).resolve() / f"{stamp}-{config.name}"
    try:
        path.mkdir(parents=True, exist_ok=False)
    except OSError as e:
        raise LabError(f"cannot create a run directory in {config.runs_dir!r} ({e.strerror or e}); "
                       "set LAB_RUNS_DIR to a writable directory") from None
    return path
