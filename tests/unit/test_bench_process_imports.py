"""bench/process_imports.py: a process's imports timed inside a fresh interpreter."""

import sys
from pathlib import Path

import pytest

from bench.process_imports import PROCESSES, driver_imports, seconds


def test_the_time_is_measured_inside_a_fresh_interpreter(tmp_path):
    (tmp_path / "slow_module.py").write_text("import time\ntime.sleep(0.2)\n")
    assert 0.2 <= seconds(Path(sys.executable), tmp_path, "import slow_module") < 5


def test_a_failing_import_names_its_error(tmp_path):
    with pytest.raises(RuntimeError, match="ModuleNotFoundError.*no_such_module_here"):
        seconds(Path(sys.executable), tmp_path, "import no_such_module_here")


def test_every_module_a_process_is_timed_importing_exists_in_the_checkout():
    root = Path(__file__).resolve().parents[2]
    for name in PROCESSES:
        assert seconds(Path(sys.executable), root, PROCESSES[name](root)) > 0, name


def test_the_driver_imports_are_those_its_run_function_makes_before_the_session():
    root = Path(__file__).resolve().parents[2]
    code = driver_imports(root)
    assert (PROCESSES["driver (structured, before its JVM)"] is driver_imports
            and code.startswith("import lab.pipelines.driver"))
    # run() imports these at its top (lab/pipelines/structured/pipeline.py); the bench must time the same statements
    assert "from lab.pipelines.structured.kafka_input import kafka_event_stream" in code
    assert "from lab.pipelines.shared.kafka_reader import resolve_reader" in code
    assert "from lab.spark.session import " in code and "spark_session" in code
    assert "spark_session(" not in code, "only import statements, nothing that starts the session"


def test_a_tree_without_the_run_function_is_named_in_the_error(tmp_path):
    (tmp_path / "lab" / "pipelines").mkdir(parents=True)
    (tmp_path / "lab" / "pipelines" / "structured").mkdir(parents=True)
    (tmp_path / "lab" / "pipelines" / "structured" / "pipeline.py").write_text("def main():\n    import os\n")
    with pytest.raises(RuntimeError, match="pipeline.py: no function run"):
        driver_imports(tmp_path)
