"""bench/code_pair.py: one command at an earlier commit and at the checkout, compared run for run."""

from bench.code_pair import fill, last_line, milestones, read_timelines, summarise


def test_the_command_gets_each_trees_python_and_a_fresh_directory():
    cmd = ["{python}", "bench/matrix.py", "--out", "{out}", "--set", "x={out}/y"]
    assert fill(cmd, "/t/.venv/bin/python", "/tmp/o1") == [
        "/t/.venv/bin/python", "bench/matrix.py", "--out", "/tmp/o1", "--set", "x=/tmp/o1/y"]
    assert cmd[0] == "{python}", "the template is reused for the next run"


def test_the_last_line_skips_blank_lines_and_progress_bar_redraws():
    assert last_line("a\nmatrix: 4%\rmatrix: 100% 25/25\n\n") == "matrix: 100% 25/25"
    assert last_line("") == "" and last_line("\n \n") == ""
    assert len(last_line("x" * 500)) == 200


def run(side, wall, cpu, exit=0, core=0.3):
    return {"side": side, "wall_s": wall, "machine_cpu_s": cpu, "exit": exit, "core_seconds_before": core}


def test_the_summary_compares_medians_of_the_runs_that_succeeded():
    runs = [run("baseline", 414.4, 800), run("current", 394.8, 760), run("baseline", 420.0, 810),
            run("current", 380.0, 740), run("current", 10.0, 5, exit=1)]
    s = summarise(runs)
    assert s["baseline"]["runs"] == 2 and s["current"]["runs"] == 2 and s["current"]["failed"] == 1
    assert s["baseline"]["wall_s"]["median"] == 417.2 and s["current"]["wall_s"]["median"] == 387.4
    assert s["wall_ratio"] == round(417.2 / 387.4, 2) and s["cpu_ratio"] == round(805 / 750, 2)


def test_no_ratio_without_a_successful_run_on_each_side():
    s = summarise([run("baseline", 400, 800), run("current", 10, 5, exit=2)])
    assert s["wall_ratio"] is None and s["cpu_ratio"] is None and s["current"]["wall_s"] == {}


def test_a_pattern_keeps_the_line_that_says_what_the_run_delivered():
    out = "run 1: 3000 events\n  guarantee                  exactly-once\n  run directory              /r/1\n"
    assert last_line(out, "guarantee") == "guarantee                  exactly-once"
    assert last_line(out, "nothing like this") == ""


def test_milestones_are_seconds_after_the_command_started_from_its_runs_timelines():
    first = [{"t": 100.4, "type": "standby-start"}, {"t": 101.0, "type": "run-start"},
             {"t": 111.2, "type": "batch-done"}, {"t": 112.0, "type": "batch-done"}, {"t": 117.0, "type": "drained"},
             {"t": 118.0, "type": "run-end"}]
    second = [{"t": 119.0, "type": "driver-start"}, {"t": 125.5, "type": "batch-done"}, {"t": 128.6, "type": "drained"},
              {"t": 130.0, "type": "run-end"}]
    assert milestones([second, first], launched=100.0, ended=130.6) == {
        "first_driver_s": 0.4, "first_batch_done_s": 11.2, "drained_to_exit_s": 2.0, "end_to_exit_s": 0.6}


def test_a_command_without_runs_has_no_milestones(tmp_path):
    assert read_timelines(tmp_path / "runs") == []
    assert milestones([], 1.0, 2.0) == {"first_driver_s": None, "first_batch_done_s": None, "drained_to_exit_s": None,
                                        "end_to_exit_s": None}


def test_timelines_are_read_from_each_run_directory(tmp_path):
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "events.jsonl").write_text('{"t": 1.0, "type": "run-start"}\n\n{"t": 2.0, "type": "run-end"}\n')
    (tmp_path / "r2").mkdir()  # a run that never wrote its timeline
    assert read_timelines(tmp_path) == [[{"t": 1.0, "type": "run-start"}, {"t": 2.0, "type": "run-end"}]]


def test_the_summary_has_the_milestones_of_runs_that_recorded_them():
    runs = [run("baseline", 20.0, 30) | {"first_driver_s": 0.8}, run("baseline", 21.0, 30) | {"first_driver_s": 0.7},
            run("current", 19.0, 30) | {"first_driver_s": 0.4}, run("current", 19.5, 30) | {"first_driver_s": None}]
    s = summarise(runs)
    assert s["baseline"]["first_driver_s"]["median"] == 0.75 and s["current"]["first_driver_s"]["median"] == 0.4
    assert "first_batch_done_s" not in s["current"]
