"""docs/reference-tables.md against the code's own catalogues: whatever the code has, the reference's tables name.

No JVM, no broker: the report's keys come from the real report code fed a small
ledger, a SQLite sink and a stand-in for the topic's final read.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import json
import os
import re
from types import SimpleNamespace

import numpy as np
import pytest

from lab.audit.auditor import Audit, LedgerView, audit_core
from lab.audit.expectations import EXPECTATIONS
from lab.audit.ledger import LEDGER_FILE, Ledger, LedgerEntry
from lab.audit.topic import TopicAudit
from lab.config import RunConfig
from lab.faults.catalogue import FAULTS, POINTS
from lab.kafka import tools as kafka_tools
from lab.registry import PIPELINES
from lab.run.result import RunResult, build_report, final_audit
from lab.sinks.spec import sink_spec_for_run
from lab.sinks.topic import SNAPSHOT_FILE, output_topic
from tests.conftest import ROOT

REFERENCE_TABLES = ROOT / "docs" / "reference-tables.md"
TEXT = REFERENCE_TABLES.read_text()
TICKED = re.compile(r"`([^`]+)`")


# -- reading the reference tables -------------------------------------------------

def section(title: str) -> str:
    """The text under the heading that contains ``title``, up to the next heading of the same or a higher level."""
    lines = TEXT.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(#+) ", line)
        if m and title in line:
            level = len(m.group(1))
            body = []
            for nxt in lines[i + 1:]:
                h = re.match(r"^(#+) ", nxt)
                if h and len(h.group(1)) <= level:
                    break
                body.append(nxt)
            return "\n".join(body)
    raise AssertionError(f"docs/reference-tables.md has no heading with {title!r}")


def tables(text: str) -> list[list[list[str]]]:
    """Every Markdown table in ``text``: a list of rows (the header first), each a list of cells."""
    out, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                current.append(cells)
        elif current:
            out.append(current)
            current = []
    return out


def first_column(text: str) -> set[str]:
    """Every backticked name in the first cell of any table row in ``text``."""
    return {name for table in tables(text) for row in table[1:] for name in TICKED.findall(row[0])}


def grid(text: str, corner: str) -> dict[str, set[str]]:
    """The ✓ grid whose header starts with ``corner``: row name -> the column names ticked."""
    for table in tables(text):
        if table[0][0] == corner:
            columns = [TICKED.findall(c)[0] for c in table[0][1:]]
            return {TICKED.findall(row[0])[0]: {col for col, cell in zip(columns, row[1:]) if cell == "✓"}
                    for row in table[1:]}
    raise AssertionError(f"no table with the header {corner!r}")


# -- faults and named points ------------------------------------------------------

def test_every_fault_kind_is_in_the_fault_table():
    assert first_column(section("Fault kinds")) == set(FAULTS)


def test_every_named_point_is_in_the_point_table():
    assert first_column(section("Named points")) == set(POINTS)


def test_each_fault_tables_options_are_the_catalogues():
    for table in tables(section("Fault kinds")):
        header = table[0]
        for row in table[1:]:
            kind = TICKED.findall(row[0])[0]
            assert row[header.index("by")] == FAULTS[kind].by, kind
            options = set(TICKED.findall(row[header.index("options")]))
            assert options == set(FAULTS[kind].options), kind
            button = FAULTS[kind].button
            assert row[header.index("panel button")] == (button[0] if button else "none"), kind


def test_the_per_pipeline_grids_are_the_catalogue():
    text = section("Faults and named points per pipeline")
    faults, points = grid(text, "fault"), grid(text, "named point")
    assert set(faults) == set(FAULTS) and set(points) == set(POINTS)
    for pipeline in PIPELINES:
        assert {k for k, ticked in faults.items() if pipeline in ticked} == set(PIPELINES[pipeline].faults), pipeline
        assert {p for p, ticked in points.items() if pipeline in ticked} == set(PIPELINES[pipeline].points), pipeline
    assert set().union(*faults.values(), *points.values()) <= set(PIPELINES)
    assert first_column(text) >= set(PIPELINES)  # the registry's table: every pipeline


def test_the_plan_examples_parse_and_show_every_fault_kind():
    from lab.faults.plan import parse_fault_plan

    examples = [TICKED.findall(row[0])[0] for table in tables(section("2. Fault plans")) for row in table[1:]
                if table[0][0] == "plan"]
    assert examples
    kinds = set()
    for plan in examples:
        kinds.update(f.kind for f in parse_fault_plan(plan))
    assert kinds == set(FAULTS)  # an example of every kind


# -- the report ---------------------------------------------------------------------

def small_audit(**counts) -> Audit:
    base = {f.name: 0 for f in dataclasses.fields(Audit) if f.name not in ("windows", "table")}
    return Audit(**{**base, **counts})


def test_every_count_of_a_constructed_audit_is_in_the_report_tables():
    led = LedgerView(seq=np.array([0, 1, 2], dtype=np.int64), event_id=np.array(["a", "b", "c"], dtype=object),
                     partition=np.array([0, 0, 0], dtype=np.int64), kafka_offset=np.array([0, 1, 2], dtype=np.int64),
                     failed=1, unknown=1)
    audit = audit_core(led, np.array([0, 0, 7], dtype=np.int64), np.array(["a", "a", "x"], dtype=object),
                       positions={0: 2}, final=True)
    keys = first_column(section("1. The run report"))
    missing = set(audit.counts()) - keys
    assert not missing, f"Audit.counts() keys missing from docs/reference-tables.md: {sorted(missing)}"


def test_every_guarantee_the_audit_can_name_is_in_the_rule_table():
    names = {small_audit(unseen=u, lost=l, duplicated=d, unexpected=x).guarantee
             for u, l, d, x in itertools.product((0, 1), repeat=4)}
    assert names <= set(TICKED.findall(section("The guarantee"))), names


def test_every_matrix_expectation_is_in_the_expectation_table():
    assert first_column(section("Matrix expectations")) == set(EXPECTATIONS)


@pytest.fixture
def final_read(monkeypatch):
    """``topic_copies`` answering from a dict: the final read without a broker."""
    copies: dict[str, list] = {}
    monkeypatch.setattr(kafka_tools, "topic_copies", lambda *a, **k: dict(copies))
    return copies


def make_run(run_dir, config: RunConfig, copies: dict) -> dict:
    """One run's report, built by the report code from a small ledger (every send status) and an empty sink."""
    run_dir.mkdir(exist_ok=True)
    (run_dir / "config.json").write_text(config.to_json())
    sink_spec_for_run(config.sink, run_dir, None).save(run_dir)
    ledger = Ledger(run_dir / LEDGER_FILE)
    ledger.record([
        LedgerEntry(0, "e0", "k0", "acked", 0, 0, None, 1.0, 1.1, 1000),
        LedgerEntry(1, "e1", "k1", "acked", None, None, None, 1.0, 1.1, 1000),  # acknowledged without an offset
        LedgerEntry(2, "e2", "k0", "failed", None, None, "x", 1.0, 1.1, 1000),
        LedgerEntry(3, "e3", "k1", "unknown", None, None, "x", 1.0, 1.1, 1000),
        LedgerEntry(4, "e4", "k0", "aborted", 0, 1, None, 1.0, 1.1, 1000),
    ])
    ledger.close()
    copies.clear()
    copies.update({"e0": [2, 0, 0], "e1": [1, 0, 2], "e3": [1, 0, 3], "e4": [1, 0, 1]})
    broker = SimpleNamespace(bootstrap="127.0.0.1:9", external=False, product="apache-kafka", version="4.1.1")
    audit, source = final_audit(run_dir, config, broker, {0: 4})
    result = RunResult(config=config, run_dir=run_dir, audit=audit, timings={"total_s": 1.0}, faults_fired=[],
                       restarts=0, drained=True, batches=0)
    events = [{"type": "kafka-reader", "reader": "spark"}, {"type": "final-stop", "how": "graceful"}]
    return {**build_report(result, events), **source}  # as the supervisor writes report.json


def test_every_top_level_key_of_a_report_is_in_the_report_tables(tmp_path, final_read):
    reports = [
        make_run(tmp_path / "plain", RunConfig(pipeline="plain", topic="events.plain"), final_read),
        make_run(tmp_path / "window", RunConfig(pipeline="receiver", query="window-count", topic="events.w"),
                 final_read),
    ]
    eos = tmp_path / "kafka-eos"
    eos.mkdir()  # the output topic's two views, as the run's final audit saves them
    views = {level: {"seq": [0, 0], "event_id": ["e0", "e0"]} for level in ("read_committed", "read_uncommitted")}
    (eos / SNAPSHOT_FILE).write_text(json.dumps({"topic": output_topic("events.eos"), "views": views}))
    reports.append(make_run(eos, RunConfig(pipeline="kafka-eos", sink="topic", topic="events.eos"), final_read))

    keys = set().union(*reports)
    assert {"aborted_in_topic", "windows", "overcount", "read_uncommitted_records", "topic"} <= keys  # all paths ran
    documented = first_column(section("1. The run report"))
    missing = keys - documented
    assert not missing, f"report.json keys missing from docs/reference-tables.md: {sorted(missing)}"
    topic_keys = {f"topic.{f.name}" for f in dataclasses.fields(TopicAudit)}
    assert set(reports[0]["topic"]) == {f.name for f in dataclasses.fields(TopicAudit)}
    assert topic_keys <= documented, sorted(topic_keys - documented)


def test_every_setting_and_timing_is_in_the_outline():
    outline = set(TICKED.findall(section("`settings` and `timings` in outline")))
    configs = [RunConfig(pipeline=p) for p in PIPELINES] + [
        RunConfig.of(pipeline="structured", query="window-count", late_fraction=0.1),
        RunConfig.of(pipeline="plain", nodes=3),
    ]
    settings = set().union(*(c.settings for c in configs)) | {"kafka_reader", "kafka_reader_asked"}
    assert not settings - outline, sorted(settings - outline)
    source = (ROOT / "lab" / "run" / "supervisor.py").read_text()
    timings = set(re.findall(r"_times(?:\[|\.setdefault\()\"(\w+)\"", source))
    assert timings and not timings - outline, sorted(timings - outline)


# -- the command line and the environment ---------------------------------------------

def test_every_command_and_flag_of_the_cli_is_in_the_command_tables():
    from lab.cli import _parser

    text = section("4. Command line")
    sub = next(a for a in _parser()._actions if a.choices and isinstance(a.choices, dict))
    for name, parser in sub.choices.items():
        assert f"`lab {name}" in text, name
        for action in parser._actions:
            for flag in action.option_strings:
                if flag in ("-h", "--help"):
                    continue
                assert re.search(rf"`{re.escape(flag)}(?![\w-])", text), f"lab {name} {flag}"
            if not action.option_strings and action.choices:  # start|stop|status
                assert all(re.search(rf"\b{c}\b", text) for c in action.choices), name


def lab_variables_read_by_the_code() -> dict[str, set[str]]:
    """Every string literal in lab/ that is exactly a ``LAB_*`` name, with the files it stands in."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "lab").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        catalogue = {id(n) for a in tree.body if isinstance(a, (ast.Assign, ast.AnnAssign))
                     and "VARIABLES" in ast.unparse(a.targets[0] if isinstance(a, ast.Assign) else a.target)
                     for n in ast.walk(a)}  # lab.host.env.VARIABLES names every one: not a read
        for node in ast.walk(tree):
            if id(node) in catalogue:
                continue
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and re.fullmatch(r"LAB_[A-Z_]+", node.value)):
                found.setdefault(node.value, set()).add(path.relative_to(ROOT).as_posix())
    return found


def test_the_catalogue_holds_every_lab_variable_the_code_reads_and_no_other():
    from lab.host.env import VARIABLES

    variables = lab_variables_read_by_the_code()
    assert variables, "the scan found no LAB_* literal in lab/: the scan is broken"
    assert not set(variables) - set(VARIABLES), (
        f"read, not in lab.host.env.VARIABLES: {sorted(set(variables) - set(VARIABLES))}")
    assert not set(VARIABLES) - set(variables), (
        f"in the catalogue, read nowhere: {sorted(set(VARIABLES) - set(variables))}")


def test_the_environment_table_is_the_catalogue():
    """Name, the files that read it and meaning, row by row in the catalogue's order."""
    from lab.host.env import VARIABLES

    [table] = [t for t in tables(section("Environment variables")) if t[0][0] == "variable"]
    rows = {TICKED.findall(r[0])[0]: r for r in table[1:]}
    assert list(rows) == list(VARIABLES), (
        "docs/reference-tables.md's environment table lists the catalogue, in its order")
    read_by = lab_variables_read_by_the_code()
    for name, var in VARIABLES.items():
        _, files, meaning = rows[name]
        assert meaning == var.meaning, f"{name}: the table says {meaning!r}, the catalogue {var.meaning!r}"
        assert set(TICKED.findall(files)) == read_by[name], (
            f"{name} is read by {sorted(read_by[name])}, the table says {files}")


def test_the_catalogue_defaults_are_the_code_defaults():
    from lab.config import make_config
    from lab.host.env import VARIABLES
    from lab.host.start_tuning import StartTuning

    clean = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    old = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(clean)
        cfg = make_config()
    finally:
        os.environ.clear()
        os.environ.update(old)
    on = {True: "on", False: "off"}
    tuning = StartTuning.from_env({})
    code = {"LAB_SPARK_MASTER": cfg.spark.spark_master, "LAB_KAFKA_READER": cfg.spark.kafka_reader,
            "LAB_BROKER_NODES": str(cfg.cluster.nodes), "LAB_RESTART_DELAY": f"{cfg.restart_delay_s:g}",
            "LAB_DEADLINE": f"{cfg.deadline_s:g}", "LAB_SPARK_UI": "1" if cfg.spark.spark_ui else "0",
            "LAB_CLASS_ARCHIVE": on[tuning.class_archive], "LAB_DRIVER_JVM_OPTIONS": tuning.jvm_options,
            "LAB_WARM_UP": tuning.warm_up, "LAB_STANDBY": tuning.standby, "LAB_WORKER_DAEMON": tuning.worker_daemon,
            "LAB_WORKER_PRELOAD": on[tuning.worker_preload], "LAB_FLINK_JVM_OPTIONS": tuning.flink_jvm_options,
            "LAB_EXECUTOR_JVM_OPTIONS": tuning.executor_jvm_options, "LAB_QUICK_STOP": on[tuning.quick_stop],
            "LAB_TASK_FETCH_WAIT_MS": str(tuning.task_fetch_wait_ms), "LAB_BROKER_ARCHIVE": on[tuning.broker_archive],
            "LAB_CODEGEN": on[tuning.codegen]}
    wrong = {name: (VARIABLES[name].default, value) for name, value in code.items() if VARIABLES[name].default != value}
    assert not wrong, f"catalogue default against the code's (catalogue, code): {wrong}"
