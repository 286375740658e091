"""How long each driver restart took, from the timeline: the report, `lab run`'s table, the timeline and the panel."""

import pytest

from lab.audit.restarts import Restart, driver_restarts, restart_line

T0 = 1_000.0


def e(t, type_, **fields):
    return {"t": T0 + t, "type": type_, **fields}


#: A run whose driver is crashed at a named point and restarted; the restarted driver first logs the commit its
#: predecessor left unlogged (``recovered``), then runs the replayed batch.
CRASHED = [
    e(0.0, "run-start"), e(0.1, "driver-start", attempt=1), e(4.0, "batch-done", batch=0, rows=5, attempt=1),
    e(6.9, "fault-point", batch=2), e(7.0, "fault", kind="driver-crash", batch=2, by="plan"),
    e(7.2, "driver-start", attempt=2), e(7.6, "batch-done", batch=1, rows=5, attempt=2, recovered=True),
    e(9.9, "batch-done", batch=2, rows=5, attempt=2), e(10.4, "batch-done", batch=3, rows=5, attempt=2),
]


def test_a_restart_lasts_from_the_kill_to_the_restarted_drivers_first_batch_done():
    (r,) = driver_restarts(CRASHED)
    assert r == Restart(attempt=2, cause="crash", down_t=T0 + 7.0, start_t=T0 + 7.2, back_t=T0 + 9.9)
    assert r.back_s == pytest.approx(2.9)  # the recovered batch-done at 7.6 s is bookkeeping, not work


def test_other_faults_do_not_start_a_restart_and_an_exit_on_its_own_does():
    events = [e(0.0, "run-start"), e(0.1, "driver-start", attempt=1), e(2.0, "fault", kind="executor-crash"),
              e(3.0, "batch-done", batch=0, rows=5, attempt=1), e(5.0, "fault", kind="broker-outage"),
              e(6.0, "driver-exit", code=1), e(6.5, "driver-start", attempt=2),
              e(9.0, "batch-done", batch=1, rows=5, attempt=2)]
    (r,) = driver_restarts(events)
    assert (r.cause, r.back_s) == ("exit", 3.0)
    assert restart_line(r, now=T0 + 20) == "driver #2 back 3.0 s after the driver's exit"


#: CRASHED's restarted driver crashed again (a press) before its first batch; the third did one.
TWICE = CRASHED[:6] + [e(8.0, "fault", kind="driver-crash", by="ui"), e(8.3, "driver-start", attempt=3),
                       e(11.0, "batch-done", batch=2, rows=5, attempt=3)]


def test_a_driver_crashed_again_before_its_first_batch_has_no_time():
    first, second = driver_restarts(TWICE)
    assert (first.attempt, first.back_s, first.over_t) == (2, None, T0 + 8.0)
    assert (second.attempt, second.down_t, second.back_s, second.over_t) == (3, T0 + 8.0, 3.0, None)
    assert restart_line(first, now=T0 + 20) == "driver #2 did no batch (restarted 0.2 s after the crash)"


def test_a_driver_restarted_after_the_last_events_did_no_batch_and_is_not_restarting_for_ever():
    events = [e(0.0, "run-start"), e(0.1, "driver-start", attempt=1), e(3.0, "batch-done", batch=0, rows=5, attempt=1),
              e(9.0, "fault", kind="driver-crash", by="plan"), e(9.2, "driver-start", attempt=2),
              e(55.0, "drained"), e(56.0, "run-end")]
    (r,) = driver_restarts(events)
    assert (r.back_s, r.over_t) == (None, T0 + 55.0)
    assert restart_line(r, now=T0 + 60) == "driver #2 did no batch (restarted 0.2 s after the crash)"


def test_a_restart_under_way_says_how_long_it_has_lasted():
    (r,) = driver_restarts(CRASHED[:6])
    assert r.back_t is None
    assert restart_line(r, now=T0 + 8.25) == "driver #2 restarting, 1.2 s since the crash"
    assert driver_restarts(CRASHED[:5]) == []  # killed, not restarted yet: no restart to speak of


def test_lab_runs_table_gives_each_restarts_time():
    from lab.cli import _restarts_text

    assert _restarts_text({"restarts": 0, "restart_s": []}) == "0"
    assert _restarts_text({"restarts": 1, "restart_s": [2.88]}) == "1  (first batch done 2.9 s after the driver died)"
    assert _restarts_text({"restarts": 1, "restart_s": [None]}) == "1  (no batch done by the restarted driver)"
    assert _restarts_text({"restarts": 3, "restart_s": [None, 4.1, None]}) == (
        "3  (first batch done after the driver died: #1 no batch, #2 4.1 s, #3 no batch)")


def test_the_timeline_shades_each_restart_and_writes_its_time():
    from lab.views.plots import timeline

    fig = timeline(CRASHED)
    shaded = [(s.x0, s.x1) for s in fig.layout.shapes if s.type == "rect"]
    assert shaded == [pytest.approx((7.0, 9.9))]
    assert [a.text for a in fig.layout.annotations if a.text.startswith("restart")] == ["restart #1 · back in 2.9 s"]
    # the batch done before the crash and logged at the restart: an open marker of its own, not driver #2's
    assert [(t.name, t.marker.symbol, pytest.approx(list(t.x))) for t in fig.data] == [
        ("batches, driver #1", "circle", [4.0]), ("batches, driver #2", "circle", [9.9, 10.4]),
        ("batch done before a crash, logged at the restart", "circle-open", [7.6])]
    under_way = timeline(CRASHED[:6] + [e(8.0, "producer-done")])  # shaded to the last event, no time yet
    assert [(s.x0, s.x1) for s in under_way.layout.shapes if s.type == "rect"] == [pytest.approx((7.0, 8.0))]
    assert [a.text for a in under_way.layout.annotations if a.text.startswith("restart")] == ["restart #1"]
    twice = timeline(TWICE)  # the first restart shaded to the second crash, the second to its first batch
    assert [(s.x0, s.x1) for s in twice.layout.shapes if s.type == "rect"] == [
        pytest.approx((7.0, 8.0)), pytest.approx((8.0, 11.0))]


def test_the_panel_shows_the_latest_restart(tmp_path, monkeypatch):
    import json

    from lab.config import make_config
    from lab.run.result import RunStatus
    from lab.views.panel import LiveCounts, Panel

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in CRASHED))
    panel = Panel(make_config(pipeline="structured", sink="idempotent", events=10, runs_dir=str(tmp_path)))

    class Finished:
        def __init__(self):
            self.run_dir = run_dir

        def elapsed(self):
            return 11.0

        def stop(self):
            pass

    monkeypatch.setattr("lab.views.panel.live_counts",
                        lambda run, st: LiveCounts(10, 10, 10, 0, 0, 0, 10, 10, 4, 1, False))
    panel.run = Finished()
    try:
        panel._refresh(RunStatus(11.0, 10, 10, True, 4, 1, True, {}, {}, finished=False))
    finally:
        panel.close()
    assert panel.progress_label.value == "10/10 offsets read · batch 4 · restarts 1"
    assert panel.restart_label.value == "driver #2 back 2.9 s after the crash"


def test_notebook_06s_recovery_time_is_the_first_restarts():
    from types import SimpleNamespace

    from lab.notebook import recovery_s

    assert recovery_s(SimpleNamespace(report={"restart_s": [2.5, 3.1]})) == 2.5
    assert recovery_s(SimpleNamespace(report={"restart_s": [None, 3.1]})) is None  # the first did no batch
    assert recovery_s(SimpleNamespace(report={"restart_s": []})) is None


# -- the matrix's results table ----------------------------------------------------------


def test_a_restart_cell_reads_the_reports_list_or_its_json_text_and_is_empty_without_one():
    from lab.audit.restarts import restart_cell

    assert restart_cell([2.884]) == "2.9"
    assert restart_cell("[null, 4.06]") == "no batch, 4.1"
    assert restart_cell("[]") == restart_cell([]) == ""
    for missing in (None, float("nan"), "", "not json"):  # a table from before the column, or a broken cell
        assert restart_cell(missing) == ""


def test_the_matrix_table_keeps_each_rows_restart_times_through_csv_and_parquet_into_both_views(tmp_path):
    import json

    from lab.matrix import grid as matrix, table as matrix_table
    from lab.matrix.report import matrix_view, read_results, table_html

    grid = matrix.Grid([matrix.Scenario("crash twice", {"pipeline": "structured"}, 1, "exactly-once"),
                        matrix.Scenario("no crash", {"pipeline": "direct"}, 1, "exactly-once"),
                        matrix.Scenario("old report", {"pipeline": "receiver"}, 1, "exactly-once")])
    counts = {"guarantee": "exactly-once", "lost": 0, "duplicated": 0, "unexpected": 0, "unseen": 0,
              "source_duplicates": 0, "settings": {"sink": "idempotent"}}
    reports = [{**counts, "restarts": 2, "restart_s": [None, 3.26]}, {**counts, "restarts": 0, "restart_s": []},
               {**counts, "restarts": 1}]  # written before reports had restart_s: resumed rows keep no value
    rows = {s.key: matrix_table.row_from_report(s, r) for s, r in zip(grid.scenarios, reports)}
    assert json.loads(rows[grid.scenarios[0].key]["restart_s"]) == [None, 3.26]
    matrix_table.write_table(tmp_path, grid, rows)
    for table in ("matrix.csv", "matrix.parquet"):
        view = matrix_view(read_results(tmp_path / table))
        assert list(view.columns).index("restart_s") == list(view.columns).index("restarts") + 1
        page = table_html(view)
        assert "<th>restart s</th>" in page and "<td>no batch, 3.3</td>" in page, table
        lines = matrix_table.summary_lines(view)
        assert "restart s" in lines[0]
        assert lines[1].endswith("no batch, 3.3  as expected") and lines[2].endswith(" as expected")
        assert "no batch" not in lines[2] + lines[3]


def test_a_results_table_from_before_the_restart_column_still_renders():
    from lab.matrix import table as matrix_table
    from lab.matrix.report import matrix_view, read_results, table_html
    from tests.conftest import ROOT

    old = read_results(ROOT / "tests" / "data" / "matrix_with_wrong_row.csv")
    assert "restart_s" not in old
    view = matrix_view(old)
    page = table_html(view)
    assert page.count("<tr") == len(view) + 1 and page.count("<td></td>") >= len(view)  # its restart cells empty
    assert len(matrix_table.summary_lines(view)) == len(view) + 2
