"""The flink pipeline's pure parts: settings, the job spec, what a checkpoint holds, what a restart replays."""

import struct
from pathlib import Path

import pytest

from lab.audit.flink_replay import predict
from lab.config import make_config
from lab.errors import LabError
from lab.flink import env as flink_env, settings as flink_settings

DATA = Path(__file__).parent / "data"


def test_auto_delivery_follows_the_checkpointing_and_is_written_into_the_config(runs_dir):
    assert make_config(pipeline="flink").option("flink_delivery") == "exactly-once"
    assert make_config(pipeline="flink", checkpointing="unaligned").option("flink_delivery") == "exactly-once"
    assert make_config(pipeline="flink", checkpointing="at-least-once").option("flink_delivery") == "at-least-once"
    assert make_config(pipeline="flink", checkpointing="at-least-once",
                       flink_delivery="exactly-once").option("flink_delivery") == "exactly-once"
    cfg = make_config(pipeline="flink", slow_sink=True)
    assert (cfg.sink == "topic" and cfg.settings["slow_sink"] is True
            and cfg.settings["flink_delivery"] == "exactly-once")


def test_the_job_spec_states_every_setting_that_decides_delivery(runs_dir):
    cfg = make_config(pipeline="flink", checkpointing="unaligned", partitions=2, batch_interval_s=0.5)
    spec = flink_settings.job_spec(cfg, run_id="r1", bootstrap="127.0.0.1:9", checkpoint_dir="/c", savepoint_dir="/s",
                                   restore="/c/j/chk-3", connector_jar="/x.jar")
    assert spec["checkpointing"] == "unaligned" and spec["delivery"] == "exactly-once"
    assert spec["interval_ms"] == 500 and spec["isolation"] == "read_committed" and spec["out_topic"].endswith(".out")
    assert spec["restore"] == "/c/j/chk-3" and spec["group"] == "lab-r1" and spec["parallelism"] == 2
    assert spec["transaction_timeout_ms"] <= 15 * 60 * 1000  # the broker's transaction.max.timeout.ms


def test_the_offsets_of_a_real_checkpoint_are_its_readers_not_its_enumerators():
    # chk-2 of a job on topic "fa1" (2 partitions) that had read 1,500 records from each.
    metadata = (DATA / "flink_checkpoint_metadata.bin").read_bytes()
    assert metadata.count(struct.pack(">H", 3) + b"fa1") == 4  # each partition twice: enumerator and reader
    assert flink_settings.checkpoint_offsets(metadata, "fa1") == {0: 1500, 1: 1500}
    assert flink_settings.checkpoint_offsets(metadata, "fa") == {}  # a prefix is another topic


def test_checkpoint_offsets_skip_markers_and_truncated_records():
    def split(topic, partition, offset):
        name = topic.encode()
        return struct.pack(">H", len(name)) + name + struct.pack(">iqq", partition, offset, -2**63)

    blob = b"x" + split("t", 0, -3) + split("t", 1, -3) + b"yy" + split("t", 0, 42) + split("t", 1, 7)
    assert flink_settings.checkpoint_offsets(blob, "t") == {0: 42, 1: 7}
    assert flink_settings.checkpoint_offsets(split("t", 0, 5)[:-3], "t") == {}


def test_split_offsets_from_the_task_managers_log():
    log = ("... SourceReaderBase [] - Adding split(s) to reader: [[Partition: ev.r-1, StartingOffset: 2189, "
           "StoppingOffset: -9223372036854775808]]\n"
           "... Adding split(s) to reader: [[Partition: ev.r-0, StartingOffset: -3, StoppingOffset: -1]]\n"
           "... Adding split(s) to reader: [[Partition: other-0, StartingOffset: 5, StoppingOffset: -1]]\n")
    # partition 0 starts at a marker (-3: the group's committed offsets), resolved later by the reader
    assert flink_settings.split_offsets(log, "ev.r") == {1: 2189, 0: -3}


def test_the_newest_checkpoint_is_the_highest_id():
    assert flink_settings.newest_checkpoint([]) is None
    found = [("/c/a/chk-4", 4, 10.0), ("/c/b/chk-9", 9, 5.0), ("/c/b/chk-8", 8, 20.0)]
    assert flink_settings.newest_checkpoint(found) == ("/c/b/chk-9", 9)


def test_a_rest_history_entry_becomes_an_event():
    entry = {"id": 7, "status": "COMPLETED", "trigger_timestamp": 1, "latest_ack_timestamp": 3,
             "end_to_end_duration": 2, "checkpointed_size": 600_000, "persisted_data": 590_000, "processed_data": 0,
             "alignment_buffered": 0, "is_savepoint": False, "external_path": "file:/c/chk-7"}
    e = flink_settings.checkpoint_event(entry)
    assert e["checkpoint"] == 7 and e["status"] == "completed" and e["persisted_data"] == 590_000
    assert e["failure"] is None and e["savepoint"] is False


def test_a_restart_replays_what_the_dead_attempt_wrote_past_its_restore_offsets():
    starts = [
        {"attempt": 1, "restore_checkpoint": None, "start_offsets": {"0": 0, "1": 0},
         "out_end_offsets": {"0": 0, "1": 0}},
        {"attempt": 2, "restore_checkpoint": 4, "start_offsets": {"0": 10, "1": 5},
         "out_end_offsets": {"0": 9, "1": 8}},
    ]
    # Input: e0..e11 at partition 0 offsets 0..11, f0..f7 at partition 1 offsets 0..7.
    input_of = {f"e{i}": (0, i) for i in range(12)} | {f"f{i}": (1, i) for i in range(8)}
    written = [f"e{i}" for i in range(12)] + [f"f{i}" for i in range(5)]  # what attempt 1 wrote, in order
    out = [(i % 2, i // 2, eid) for i, eid in enumerate(written)]       # spread over the output's two partitions
    out.append((0, 9, "e11"))  # written by attempt 2 (past the end at its start): not attempt 1's
    [r] = predict(starts, out, input_of)
    assert r.attempt == 2 and r.checkpoint == 4 and r.written_before == 17
    assert r.replayed == 2  # e10 and e11 (partition 0 from 10); f0..f4 are before partition 1's offset 5
    assert r.reread == 2 + 3  # what the restart reads again: e10, e11 and f5..f7, written or not
    assert predict(starts[:1], out, input_of) == []


def test_a_missing_flink_environment_names_the_command_that_makes_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_FLINK_ENV", str(tmp_path / "none"))
    assert "no Flink environment" in flink_env.env_problem()
    with pytest.raises(LabError, match=r"make flink") as e:
        flink_env.check_ready()
    assert "\n" not in str(e.value)


def test_lab_doctor_shows_a_missing_flink_environment_as_optional(tmp_path, monkeypatch, capsys):
    from lab import cli, doctor

    monkeypatch.setenv("LAB_FLINK_ENV", str(tmp_path / "none"))
    check = doctor.check_flink()
    assert not check.ok and check.optional and "no Flink environment" in check.detail and "make flink" in check.fix
    monkeypatch.setattr(doctor, "run_checks", lambda: [doctor.Check("java", True, "Java 17"), check])
    assert cli.main(["doctor"]) == 0  # an optional part missing fails nothing
    out = capsys.readouterr().out
    assert "SKIP  flink" in out and "fix: make flink" in out
    monkeypatch.setattr(doctor, "run_checks", lambda: [doctor.Check("java", False, "no Java"), check])
    assert cli.main(["doctor"]) == 1
    assert "FAIL  java" in capsys.readouterr().out


def test_the_engines_grid_is_valid_and_each_row_has_its_own_label(runs_dir):
    from lab.matrix.grid import TEMPLATES, load_grid
    from lab.matrix.semantics import deployment

    grid = load_grid(TEMPLATES / "engines_grid.yaml")
    assert [s.expect for s in grid.scenarios] == ["exactly-once", "exactly-once", "at-least-once", "exactly-once",
                                                  "exactly-once"]
    labels = [deployment(s.params["pipeline"], "topic", make_config(**s.params).settings) for s in grid.scenarios]
    assert len(set(labels)) == 5 and labels[1] == "flink, unaligned barriers, exactly-once KafkaSink, back-pressured"


def _fake_python(path: Path, version: str) -> str:
    """An executable that answers the version probe as Python ``version`` would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return str(path)


def test_the_flink_environment_is_built_on_a_python_pyflink_supports(tmp_path, monkeypatch):
    # the lab on 3.13 (no apache-flink wheel): the first 3.12 or 3.11 found, here in pyenv's versions
    monkeypatch.setattr(flink_env.sys, "executable", _fake_python(tmp_path / "venv" / "python", "3.13"))
    monkeypatch.setattr(flink_env, "_PY", "3.13")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))
    monkeypatch.delenv("LAB_FLINK_PYTHON", raising=False)
    with pytest.raises(LabError, match=r"needs Python 3\.11 or 3\.12 .*no wheel for 3\.13.*LAB_FLINK_PYTHON=") as e:
        flink_env.find_interpreter()
    assert "\n" not in str(e.value)
    py311 = _fake_python(tmp_path / "pyenv" / "versions" / "3.11.7" / "bin" / "python3.11", "3.11")
    assert flink_env.find_interpreter() == (py311, "3.11")
    py312 = _fake_python(tmp_path / "uv" / "cpython-3.12.1-linux" / "bin" / "python3.12", "3.12")
    assert flink_env.find_interpreter() == (py312, "3.12")
    # the lab's own interpreter first when it is one of them
    monkeypatch.setattr(flink_env.sys, "executable", _fake_python(tmp_path / "venv2" / "python", "3.11"))
    assert flink_env.find_interpreter() == (flink_env.sys.executable, "3.11")
    # LAB_FLINK_PYTHON decides alone, and a wrong one is named
    monkeypatch.setenv("LAB_FLINK_PYTHON", str(tmp_path / "venv" / "python"))
    with pytest.raises(LabError, match=r"LAB_FLINK_PYTHON=.* is Python 3\.13: PyFlink .* needs Python 3\.11 or 3\.12"):
        flink_env.find_interpreter()
    monkeypatch.setenv("LAB_FLINK_PYTHON", py312)
    assert flink_env.find_interpreter() == (py312, "3.12")


def test_a_run_uses_an_environment_built_for_another_supported_python(tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_FLINK_ENV", raising=False)
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(flink_env, "_PY", "3.13")
    built = tmp_path / "flink" / f"{flink_env.FLINK_VERSION}-py3.11"
    assert flink_env.env_problem() == ("no Flink environment at "
                                       f"{tmp_path / 'flink' / (flink_env.FLINK_VERSION + '-py3.12')}")
    _fake_python(built / "bin" / "python", "3.11")
    (built / ".installed").write_text(flink_env._stamp_text("3.11"))
    assert flink_env.env_dir() == built and flink_env.env_problem() is None
    (built / ".installed").write_text(flink_env._stamp_text("3.13"))
    assert "built on Python 3.13" in flink_env.env_problem()
