"""The semantics grid: deployments by failures, each cell the measured outcome of its runs, never the claim."""

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from lab.config import make_config
from lab.faults.catalogue import FAULT_KINDS
from lab.matrix import semantics as sg
from lab.matrix.report import matrix_view, read_results

DATA = Path(__file__).resolve().parents[1] / "data"


def row(name, pipeline, sink, faults, expect, seed=1, lost=0, duplicated=0, unseen=0, settings=None, **extra):
    """One results row as ``lab matrix`` writes it; the stored guarantee says exactly-once whatever the counts."""
    return {"key": f"{name}-{seed}", "name": name, "expect": expect, "verdict": "as expected",
            "guarantee": "exactly-once", "pipeline": pipeline, "sink": sink, "faults": faults, "seed": seed,
            "acked": 1000, "lost": lost, "duplicated": duplicated, "unexpected": 0, "unseen": unseen,
            "source_duplicates": extra.pop("source_duplicates", 0),
            "settings": json.dumps(settings or {}), **extra}


def settings(**params):
    cfg = make_config(**params)
    return cfg.settings


@pytest.fixture
def constructed():
    """A table with several seeds in one cell, a mismatch, a cluster row, a fault-free row and a combined plan."""
    recv = settings(pipeline="receiver", ack="stored", wal="on")
    direct = settings(pipeline="direct", offsets="sink", sink="transactional")
    cluster = settings(pipeline="plain", nodes=3, acks="all", min_insync=2, unclean="on")
    window = settings(pipeline="structured", query="window-count", sink="transactional")
    plain = settings(pipeline="plain", idempotence=False)
    return pd.DataFrame([
        row("recv wal", "receiver", "append", "driver-crash@batch=3:mid-output", "no-loss", seed=1, duplicated=40,
            settings=recv),
        row("recv wal", "receiver", "append", "driver-crash@batch=3:mid-output", "no-loss", seed=2, duplicated=35,
            settings=recv),
        row("direct sink txn", "direct", "transactional", "driver-crash@batch=2:mid-output", "exactly-once",
            settings=direct),
        # the claim is wrong: the counts say 7 events lost
        row("direct sink txn, wrong", "direct", "transactional", "driver-crash@batch=2:after-output-before-commit",
            "exactly-once", seed=2, lost=7, settings=direct),
        row("cluster safe", "plain", "append", "follower-lag@at=2s:for=8s,leader-crash@at=7s:for=3s", "acked-kept",
            settings=cluster, topic_lost=0),
        row("late", "structured", "transactional", float("nan"), "exactly-once", settings=window),
        row("both", "plain", "append", "ack-loss@at=1s:count=4,driver-crash@at=3s", "source-duplicates",
            duplicated=4, source_duplicates=4, settings=plain, html="runs/gone/scenario.html"),
    ])


def test_every_fault_kind_has_a_failure_column():
    assert set(sg.FAILURE_OF_KIND) == set(FAULT_KINDS)
    assert set(sg.FAILURE_OF_KIND.values()) <= set(sg.FAILURES)


@pytest.mark.parametrize("plan, column", [
    ("", "no fault"), (None, "no fault"), (float("nan"), "no fault"),
    ("driver-crash@batch=2:mid-output", "driver failure"),
    ("executor-crash@batch=3", "worker failure"),
    ("task-failure@batch=2", "task failure"),
    ("ack-loss@at=1s:count=4", "producer failure"),
    ("txn-abort@at=2s:count=3", "producer failure"),
    ("broker-outage@at=4s:for=3s", "broker failure"),
    ("follower-lag@at=2s:for=8s,leader-crash@at=7s:for=3s", "broker failure"),
    ("ack-loss@at=1s:count=4,driver-crash@at=3s", "driver failure + producer failure"),
    ("no-such-fault@at=1s", sg.UNREADABLE_PLAN),
])
def test_the_failure_column_comes_from_the_parsed_plan(plan, column):
    assert sg.failure(plan) == column


@pytest.mark.parametrize("params, label", [
    (dict(pipeline="receiver", ack="auto", wal="off"), "receiver, unreliable ack, no WAL"),
    (dict(pipeline="receiver", ack="stored", wal="on"), "receiver, reliable ack, WAL"),
    (dict(pipeline="receiver", ack="stored", wal="off", replication=2),
     "receiver, reliable ack, no WAL, replication 2"),
    (dict(pipeline="direct", offsets="checkpoint", sink="append"), "direct, offsets in checkpoint, append sink"),
    (dict(pipeline="direct", offsets="sink", sink="transactional"), "direct, offsets in the sink's transaction"),
    (dict(pipeline="structured", sink="idempotent"), "structured, idempotent sink"),
    (dict(pipeline="structured", query="window-count", sink="append"), "structured window-count, append sink"),
    (dict(pipeline="structured", query="dedupe", sink="append", idempotence=False),
     "structured dedupe, append sink, producer without idempotence"),
    (dict(pipeline="plain", commit="after-output"), "plain consumer, commit after output, append sink"),
    (dict(pipeline="plain", nodes=3, acks="1", idempotence=False, unclean="on"),
     "Kafka cluster acks=1, min.insync=1, unclean=on"),
    (dict(pipeline="kafka-eos"), "kafka-eos, offsets in the producer's transaction"),
])
def test_the_deployment_label_comes_from_the_settings(params, label):
    cfg = make_config(**params)
    assert sg.deployment(cfg.pipeline, cfg.sink, cfg.settings) == label
    assert sg.deployment(cfg.pipeline, cfg.sink, json.dumps(cfg.settings)) == label  # as a results table holds them


def test_without_settings_the_label_is_pipeline_and_sink():
    assert sg.deployment("plain", "append", float("nan")) == "plain consumer, append sink"
    assert sg.deployment("receiver", None, None) == "receiver"


def test_the_committed_table_with_a_wrong_row():
    view = matrix_view(read_results(DATA / "matrix_with_wrong_row.csv"))
    grid = sg.build_grid(view, DATA)
    assert grid.deployments == ("plain consumer, append sink", "plain consumer, idempotent sink")
    assert grid.failures == ("driver failure",)
    append = grid.cell("plain consumer, append sink", "driver failure")
    assert len(append.runs) == 2 and not append.mismatch and append.as_expected == 2
    assert append.measured == "at-most-once"  # the worse of at-least-once and at-most-once
    assert append.expected == ("at-least-once", "loss")
    wrong = grid.cell("plain consumer, idempotent sink", "driver failure")
    # the row claims exactly-once in its guarantee column too; its counts (5 duplicated) decide
    assert wrong.mismatch and wrong.measured == "at-least-once" and (wrong.as_expected, wrong.judged) == (1, 2)
    assert wrong.lines()[0] == "✘ at-least-once" and "1 of 2 as expected" in wrong.lines()
    assert [r.duplicated for r in wrong.runs] == [0, 5]
    frame = grid.frame()
    assert frame.shape == (2, 1) and frame.iloc[1, 0].startswith("✘ at-least-once")
    table = sg.grid_html(grid).split("</table>")[0]
    assert table.count("<b>✘ ") == 1 and table.count("✘ run 2") == 1  # the cell's headline, and which run


def test_a_constructed_table(constructed):
    grid = sg.build_grid(matrix_view(constructed), DATA)
    assert grid.failures == ("driver failure", "broker failure", "no fault", "driver failure + producer failure")
    assert grid.deployments[0] == "receiver, reliable ack, WAL"  # receivers first, the cluster last
    assert grid.deployments[-1] == "Kafka cluster acks=all, min.insync=2, unclean=on"
    wal = grid.cell("receiver, reliable ack, WAL", "driver failure")
    assert [r.seed for r in wal.runs] == [1, 2] and wal.measured == "at-least-once"
    assert wal.lines() == ["at-least-once", "expected no-loss", "lost 0, 0 · dup 40, 35", "2 of 2 as expected"]
    txn = grid.cell("direct, offsets in the sink's transaction", "driver failure")
    assert txn.mismatch and txn.measured == "at-most-once" and txn.as_expected == 1
    cluster = grid.cell("Kafka cluster acks=all, min.insync=2, unclean=on", "broker failure")
    assert cluster.measured == "acked-kept" and cluster.lines()[2].startswith("acked lost 0")
    assert grid.cell("structured window-count, transactional sink", "no fault").measured == "exactly-once"
    both = grid.cell("plain consumer, append sink, producer without idempotence", "driver failure + producer failure")
    assert both.runs[0].link is None and both.runs[0].run == "gone"  # a run not here: named, not linked
    table = grid.table()
    assert len(table) == 5 and table["mismatch"].sum() == 1
    assert grid.cell("receiver, reliable ack, WAL", "no fault") is None


def test_links_point_at_runs_that_exist(tmp_path):
    run = tmp_path / "runs" / "abc"
    run.mkdir(parents=True)
    (run / "scenario.html").write_text("<html></html>")
    view = matrix_view(pd.DataFrame([row("here", "plain", "append", "", "exactly-once",
                                         html=str(run / "scenario.html")),
                                     row("relative", "plain", "append", "", "exactly-once", seed=2,
                                         html="runs/abc/scenario.html")]))
    grid = sg.build_grid(view, tmp_path)
    runs = grid.cell("plain consumer, append sink", "no fault").runs
    assert [r.link for r in runs] == ["runs/abc/scenario.html"] * 2
    assert "href='runs/abc/scenario.html'" in sg.grid_html(grid)


def test_an_error_row_is_the_worst_colour():
    view = matrix_view(pd.DataFrame([row("ok", "plain", "append", "", "exactly-once"),
                                     {**row("broke", "plain", "append", "", "exactly-once", seed=2),
                                      "guarantee": None}]))
    cell = sg.build_grid(view).cell("plain consumer, append sink", "no fault")
    assert cell.measured == "error" and cell.mismatch


def test_the_figure_draws_every_cell():
    from lab.views.plots import semantics_grid

    view = matrix_view(read_results(DATA / "matrix_with_wrong_row.csv"))
    fig = semantics_grid(sg.build_grid(view))
    heat = fig.data[0]
    assert list(heat.y) == ["plain consumer, append sink", "plain consumer, idempotent sink"]
    assert heat.text[1][0].startswith("<b>✘ at-least-once</b>") and len(fig.layout.shapes) == 1
    assert fig.layout.title.text == sg.GRID_TITLE
    assert "Plotly.newPlot" in fig.to_html(include_plotlyjs=False)


def _result(label, report, **params):
    cfg = make_config(**params)
    return label, SimpleNamespace(config=cfg, report={"settings": cfg.settings, "run_dir": f"/nowhere/{label}",
                                                      **report})


def test_notebook_results_take_the_documented_claim():
    counts = dict(acked=1500, exactly_once=1500, duplicated=0, lost=0, unseen=0, unexpected=0, source_duplicates=0)
    results = dict([
        _result("no WAL", {**counts, "lost": 200, "exactly_once": 1300, "guarantee": "at-most-once"},
                pipeline="receiver", ack="stored", wal="off", faults="driver-crash@batch=3:mid-output"),
        _result("WAL", {**counts, "duplicated": 90, "guarantee": "at-least-once"},
                pipeline="receiver", ack="stored", wal="on", faults="driver-crash@batch=3:mid-output"),
        _result("no fault", {**counts, "guarantee": "exactly-once"}, pipeline="receiver", ack="stored", wal="on"),
    ])
    grid = sg.grid_from_results(results)
    no_wal = grid.cell("receiver, reliable ack, no WAL", "driver failure")
    assert no_wal.expected == ("loss",) and no_wal.measured == "at-most-once" and not no_wal.mismatch
    wal = grid.cell("receiver, reliable ack, WAL", "driver failure")
    assert wal.expected == ("no-loss",) and wal.runs[0].run == "WAL" and wal.runs[0].link is None
    free = grid.cell("receiver, reliable ack, WAL", "no fault")
    assert (free.runs[0].verdict == sg.NO_EXPECTATION and not free.mismatch
            and free.lines()[1] == "no expectation stated")
    own = sg.grid_from_results(results, expect={"WAL": "exactly-once"})
    assert own.cell("receiver, reliable ack, WAL", "driver failure").mismatch


@pytest.mark.parametrize("lost, duplicated, unexpected, unseen", [
    (0, 0, 0, 0), (3, 0, 0, 0), (0, 3, 0, 0), (0, 0, 3, 0), (3, 3, 0, 0), (3, 0, 3, 0), (0, 0, 0, 3), (3, 3, 0, 3)])
def test_the_recomputed_guarantee_is_the_auditors(lost, duplicated, unexpected, unseen):
    from dataclasses import MISSING, fields

    from lab.audit.auditor import Audit
    from lab.matrix.report import guarantee_of

    counts = dict(lost=lost, duplicated=duplicated, unexpected=unexpected, unseen=unseen)
    required = {f.name: 0 for f in fields(Audit) if f.default is MISSING and f.default_factory is MISSING}
    assert guarantee_of(counts) == Audit(**{**required, **counts}).guarantee
