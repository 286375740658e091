"""Start-up techniques: their switches, the class archive's fallback, and the batch cap's default (no JVM)."""

import pytest

from lab.config import default_max_batch, make_config
from lab.errors import LabError
from lab.host.class_archive import _remove_replaced
from lab.host.start_tuning import ALL_OFF, DRIVER_JVM_OPTIONS, FLINK_JVM_OPTIONS, StartTuning
from lab.spark import archive as class_archive
from lab.spark.session import driver_java_options


def test_every_technique_is_on_by_default_and_each_can_be_turned_off():
    assert StartTuning.from_env({}) == StartTuning(class_archive=True, jvm_options=DRIVER_JVM_OPTIONS,
                                                   warm_up="beside", standby="planned", worker_daemon="lab",
                                                   flink_jvm_options=FLINK_JVM_OPTIONS,
                                                   executor_jvm_options=DRIVER_JVM_OPTIONS)
    off = StartTuning.from_env(ALL_OFF)
    assert off == StartTuning(class_archive=False, jvm_options="", warm_up="before", standby="off",
                              worker_daemon="pyspark", worker_preload=False, flink_jvm_options="",
                              executor_jvm_options="", quick_stop=False, task_fetch_wait_ms=500, broker_archive=False,
                              codegen=True)
    with pytest.raises(LabError, match="LAB_TASK_FETCH_WAIT_MS='soon': expected a whole number of milliseconds"):
        StartTuning.from_env({"LAB_TASK_FETCH_WAIT_MS": "soon"})


def test_spark_sql_runs_interpreted_unless_code_generation_is_switched_on(tmp_path, monkeypatch):
    from lab.host.start_tuning import NO_CODEGEN_CONF
    from lab.spark.session import session_conf

    monkeypatch.delenv("LAB_CODEGEN", raising=False)
    conf = session_conf("local[2]", tmp_path, "a")
    assert {k: conf[k] for k in NO_CODEGEN_CONF} == {"spark.sql.codegen.wholeStage": "false",
                                                      "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    monkeypatch.setenv("LAB_CODEGEN", "on")
    assert not set(NO_CODEGEN_CONF) & set(session_conf("local[2]", tmp_path, "a"))  # Spark's own defaults
    monkeypatch.setenv("LAB_CODEGEN", "sometimes")
    with pytest.raises(LabError, match="LAB_CODEGEN .sometimes.; valid choices: off, on"):
        session_conf("local[2]", tmp_path, "a")


def test_the_flink_jobs_jvm_gets_the_users_flags_then_the_labs_then_its_tmpdir(tmp_path):
    from lab.pipelines.flink import job_jvm_args

    assert job_jvm_args("", FLINK_JVM_OPTIONS, tmp_path) == f"-XX:TieredStopAtLevel=1 -Djava.io.tmpdir={tmp_path}"
    assert job_jvm_args(" -Xmx2g ", "", tmp_path) == f"-Xmx2g -Djava.io.tmpdir={tmp_path}"


def test_executors_get_their_flags_and_the_runs_temporary_directory(tmp_path, monkeypatch):
    from lab.spark.session import session_conf

    key = "spark.executor.extraJavaOptions"
    monkeypatch.delenv("LAB_EXECUTOR_JVM_OPTIONS", raising=False)
    assert session_conf("local-cluster[2,1,1024]", tmp_path, "a")[key].split() == [
        f"-Djava.io.tmpdir={tmp_path / 'spark-tmp'}", "-XX:TieredStopAtLevel=1"]
    monkeypatch.setenv("LAB_EXECUTOR_JVM_OPTIONS", "")
    assert session_conf("local-cluster[2,1,1024]", tmp_path, "a")[key] == f"-Djava.io.tmpdir={tmp_path / 'spark-tmp'}"


def test_spark_starts_the_python_worker_daemon_the_switch_names(tmp_path, monkeypatch):
    from lab.spark.session import session_conf

    monkeypatch.delenv("LAB_WORKER_DAEMON", raising=False)
    assert session_conf("local[2]", tmp_path, "a")["spark.python.daemon.module"] == "lab.spark.daemon"
    monkeypatch.setenv("LAB_WORKER_DAEMON", "pyspark")
    assert "spark.python.daemon.module" not in session_conf("local[2]", tmp_path, "a")  # Spark's own: pyspark.daemon


def test_the_daemon_is_told_the_workers_imports_unless_preloading_is_off(tmp_path, monkeypatch):
    from lab.spark.session import SQL_WORKER_IMPORTS, session_conf

    key = "spark.executorEnv.LAB_WORKER_IMPORTS"
    for var in ("LAB_WORKER_DAEMON", "LAB_WORKER_PRELOAD"):
        monkeypatch.delenv(var, raising=False)
    imports = session_conf("local[2]", tmp_path, "a", worker_imports=SQL_WORKER_IMPORTS)[key].split(",")
    assert imports == list(SQL_WORKER_IMPORTS) and {"pandas", "pyarrow", "lab.sinks.reader"} <= set(imports)
    assert key not in session_conf("local[2]", tmp_path, "a")  # nothing named, nothing set
    monkeypatch.setenv("LAB_WORKER_PRELOAD", "off")
    assert key not in session_conf("local[2]", tmp_path, "a", worker_imports=SQL_WORKER_IMPORTS)
    monkeypatch.setenv("LAB_WORKER_PRELOAD", "on")
    monkeypatch.setenv("LAB_WORKER_DAEMON", "pyspark")  # Spark's own daemon would not read it
    assert key not in session_conf("local[2]", tmp_path, "a", worker_imports=SQL_WORKER_IMPORTS)


@pytest.mark.parametrize("env, words", [({"LAB_CLASS_ARCHIVE": "maybe"}, ["'maybe'", "off", "on"]),
                                        ({"LAB_WARM_UP": "after"}, ["'after'", "before", "beside"]),
                                        ({"LAB_STANDBY": "yes"}, ["'yes'", "planned", "always", "off"]),
                                        ({"LAB_WORKER_DAEMON": "zip"}, ["'zip'", "lab", "pyspark"]),
                                        ({"LAB_WORKER_PRELOAD": "some"}, ["'some'", "on", "off"])])
def test_a_bad_switch_is_named_with_its_choices(env, words):
    with pytest.raises(LabError) as e:
        StartTuning.from_env(env)
    assert all(w in str(e.value) for w in words)


def test_drivers_use_the_archive_only_when_it_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(class_archive, "key", lambda: "k1")
    monkeypatch.delenv("LAB_CLASS_ARCHIVE", raising=False)
    assert class_archive.java_options() == []
    assert "SharedArchiveFile" not in driver_java_options(tmp_path)
    archive = tmp_path / "cds" / "driver-k1.jsa"
    archive.parent.mkdir()
    archive.write_bytes(b"x")
    assert class_archive.java_options() == [f"-XX:SharedArchiveFile={archive}"]
    assert f"-XX:SharedArchiveFile={archive}" in driver_java_options(tmp_path).split()
    monkeypatch.setenv("LAB_CLASS_ARCHIVE", "off")
    assert "SharedArchiveFile" not in driver_java_options(tmp_path)
    # The archive's training session writes one instead of reading it.
    assert driver_java_options(tmp_path, archive_at_exit=tmp_path / "new.jsa").endswith(
        f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}")


def test_an_archive_that_cannot_be_written_is_reported_not_raised(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "cds").write_text("a file where the directory would be")
    monkeypatch.setattr(class_archive, "key", lambda: "k1")
    st = class_archive.ensure(cache=ro)
    assert not st.present and not st.built and "cannot write" in st.error


def test_the_batch_cap_keeps_small_runs_readable_and_scales_with_large_ones(runs_dir):
    assert default_max_batch(3000) == 500 and default_max_batch(10_000) == 500
    assert default_max_batch(200_000) == 10_000 and default_max_batch(10_001) == 501
    assert make_config(events=200_000).max_batch_records == 10_000
    assert make_config(events=200_000, max_batch_records=500).max_batch_records == 500  # the user's value wins


def test_a_new_archive_replaces_only_its_own_installations_older_one(tmp_path):
    live = tmp_path / "other-venv-spark"
    live.mkdir()

    def archive(name, home):
        (tmp_path / f"{name}.jsa").write_bytes(b"x")
        if home is not None:
            (tmp_path / f"{name}.json").write_text(f'{{"spark_home": "{home}"}}')

    archive("driver-same", "/here/spark")
    archive("driver-gone", tmp_path / "deleted-venv")
    archive("driver-unnamed", None)
    archive("driver-other", live)
    _remove_replaced(tmp_path, "/here/spark")
    assert sorted(p.name for p in tmp_path.glob("*.jsa")) == ["driver-other.jsa"]


def test_a_standby_is_kept_for_a_planned_crash_of_a_pipeline_that_waits_for_its_turn_on_a_local_master():
    from lab.registry import PIPELINES

    def wants(tuning, pipeline, master, **kw):  # the supervisor's call: the registry's fact, passed in
        return tuning.wants_standby(PIPELINES[pipeline].waits_for_turn, master, **kw)

    planned, always, off = (StartTuning.from_env({"LAB_STANDBY": v}) for v in ("planned", "always", "off"))
    assert wants(planned, "structured", "local[2]", needed=True)
    assert wants(planned, "direct", "local[2]", needed=True)
    assert wants(planned, "receiver", "local[2]", needed=True)
    assert not wants(planned, "structured", "local[2]", needed=False)
    assert wants(always, "structured", "local[2]", needed=False)
    assert not wants(off, "structured", "local[2]", needed=True)
    # Pipelines whose driver does not wait for its turn, and masters where a session holds executors of its own.
    for pipeline in ("plain", "kafka-eos", "flink"):
        assert not wants(always, pipeline, "local[2]", needed=True)
    for master in ("local-cluster[2,1,1024]", "spark://127.0.0.1:7077"):
        assert not wants(always, "structured", master, needed=True)
    # A run's first driver, beside no other: also on local-cluster, whose executors are its own; never on a shared
    # master.
    assert wants(planned, "receiver", "local-cluster[2,1,1024]", needed=True, first=True)
    assert not wants(planned, "receiver", "spark://127.0.0.1:7077", needed=True, first=True)
