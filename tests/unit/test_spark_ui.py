"""The Spark UI on request, without a JVM: its setting, its Spark configuration, the hint, and who announces it."""

import json
import threading
import time

import pytest

from lab import events as ev
from lab.cli import _echo_event, _parser
from lab.config import RunConfig, make_config
from lab.errors import LabError
from lab.events import read_events
from lab.pipelines.driver import DriverContext
from lab.registry import PIPELINES
from lab.spark.session import UI_BASE_PORT, UI_TABS, run_wants_ui, session_conf, ui_hint

URL = f"http://127.0.0.1:{UI_BASE_PORT + 1}"


@pytest.fixture
def no_ui_env(runs_dir, monkeypatch):
    monkeypatch.delenv("LAB_SPARK_UI", raising=False)
    return runs_dir


# -- the setting ------------------------------------------------------------------
def test_off_by_default_and_kept_in_config_json(no_ui_env):
    c = make_config(pipeline="structured")
    assert c.option("spark_ui") is False
    on = make_config(pipeline="structured", spark_ui=True)
    assert RunConfig.from_json(on.to_json()).option("spark_ui") is True
    old = json.loads(c.to_json())
    del old["spark_ui"]  # a run directory from before the setting existed
    assert RunConfig.from_json(json.dumps(old)).option("spark_ui") is False


@pytest.mark.parametrize("value, on", [("1", True), ("on", True), ("0", False), ("off", False), ("", False)])
def test_lab_spark_ui_is_read(no_ui_env, monkeypatch, value, on):
    monkeypatch.setenv("LAB_SPARK_UI", value)
    assert make_config(pipeline="receiver").option("spark_ui") is on


def test_a_parameter_wins_over_the_environment(no_ui_env, monkeypatch):
    monkeypatch.setenv("LAB_SPARK_UI", "1")
    assert make_config(pipeline="direct", spark_ui=False).option("spark_ui") is False
    monkeypatch.setenv("LAB_SPARK_UI", "0")
    assert make_config(pipeline="direct", spark_ui=True).option("spark_ui") is True


def test_a_bad_environment_value_is_named_with_the_choices(no_ui_env, monkeypatch):
    monkeypatch.setenv("LAB_SPARK_UI", "yes")
    with pytest.raises(LabError) as e:
        make_config(pipeline="structured")
    msg = str(e.value)
    assert "\n" not in msg and "LAB_SPARK_UI='yes'" in msg
    assert all(choice in msg for choice in ("0", "1", "on", "off"))


def test_a_bad_parameter_value_is_named_with_the_choices(no_ui_env):
    with pytest.raises(LabError, match=r"'yes'.*False, True"):
        make_config(pipeline="structured", spark_ui="yes")


def test_the_environment_leaves_pipelines_without_spark_alone(no_ui_env, monkeypatch):
    monkeypatch.setenv("LAB_SPARK_UI", "1")
    assert make_config(pipeline="plain").option("spark_ui") is False


def test_asking_for_it_on_a_pipeline_without_spark_names_the_spark_pipelines(no_ui_env):
    with pytest.raises(LabError) as e:
        make_config(pipeline="plain", spark_ui=True)
    msg = str(e.value)
    assert "'plain'" in msg and all(p in msg for p in ("structured", "direct", "receiver")) and "\n" not in msg


def test_the_command_line_flag(no_ui_env):
    assert _parser().parse_args(["run", "--pipeline", "structured", "--spark-ui"]).spark_ui is True
    assert _parser().parse_args(["run"]).spark_ui is None  # so LAB_SPARK_UI decides


# -- Spark's configuration -----------------------------------------------------------
def test_session_conf_turns_the_ui_on_only_when_asked(tmp_path):
    assert session_conf("local[2]", tmp_path, "x")["spark.ui.enabled"] == "false"
    conf = session_conf("local[2]", tmp_path, "x", ui=True)
    assert conf["spark.ui.enabled"] == "true" and conf["spark.ui.port"] == str(UI_BASE_PORT)
    assert conf["spark.ui.killEnabled"] == "false"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"


def test_a_session_follows_its_run(no_ui_env, tmp_path):
    assert run_wants_ui(tmp_path) is False  # no run here (the class archive's training session)
    (tmp_path / "config.json").write_text(make_config(pipeline="structured", spark_ui=True).to_json())
    assert run_wants_ui(tmp_path) is True
    (tmp_path / "config.json").write_text(make_config(pipeline="structured").to_json())
    assert run_wants_ui(tmp_path) is False


# -- the hint ------------------------------------------------------------------------
def test_every_spark_pipeline_has_a_tab_to_watch():
    assert set(UI_TABS) == {name for name, spec in PIPELINES.items() if spec.uses_spark}
    assert '"Structured Streaming" tab' in ui_hint("structured")
    assert '"Streaming" tab' in ui_hint("receiver") and "Structured" not in ui_hint("receiver")
    assert '"Jobs" tab' in ui_hint("direct")


def test_no_hint_for_a_pipeline_without_spark():
    with pytest.raises(LabError, match=r"'plain'.*direct, receiver, structured"):
        ui_hint("plain")


def test_lab_run_prints_the_address_and_the_tab(capsys):
    _echo_event({"t": 1.0, "type": ev.SPARK_UI, "source": "driver", "url": URL, "attempt": 2, "pid": 7,
                 "tab": "Streaming"}, pipeline="receiver")
    err = capsys.readouterr().err
    assert URL in err and "attempt 2" in err and '"Streaming" tab' in err


# -- who announces it ----------------------------------------------------------------
def make_run(tmp_path, spark_ui: bool):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cfg = make_config(pipeline="structured", events=100, spark_ui=spark_ui)
    (run_dir / "config.json").write_text(cfg.to_json())
    (run_dir / "broker.json").write_text(json.dumps({"bootstrap": "127.0.0.1:1"}))
    return run_dir


def ui_events(run_dir) -> list[dict]:
    return [e for e in read_events(run_dir) if e["type"] == ev.SPARK_UI]


@pytest.fixture
def a_ui(monkeypatch):
    """This process plays a driver whose SparkContext has its UI at ``URL``."""
    monkeypatch.setattr("lab.spark.session.ui_url", lambda: URL)


def test_a_driver_started_now_says_where_its_ui_is_once_its_session_is_up(no_ui_env, tmp_path, monkeypatch, a_ui):
    monkeypatch.delenv("LAB_DRIVER_STANDBY", raising=False)
    ctx = DriverContext(make_run(tmp_path, spark_ui=True))
    ctx.phase("jvm")
    assert not ui_events(ctx.run_dir)
    ctx.phase("session")
    ctx.await_turn()
    ctx.phase("session")
    (said,) = ui_events(ctx.run_dir)
    assert said["url"] == URL and said["attempt"] == 1 and said["tab"] == "Structured Streaming"


def test_a_standby_says_it_only_at_its_turn(no_ui_env, tmp_path, monkeypatch, a_ui):
    run_dir = make_run(tmp_path, spark_ui=True)
    go = run_dir / "driver-2.go"
    monkeypatch.setenv("LAB_DRIVER_STANDBY", str(go))
    monkeypatch.setenv("LAB_DRIVER_ATTEMPT", "2")
    ctx = DriverContext(run_dir)
    ctx.phase("session")
    turn = threading.Thread(target=ctx.await_turn)
    turn.start()
    time.sleep(0.3)
    assert not ui_events(run_dir), "a standby's UI was advertised while another driver is the run's"
    go.touch()
    turn.join(5)
    assert not turn.is_alive()
    timeline = read_events(run_dir)
    (said,) = [e for e in timeline if e["type"] == ev.SPARK_UI]
    assert said["attempt"] == 2
    kinds = [e["type"] for e in timeline]
    assert kinds.index(ev.DRIVER_READY) < kinds.index(ev.SPARK_UI)


def test_nothing_is_said_when_the_run_did_not_ask(no_ui_env, tmp_path, monkeypatch, a_ui):
    monkeypatch.delenv("LAB_DRIVER_STANDBY", raising=False)
    ctx = DriverContext(make_run(tmp_path, spark_ui=False))
    ctx.phase("session")
    assert not ui_events(ctx.run_dir)
