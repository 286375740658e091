"""The suite's ``xdist_group`` marks keep a module's tests on one worker under ``--dist loadgroup``.

test_kafka_broker.py (and every module with module-scoped runs) relies on it: its tests share one broker and run in
file order. pytest-xdist 3.8.0 groups a test by suffixing ``item._nodeid``; pytest 9.2.0 moved the id elsewhere and
the marks were silently ignored (measured: the broker module split over two workers, 2 failures in ``make test-all``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_a_grouped_module_runs_on_one_worker(tmp_path):
    module = tmp_path / "test_grouped.py"
    module.write_text(textwrap.dedent("""
        import os
        import pytest

        pytestmark = pytest.mark.xdist_group("one")


        @pytest.mark.parametrize("i", range(8))
        def test_records_its_worker(i):
            with open(os.environ["GROUPS_OUT"], "a") as f:
                f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    """))
    (tmp_path / "test_ungrouped.py").write_text(textwrap.dedent("""
        import pytest


        @pytest.mark.parametrize("i", range(8))
        def test_fills_the_other_worker(i):
            pass
    """))
    env = {**os.environ, "PYTEST_ADDOPTS": "", "GROUPS_OUT": str(tmp_path / "workers.txt")}
    command = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
               "--rootdir", str(tmp_path), str(tmp_path)]
    run = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 8
    assert len(set(workers)) == 1, f"the group ran on {sorted(set(workers))}"
