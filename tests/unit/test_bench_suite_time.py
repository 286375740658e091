"""bench/suite_time.py's split of a suite's test-seconds, on JUnit XML as pytest writes it."""

from __future__ import annotations

import json

import pytest

from bench.suite_time import main, read_junit, split

XML = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="0" skipped="0" tests="5" time="120.5"
 timestamp="2026-11-28T09:01:43.878500+00:00" hostname="vm">
<testcase classname="tests.notebooks.test_notebooks" name="test_notebook_runs_headless[06_stateful_streaming]" time="100.0" />
<testcase classname="tests.notebooks.test_solutions" name="test_solution_holds[01_receiver_wal]" time="60.0" />
<testcase classname="tests.integration.test_direct" name="test_idempotent_sink_absorbs_replays_and_retries" time="70.0" />
<testcase classname="tests.unit.test_auditor" name="test_a" time="0.5" />
<testcase classname="tests.unit.test_auditor" name="test_b" />
</testsuite></testsuites>
"""


def test_read_junit_gives_each_case_and_the_runs_wall_time_and_start(tmp_path):
    (tmp_path / "j.xml").write_text(XML)
    cases, wall, started = read_junit(tmp_path / "j.xml")
    assert wall == 120.5 and started == "2026-11-28T09:01:43.878500+00:00"
    assert cases[0] == ("tests.notebooks.test_notebooks", "test_notebook_runs_headless[06_stateful_streaming]", 100.0)
    assert cases[-1][2] == 0.0  # a case without a time counts nothing


def test_split_sums_kinds_and_files_with_their_shares():
    cases = [("tests.notebooks.test_notebooks", "a", 100.0), ("tests.notebooks.test_solutions", "b", 60.0),
             ("tests.integration.test_direct", "c", 30.0), ("tests.unit.test_auditor", "d", 8.0),
             ("tests.unit.test_auditor", "e", 2.0)]
    out = split(cases, top=2)
    assert out["tests"] == 5 and out["test_s"] == 200.0
    assert out["kinds"] == {"notebooks": {"test_s": 160.0, "share": 0.8, "tests": 2},
                            "integration": {"test_s": 30.0, "share": 0.15, "tests": 1},
                            "unit": {"test_s": 10.0, "share": 0.05, "tests": 2}}
    assert list(out["kinds"]) == ["notebooks", "integration", "unit"]  # slowest first
    assert out["files"]["tests/unit/test_auditor.py"] == {"test_s": 10.0, "share": 0.05, "tests": 2}
    assert out["slowest"] == [{"test": "tests/notebooks/test_notebooks.py::a", "s": 100.0},
                              {"test": "tests/notebooks/test_solutions.py::b", "s": 60.0}]


def test_a_case_outside_the_test_directories_is_other():
    out = split([("conftest", "x", 1.0), ("tests.data.test_x", "y", 1.0)])
    assert out["kinds"] == {"other": {"test_s": 2.0, "share": 1.0, "tests": 2}}


def test_an_empty_run_has_no_shares():
    assert split([]) == {"tests": 0, "test_s": 0, "kinds": {}, "files": {}, "slowest": []}


def test_the_command_line_writes_the_split_of_a_given_xml(tmp_path, capsys):
    (tmp_path / "j.xml").write_text(XML)
    out = tmp_path / "results" / "suite_time.json"
    assert main(["--junit", str(tmp_path / "j.xml"), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["wall_s"] == 120.5 and result["measured_at"].startswith("2026-11-28T09:01:43")
    assert result["test_s"] == 230.5 and result["test_s_per_wall_s"] == 1.91 and result["junit"] == "j.xml"
    assert "load_average" not in result["machine"]  # the machine's load now says nothing of that run
    assert "notebooks" in capsys.readouterr().out
    assert main(["--junit", str(tmp_path / "j.xml"), "--out", str(out), "--commit", "no-such-revision"]) == 0
    assert json.loads(out.read_text())["commit"] is None  # an unknown revision is not passed off as one


def test_a_missing_xml_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--junit", str(tmp_path / "nope.xml")])
    assert "nope.xml: no such file" in capsys.readouterr().err


def test_a_given_pytest_command_runs_with_the_xml_added_and_its_tests_are_split(tmp_path):
    import sys

    (tmp_path / "test_tiny.py").write_text("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    out = tmp_path / "suite_time.json"
    assert main(["--out", str(out), "--", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 str(tmp_path / "test_tiny.py")]) == 0
    result = json.loads(out.read_text())
    assert result["tests"] == 2 and result["exit"] == 0 and result["junit"] is None
    assert result["command"][-1].endswith("test_tiny.py") and result["wall_s"] is not None
