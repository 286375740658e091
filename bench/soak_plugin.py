"""A pytest plugin for ``bench/soak.py``: one JSON line per test into ``$SOAK_RECORDS``.

Each line: the test, its outcome (``passed``, ``failed``, ``skipped``, ``error``), the failing check's message
(the last line of its failure, e.g. ``AssertionError: ...``), its wall seconds and the load average at its end.
"""

from __future__ import annotations

import json
import os
import time

_started: dict[str, float] = {}


def pytest_runtest_logstart(nodeid, location):
    _started[nodeid] = time.monotonic()


def _message(report) -> str | None:
    if report.passed:
        return None
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message.splitlines()[0][:400] if crash.message else None
    text = str(report.longrepr or "").strip().splitlines()
    return text[-1][:400] if text else None


def pytest_runtest_logreport(report):
    path = os.environ.get("SOAK_RECORDS")
    if not path:
        return
    failed_setup = report.when == "setup" and not report.passed
    if report.when != "call" and not failed_setup and not (report.when == "teardown" and report.failed):
        return
    outcome = "error" if report.when != "call" and report.failed else report.outcome
    record = {"test": report.nodeid.split("::")[-1], "outcome": outcome, "message": _message(report),
              "seconds": round(time.monotonic() - _started.get(report.nodeid, time.monotonic()), 1),
              "load_average": [round(x, 2) for x in os.getloadavg()], "when": report.when}
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
