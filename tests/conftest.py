"""Shared fixtures: isolated runs directory, one broker per session, process-leak checks.

The broker
----------
One embedded Apache Kafka broker serves every integration and notebook test
that takes ``runs_dir``: it is recorded in that runs directory's
``broker.json``, the way ``lab broker start`` leaves one, so each run reuses it
(a topic and a consumer group of its own per run) instead of paying a JVM start
and stop. Tests that start, stop, kill or inspect a broker's processes take
their own: ``@pytest.mark.own_broker``. Unit tests never start one.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Test directories whose tests share the session's broker.
_SHARED_BROKER_DIRS = ("integration", "notebooks")


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    """Each test gets its own runs directory; no LAB_* setting leaks in from the caller's shell."""
    for var in ("LAB_KAFKA_BOOTSTRAP", "LAB_KAFKA_PROXY", "LAB_SINK_URL", "LAB_SPARK_MASTER", "LAB_JAVA_HOME",
                "LAB_KAFKA_READER", "LAB_STANDBY", "LAB_SPARK_UI"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "runs"
    monkeypatch.setenv("LAB_RUNS_DIR", str(path))
    return path


#: PIDs of the session's shared broker and proxy: not a run's to end, so leak checks of a run skip them.
SHARED_BROKER_PIDS: set[int] = set()


@pytest.fixture(scope="session")
def session_broker(tmp_path_factory):
    """The embedded broker shared by the session's runs, stopped at its end."""
    from lab.broker import archive as broker_archive, embedded as broker_mod
    from lab.spark import archive as class_archive

    # The driver JVM's class archive, made once per installed versions (about 40 s) before the first
    # Spark run rather than inside whichever test happens to start one first.
    archive = class_archive.ensure()
    assert archive.present, f"the class archive could not be built: {archive.error}"
    archive = broker_archive.ensure()  # the Kafka broker's, likewise (about 10 s once)
    assert archive is None or archive.present, f"the broker's class archive could not be built: {archive.error}"
    info = broker_mod.start_embedded(tmp_path_factory.mktemp("session-broker"))
    SHARED_BROKER_PIDS.update(p for p in (info.broker_pid, info.proxy_pid) if p)
    try:
        yield info
    finally:
        broker_mod.stop_embedded(info)


@pytest.fixture(autouse=True)
def _broker_for_test(request):
    """Put the session's broker in the test's runs directory, unless the test takes its own."""
    from lab.broker import shared as shared_broker

    if (request.node.get_closest_marker("own_broker") or "runs_dir" not in request.fixturenames
            or request.node.path.parent.name not in _SHARED_BROKER_DIRS):
        return
    runs = request.getfixturevalue("runs_dir")
    info = request.getfixturevalue("session_broker")
    shared_broker.save_state(runs, info)


def lab_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "lab", *args]


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    env.update(extra)
    return env


def started_pids(root: Path) -> list[tuple[int, float]]:
    """``(pid, started at)`` of every process a run under ``root`` recorded starting.

    Broker and proxy (``broker.json``), each driver attempt, and the process groups
    its descendants started (``driver-child-group``: PySpark's Python daemon, which
    leaves the driver's group, with its workers).
    """
    import json

    found = []
    for events in root.rglob("events.jsonl"):
        for line in events.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("type") in ("driver-start", "driver-ready", "driver-child-group", "broker-restart",
                                 "standby-start") and e.get("pid"):
                found.append((int(e["pid"]), float(e.get("create_time") or e["t"])))
        broker = events.parent / "broker.json"
        if broker.exists():
            info = json.loads(broker.read_text())
            found += [(int(p), broker.stat().st_mtime) for p in (info.get("broker_pid"), info.get("proxy_pid")) if p]
    return found


def still_running(pids: list[tuple[int, float]]) -> list:
    """The processes of ``pids`` still alive: same PID, started no later than recorded (not a reused PID)."""
    import psutil

    left = []
    for pid, started in pids:
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE and p.create_time() <= started + 2:
                left.append(p)
        except psutil.Error:
            continue
    return left


@pytest.fixture(autouse=True, scope="session")
def no_process_left_behind(tmp_path_factory):
    """After the whole suite, nothing the tests started may still run (broker, proxy, drivers, JVMs, PySpark
    daemons and workers, Jupyter): neither a descendant of this process nor any PID a run recorded."""
    import psutil

    yield
    me = psutil.Process()
    base = tmp_path_factory.getbasetemp()
    deadline = time.monotonic() + 15
    while True:
        left = [p for p in me.children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        # A unit test may play a driver in this very process (its timeline then names this PID).
        left += [p for p in still_running(started_pids(base)) if p not in left and p.pid != me.pid]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, "processes left behind: " + "; ".join(f"{p.pid} {' '.join(p.cmdline())[:120]}" for p in left)


#: Collection order: the longest tests first, so that the workers of ``make test`` and ``make test-all``
#: (pytest-xdist) do not end with one of them running a scenario while the other has nothing left; unit tests fill
#: the gaps last.
_ORDER = {"notebooks": 0, "browser": 1, "integration": 2, "unit": 3}
#: The mark each test directory's tests carry whatever their module says: ``make test`` leaves out every test
#: marked so unless it is also ``quick``, and a module that forgot its ``pytestmark`` (test_toy_pipeline.py did)
#: would otherwise slip a real run into it.
_DIRECTORY_MARKS = {"integration": "integration", "notebooks": "notebook", "browser": "browser"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects: it must see these marks
def pytest_collection_modifyitems(config, items):
    tests = ROOT / "tests"
    for item in items:
        top = item.path.relative_to(tests).parts[0] if item.path.is_relative_to(tests) else None
        mark = _DIRECTORY_MARKS.get(top)
        if mark and item.get_closest_marker(mark) is None:
            item.add_marker(mark)
    items.sort(key=lambda item: _ORDER.get(item.path.parent.name, 2))


def pytest_configure(config):
    import signal

    # A shell's background job (`make test &` in a script) starts with SIGINT ignored, and every process it
    # starts inherits that: the tests that interrupt a `lab run` or `lab matrix` with SIGINT then waited out
    # their timeouts (measured: three failures). Ctrl-C's default, restored here, is what users' runs get.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
