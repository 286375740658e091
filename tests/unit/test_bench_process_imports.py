"""bench/process_imports.py: a process's imports timed inside a fresh interpreter."""

import sys
from pathlib import Path

import pytest

from bench.process_imports import PROCESSES, seconds


def test_the_time_is_measured_inside_a_fresh_interpreter(tmp_path):
    (tmp_path / "slow_module.py").write_text("import time\ntime.sleep(0.2)\n")
    assert 0.2 <= seconds(Path(sys.executable), tmp_path, "import slow_module") < 5


def test_a_failing_import_names_its_error(tmp_path):
    with pytest.raises(RuntimeError, match="ModuleNotFoundError.*no_such_module_here"):
        seconds(Path(sys.executable), tmp_path, "import no_such_module_here")


def test_every_module_a_process_is_timed_importing_exists_in_the_checkout():
    root = Path(__file__).resolve().parents[2]
    for name, code in PROCESSES.items():
        assert seconds(Path(sys.executable), root, code) > 0, name
