"""The storm pipeline's pure parts: settings, the topology spec, ZooKeeper's config, the bridge's writer, the views."""

import json

import pytest

from lab import events as ev
from lab.config import make_config
from lab.errors import LabError
from lab.faults.plan import parse_fault_plan
from lab.host.java_build import JavaSources
from lab.pipelines import storm as storm_pipeline
from lab.registry import PIPELINES
from lab.storm import settings, zookeeper
from lab.views import storm as storm_view


def test_each_mode_has_its_default_sink_and_the_label_names_it():
    assert (make_config(pipeline="storm").sink == "append"
            and make_config(pipeline="storm").option("storm_mode") == "acked")
    assert make_config(pipeline="storm", storm_mode="trident").sink == "transactional"
    assert make_config(pipeline="storm", storm_mode="trident", sink="append").sink == "append"
    label = PIPELINES["storm"].label
    assert label("transactional", {"storm_mode": "trident"}, "") == "storm, Trident, transactional sink"
    assert label("append", {"storm_mode": "unacked"}, "") == "storm, no acker, append sink"


@pytest.mark.parametrize("params, words", [
    ({"pipeline": "storm", "storm_mode": "trident-ish"}, ["'trident-ish'", "unacked", "acked", "trident"]),
    ({"pipeline": "plain", "storm_mode": "trident"}, ["--storm-mode", "'plain'"]),
    ({"pipeline": "storm", "sink": "files"}, ["'files'", "structured"]),
])
def test_bad_storm_settings_are_one_line_naming_the_choices(params, words):
    with pytest.raises(LabError) as e:
        make_config(**params)
    assert "\n" not in str(e.value) and all(w in str(e.value) for w in words), str(e.value)


def test_bolt_fail_needs_the_acker_and_a_batch():
    cfg = make_config(pipeline="storm", faults="bolt-fail@batch=2:count=5")
    assert cfg.fault_plan[0].count == 5
    for mode in ("unacked", "trident"):
        with pytest.raises(LabError, match="--storm-mode acked"):
            make_config(pipeline="storm", storm_mode=mode, faults="bolt-fail@batch=2")
    with pytest.raises(LabError):
        make_config(pipeline="plain").check_fault(parse_fault_plan("bolt-fail@batch=2")[0])


def test_the_spec_keeps_trident_state_per_run_and_cluster_state_per_attempt():
    cfg = make_config(pipeline="storm", storm_mode="trident", batch_interval_s=0.5, max_batch_records=200)
    zk = {"host": "127.0.0.1", "port": 2181}
    one = settings.topology_spec(cfg, run_id="r", attempt=1, bootstrap="b:1", zookeeper=zk, local_dir="/x")
    two = settings.topology_spec(cfg, run_id="r", attempt=2, bootstrap="b:1", zookeeper=zk, local_dir="/x")
    assert one["transactional_root"] == two["transactional_root"] and one["stream"] == two["stream"]
    assert one["cluster_root"] != two["cluster_root"]
    assert (one["batch_interval_ms"], one["max_batch_records"], one["poll_timeout_ms"]) == (500, 200, 2000)
    assert one["group"] == "lab-r" and one["zookeeper_port"] == 2181


def test_a_run_name_with_a_dot_makes_a_topology_name_storm_accepts():
    cfg = make_config(pipeline="storm", name="rep1.5")
    spec = settings.topology_spec(cfg, run_id="20261202-183022-084-rep1.5", attempt=1, bootstrap="b:1",
                                  zookeeper={"host": "127.0.0.1", "port": 1}, local_dir="/x")
    # Nimbus.validateTopologyName: ^[^/.:\\]+$
    assert not set(spec["name"]) & set("/.:\\") and spec["name"].endswith("rep1-5")


@pytest.mark.parametrize("name", ["a b", "-x", "x/y", "run:1", "x" * 102])
def test_a_run_name_the_topic_and_the_engines_cannot_take_is_refused(name):
    with pytest.raises(LabError, match="valid are 1 to 101 letters, digits"):
        make_config(pipeline="plain", name=name)


def test_a_dead_jvm_is_reported_by_its_first_error_and_its_cause(tmp_path):
    from lab.host.bridge import first_error

    log = tmp_path / "topology.log"
    log.write_text("18:35:47.000 INFO  o.a.s.d.w.Worker - Launching worker\n"
                   "18:35:48.019 ERROR o.a.s.u.Utils - Async loop died!\n"
                   "java.lang.RuntimeException: java.lang.NullPointerException: map is null\n"
                   "\tat org.apache.storm.executor.Executor.acceptTupleAction(Executor.java:305)\n"
                   "Caused by: java.lang.NullPointerException: map is null\n"
                   "\tat org.apache.storm.kafka.spout.trident.KafkaTridentSpoutBatchMetadata.fromMap(X.java:81)\n"
                   "18:35:48.076 ERROR o.a.s.u.Utils - Halting process: Worker died\n"
                   "java.lang.RuntimeException: Halting process: Worker died\n"
                   "\tat java.base/java.lang.Thread.dispatchUncaughtException(Thread.java:2017)\n")
    said = first_error(log)
    assert "Async loop died!" in said and said.endswith("Caused by: java.lang.NullPointerException: map is null")
    log.write_text("no error here\nlast line\n")
    assert first_error(log) == "last line"


def test_zookeeper_listens_on_loopback_only_without_its_admin_server(tmp_path):
    text = zookeeper.config_text(2181, tmp_path)
    assert "clientPortAddress=127.0.0.1" in text and "admin.enableServer=false" in text
    assert f"dataDir={tmp_path}" in text


def test_the_classes_key_follows_the_sources(tmp_path, monkeypatch):
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "A.java").write_text("class A {}")
    sources = JavaSources("x", tmp_path, "storm", "lab.A")
    before = sources.key()
    (tmp_path / "lab" / "A.java").write_text("class A { int x; }")
    assert sources.key() != before and len(before) == 16


def test_a_new_version_of_the_classes_keeps_another_in_use_and_removes_one_long_unused(tmp_path, monkeypatch):
    import os
    import time

    from lab.host import jars, java_build

    (tmp_path / "src" / "lab").mkdir(parents=True)
    (tmp_path / "src" / "lab" / "A.java").write_text("class A {}")
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(jars, "classpath", lambda name, **kw: "jars")
    monkeypatch.setattr(JavaSources, "_compile", lambda self, target: target.mkdir())
    sources = JavaSources("x", tmp_path / "src", "storm", "lab.A")
    in_use = sources.classes_dir().parent / "classes-of-another-checkout"
    unused = sources.classes_dir().parent / "classes-of-last-month"
    for d in (in_use, unused):
        d.mkdir(parents=True)
    long_ago = time.time() - java_build.UNUSED_FOR_S - 60
    os.utime(unused, (long_ago, long_ago))
    assert sources.ensure() == f"{sources.classes_dir()}:jars"
    assert in_use.exists() and not unused.exists()


class FakeCtx:
    def __init__(self, mode, faults=""):
        self.config = make_config(pipeline="storm", storm_mode=mode, faults=faults)
        self.attempt, self.written, self.points = 2, [], []
        self.pending = list(self.config.fault_plan)

    def last_batch(self):
        return 4

    def batch_start(self, batch, ranges, rows, **extra):
        self.written.append(("start", batch, ranges, rows, extra))

    def batch_done(self, batch, rows, **extra):
        self.written.append(("done", batch, rows, extra))

    def progress(self, positions, batch):
        self.written.append(("progress", dict(positions), batch))

    def point(self, name, batch):
        self.points.append((name, batch))

    def fault_due(self, kind, batch):
        for f in self.pending:
            if f.kind == kind and f.batch == batch:
                self.pending.remove(f)
                return f
        return None


class FakeSink:
    def __init__(self, outcome="written"):
        self.calls, self.outcome = [], outcome

    def write_batch(self, rows, key, on_midway=None):
        self.calls.append((list(rows), key))
        on_midway()
        return self.outcome


def value(i):
    return json.dumps({"id": f"e{i}", "seq": i, "key": "k"})


def test_the_writer_numbers_batches_keys_them_and_counts_replays():
    ctx, sink = FakeCtx("acked", "bolt-fail@batch=5:count=2"), FakeSink()
    writer = storm_pipeline._Writer(ctx, sink, {0: 10})
    answer = writer.write({"op": "write", "rows": [[0, 8, value(8)], [0, 10, value(10)], [1, 0, value(0)]]})
    assert answer == {"batch": 5, "fail": [0, 1]}
    rows, key = sink.calls[0]
    assert key == "storm-2-5" and [r[2:] for r in rows] == [(0, 8), (0, 10), (1, 0)]
    start, done, progress = ctx.written
    assert start[2] == {0: (8, 11), 1: (0, 1)} and start[4] == {"replayed": 1}
    assert done[3] == {"outcome": "written", "failed": 2} and progress == ("progress", {0: 11, 1: 1}, 5)
    assert ctx.points == [("mid-output", 5), ("after-output-before-commit", 5)]
    assert writer.write({"op": "write", "rows": [[1, 1, value(1)]]}) == {"batch": 6, "fail": []}


def test_a_trident_batch_is_keyed_by_its_txid_and_never_fails_tuples():
    ctx, sink = FakeCtx("trident"), FakeSink("skipped")
    writer = storm_pipeline._Writer(ctx, sink, {})
    assert writer.write({"op": "write", "txid": 7, "rows": [[0, 0, value(0)]]}) == {"batch": 5, "fail": []}
    assert sink.calls[0][1] == "trident-7" and ctx.written[1][3] == {"outcome": "skipped", "failed": 0, "txid": 7}


class Result:
    def __init__(self, run_dir):
        self.run_dir = run_dir


def test_the_views_read_replayed_txids_from_the_timeline(tmp_path):
    log = ev.EventLog(tmp_path, "driver")
    for attempt, rows, ranges in ((1, 3, {"0": [0, 3]}), (2, 3, {"0": [0, 3]})):
        log.write(ev.BATCH_START, batch=attempt - 1, rows=rows, ranges=ranges, attempt=attempt, txid=1, replayed=0)
    log.write(ev.BATCH_DONE, batch=1, rows=3, attempt=2, outcome="skipped", failed=0, txid=1)
    log.write(ev.STORM_COMMIT, txid=1, attempt=2)
    table = storm_view.batches(Result(tmp_path))
    assert list(table["sink"]) == ["killed before it returned", "skipped"] and list(table["committed"]) == [False, True]
    replays = storm_view.replayed_transactions(Result(tmp_path))
    assert replays.to_dict("records")[0]["same records"] is True


def test_lab_doctor_names_lab_fetch_for_an_uncompiled_topology(tmp_path, monkeypatch):
    from lab import doctor

    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    for check in doctor.check_java_classes():
        assert not check.ok and check.optional and check.fix == "lab fetch" and "not compiled" in check.detail



def test_the_timeline_marks_the_rows_a_batch_replayed(tmp_path):
    from lab.views import plots

    log = ev.EventLog(tmp_path, "driver")
    log.write(ev.RUN_START, pipeline="storm")
    log.write(ev.BATCH_START, batch=0, rows=10, ranges={"0": [0, 10]}, attempt=1, replayed=0)
    log.write(ev.BATCH_DONE, batch=0, rows=10, attempt=1)
    log.write(ev.BATCH_START, batch=1, rows=10, ranges={"0": [5, 15]}, attempt=2, replayed=5)
    log.write(ev.BATCH_DONE, batch=1, rows=10, attempt=2)
    fig = plots.timeline(ev.read_events(tmp_path))
    [replays] = [t for t in fig.data if t.name.startswith("of them replayed")]
    assert list(replays.y) == [5] and list(replays.customdata) == [1]
