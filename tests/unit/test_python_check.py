"""The interpreter check the Makefile runs before a venv is made (lab/host/python_check.py)."""

import subprocess
import sys
from pathlib import Path

from lab.host.python_check import supported_range, verdict

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "lab" / "host" / "python_check.py"


def test_the_range_is_read_from_pyproject():
    low, high = supported_range((ROOT / "pyproject.toml").read_text())
    assert low <= sys.version_info[:2] < high, "the interpreter running the tests is outside the range it claims"
    assert supported_range('x = 1\nrequires-python = ">=3.11,<3.14"\n') == ((3, 11), (3, 14))


def test_an_interpreter_outside_the_range_gets_one_line_naming_it_the_range_and_the_way_out():
    for version in ((3, 9, 6), (3, 14, 0)):
        line = verdict(version, "/usr/bin/python3", (3, 11), (3, 14))
        assert line is not None and "\n" not in line
        assert f"Python {'.'.join(map(str, version))} at /usr/bin/python3" in line
        assert "3.11-3.13" in line and "make demo PYTHON=python3.11" in line
    assert verdict((3, 13, 1), "x", (3, 11), (3, 14)) is None
    assert verdict((3, 11, 0), "x", (3, 11), (3, 14)) is None


def test_the_script_runs_as_the_makefile_runs_it():
    done = subprocess.run([sys.executable, str(SCRIPT), str(ROOT / "pyproject.toml")], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    # it imports nothing of the lab: an interpreter without the lab's packages can run it
    code = compile(SCRIPT.read_text(), str(SCRIPT), "exec")
    assert not [n for n in code.co_names if n == "lab"]


def test_lab_doctor_checks_the_range_pyproject_claims(monkeypatch):
    from collections import namedtuple

    from lab import doctor

    assert doctor.check_python().ok
    Version = namedtuple("Version", "major minor micro releaselevel serial")
    monkeypatch.setattr(doctor.sys, "version_info", Version(3, 14, 0, "final", 0))
    check = doctor.check_python()
    assert not check.ok and "3.11-3.13" in check.fix and "PYTHON=python3.11" in check.fix
