"""bench/suite_time.py: each tier's split of its test-seconds and the two tiers' ratio, on JUnit XML as pytest writes
it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import bench.suite_time as suite_time
from bench.suite_time import GOAL, compare, junit_tiers, main, read_junit, split

XML = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="0" skipped="0" tests="5" time="120.5"
 timestamp="2026-11-28T09:01:43.878500+00:00" hostname="vm">
<testcase classname="tests.notebooks.test_notebooks" name="test_notebook_runs_headless[06_stateful_streaming]" \
time="100.0" />
<testcase classname="tests.notebooks.test_solutions" name="test_solution_holds[01_receiver_wal]" time="60.0" />
<testcase classname="tests.integration.test_direct" name="test_idempotent_sink_absorbs_replays_and_retries" \
time="70.0" />
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


#: A quick tier's XML: two unit tests and one scenario, in 30 s.
QUICK_XML = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="0" skipped="0" tests="3" time="30.0"
 timestamp="2026-11-28T08:50:00.000000+00:00" hostname="vm">
<testcase classname="tests.integration.test_plain" name="test_commit_order[quick]" time="20.0" />
<testcase classname="tests.unit.test_auditor" name="test_a" time="0.5" />
<testcase classname="tests.unit.test_auditor" name="test_b" time="0.5" />
</testsuite></testsuites>
"""


def test_bare_xmls_are_the_tiers_in_order_and_a_named_one_keeps_its_tier():
    assert junit_tiers(["a.xml"]) == {"test": Path("a.xml")}
    assert junit_tiers(["a.xml", "b.xml"]) == {"test": Path("a.xml"), "test-all": Path("b.xml")}
    assert junit_tiers(["test-all=b.xml"]) == {"test-all": Path("b.xml")}
    assert junit_tiers(["test-all=b.xml", "a.xml"]) == {"test": Path("a.xml"), "test-all": Path("b.xml")}
    assert junit_tiers(["x=y.xml"]) == {"test": Path("x=y.xml")}  # not a tier's name: part of the path


@pytest.mark.parametrize("values, says", [(["a", "b", "c"], "3 XMLs for the 2 tiers"),
                                          (["test=a", "test=b"], "two XMLs for tier test"),
                                          (["test-all=a", "b", "c"], "3 XMLs")])
def test_more_xmls_than_tiers_are_refused(values, says):
    with pytest.raises(ValueError, match=says):
        junit_tiers(values)


def test_the_ratio_is_the_quick_tiers_wall_over_the_full_suites():
    assert compare({"test": {"wall_s": 300.0}, "test-all": {"wall_s": 1800.0}}) == {
        "quick_over_full": 0.167, "goal": GOAL, "meets_goal": True}
    assert compare({"test": {"wall_s": 700.0}, "test-all": {"wall_s": 1800.0}})["meets_goal"] is False
    assert compare({"test": {"wall_s": 600.0}, "test-all": {"wall_s": 1800.0}})["meets_goal"] is True  # a third: met
    assert GOAL == 1 / 3
    for partial in ({"test": {"wall_s": 300.0}}, {"test-all": {"wall_s": 1800.0}},
                    {"test": {"wall_s": 300.0}, "test-all": {"wall_s": None}}):
        assert compare(partial) == {"quick_over_full": None, "goal": GOAL, "meets_goal": None}


def test_the_command_line_writes_each_given_xmls_split_and_the_ratio(tmp_path, capsys):
    (tmp_path / "quick.xml").write_text(QUICK_XML)
    (tmp_path / "j.xml").write_text(XML)
    out = tmp_path / "results" / "suite_time.json"
    assert main(["--junit", str(tmp_path / "quick.xml"), "--junit", str(tmp_path / "j.xml"), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert list(result["tiers"]) == ["test", "test-all"]
    quick, full = result["tiers"]["test"], result["tiers"]["test-all"]
    assert full["wall_s"] == 120.5 and full["measured_at"].startswith("2026-11-28T09:01:43")
    assert full["test_s"] == 230.5 and full["test_s_per_wall_s"] == 1.91 and full["junit"] == "j.xml"
    assert quick["tests"] == 3 and quick["wall_s"] == 30.0 and quick["junit"] == "quick.xml" and quick["exit"] is None
    assert result["measured_at"].startswith("2026-11-28T08:50")  # the earlier run's start
    assert (result["quick_over_full"], result["goal"], result["meets_goal"]) == (0.249, GOAL, True)
    # what bench/README.md's table needs of every results file: the command that made it and its exit status
    assert result["command"].startswith(".venv/bin/python bench/suite_time.py --junit ") and result["exit_status"] == 0
    assert "load_average" not in result["machine"]  # the machine's load now says nothing of those runs
    printed = capsys.readouterr().out
    assert "notebooks" in printed and "test-all:" in printed and "0.249 of the wall time" in printed
    assert main(["--junit", f"test-all={tmp_path / 'j.xml'}", "--out", str(out), "--commit", "no-such-revision"]) == 0
    result = json.loads(out.read_text())
    assert result["commit"] is None  # an unknown revision is not passed off as one
    assert list(result["tiers"]) == ["test-all"] and result["quick_over_full"] is None and result["meets_goal"] is None


def test_a_missing_xml_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--junit", str(tmp_path / "nope.xml")])
    assert "nope.xml: no such file" in capsys.readouterr().err


def test_a_third_xml_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--junit", "a.xml", "--junit", "b.xml", "--junit", "c.xml", "--out", str(tmp_path / "x.json")])
    assert "3 XMLs for the 2 tiers" in capsys.readouterr().err


def fake_make(calls: list, exits: dict):
    """A stand-in for ``subprocess.call`` running ``make TARGET TEST_ARGS=--junitxml=X``: writes X, returns the target's
    exit."""
    def call(cmd, cwd=None):
        calls.append(cmd)
        xml = cmd[-1].split("--junitxml=", 1)[1]
        if exits.get(cmd[1], 0) != 2:  # 2: make stopped before pytest (a prerequisite failed)
            Path(xml).write_text(QUICK_XML if cmd[1] == "test" else XML)
        return exits.get(cmd[1], 0)
    return call


def test_by_default_make_test_then_make_test_all_run_each_with_its_own_xml(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(suite_time.subprocess, "call", fake_make(calls, {}))
    monkeypatch.setattr(suite_time, "core_seconds", lambda: 0.2)
    out = tmp_path / "suite_time.json"
    assert main(["--out", str(out)]) == 0
    assert [c[:2] for c in calls] == [["make", "test"], ["make", "test-all"]]
    assert all(c[2].startswith("TEST_ARGS=--junitxml=") for c in calls) and calls[0][2] != calls[1][2]
    result = json.loads(out.read_text())
    assert result["tiers"]["test"]["command"] == ["make", "test"] and result["tiers"]["test"]["exit"] == 0
    assert (result["tiers"]["test-all"]["command"] == ["make", "test-all"]
            and result["tiers"]["test-all"]["junit"] is None)
    assert all(t["command_wall_s"] >= 0 for t in result["tiers"].values())
    assert result["quick_over_full"] == 0.249 and result["meets_goal"] is True
    assert result["command"] == ".venv/bin/python bench/suite_time.py --out " + str(out) and result["exit_status"] == 0
    assert result["machine"]["core_seconds_before"] == 0.2 and "load_average_at_end" in result["machine"]


def test_a_failing_tier_is_recorded_and_its_status_returned(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(suite_time.subprocess, "call", fake_make(calls, {"test": 1}))
    monkeypatch.setattr(suite_time, "core_seconds", lambda: 0.2)
    out = tmp_path / "suite_time.json"
    assert main(["--out", str(out)]) == 1
    result = json.loads(out.read_text())
    assert len(calls) == 2 and result["tiers"]["test"]["exit"] == 1 and result["exit_status"] == 1


def test_a_tier_that_wrote_no_xml_stops_the_measurement(tmp_path, monkeypatch, capsys):
    calls: list = []
    monkeypatch.setattr(suite_time.subprocess, "call", fake_make(calls, {"test": 2}))
    monkeypatch.setattr(suite_time, "core_seconds", lambda: 0.2)
    out = tmp_path / "suite_time.json"
    assert main(["--out", str(out)]) == 2
    assert len(calls) == 1 and not out.exists()
    assert "make test wrote no JUnit XML (exit 2)" in capsys.readouterr().err


def test_one_tier_alone(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(suite_time.subprocess, "call", fake_make(calls, {}))
    monkeypatch.setattr(suite_time, "core_seconds", lambda: 0.2)
    out = tmp_path / "suite_time.json"
    assert main(["--tier", "test", "--out", str(out)]) == 0
    assert [c[:2] for c in calls] == [["make", "test"]]
    assert list(json.loads(out.read_text())["tiers"]) == ["test"]


def test_a_given_pytest_command_runs_with_the_xml_added_and_its_tests_are_split(tmp_path):
    (tmp_path / "test_tiny.py").write_text("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    out = tmp_path / "suite_time.json"
    assert main(["--out", str(out), "--", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 str(tmp_path / "test_tiny.py")]) == 0
    result = json.loads(out.read_text())
    (tier,) = result["tiers"].values()
    assert list(result["tiers"]) == ["command"] and result["exit_status"] == 0
    assert tier["tests"] == 2 and tier["exit"] == 0 and tier["junit"] is None
    assert tier["command"][-1].endswith("test_tiny.py") and tier["wall_s"] is not None
    assert result["quick_over_full"] is None
