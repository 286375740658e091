"""Shared fixtures: isolated runs directory, process-leak checks."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    """Each test gets its own runs directory; no LAB_* setting leaks in from the caller's shell."""
    for var in ("LAB_KAFKA_BOOTSTRAP", "LAB_SINK_URL", "LAB_SPARK_MASTER", "LAB_JAVA_HOME", "LAB_KAFKA_READER"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "runs"
    monkeypatch.setenv("LAB_RUNS_DIR", str(path))
    return path


def lab_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "lab", *args]


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    env.update(extra)
    return env


@pytest.fixture(autouse=True, scope="session")
def no_process_left_behind():
    """After the whole suite, nothing the tests started may still run (broker, proxy, drivers, JVMs, Jupyter)."""
    import psutil

    yield
    me = psutil.Process()
    deadline = time.monotonic() + 15
    while True:
        left = [p for p in me.children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, "processes left behind: " + "; ".join(f"{p.pid} {' '.join(p.cmdline())[:120]}" for p in left)
