"""The broker JVM's class archive: mapped only when present and on, keyed by its jars, failures reported (no JVM)."""

import json
import os
import sys

import pytest

from lab.broker import apache as kafka_broker, archive as broker_archive
from lab.errors import LabError
from lab.host import class_archive


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(broker_archive.SWITCH, raising=False)
    monkeypatch.setattr(broker_archive, "key", lambda: "k1")
    return tmp_path


def test_a_broker_maps_the_archive_only_when_it_exists_and_is_on(cache, monkeypatch):
    assert broker_archive.java_options() == []
    assert not any("SharedArchiveFile" in f for f in kafka_broker.jvm_flags())
    archive = cache / "cds" / "broker-k1.jsa"
    archive.parent.mkdir()
    archive.write_bytes(b"x")
    assert broker_archive.java_options() == [f"-XX:SharedArchiveFile={archive}"]
    assert kafka_broker.jvm_flags()[-1] == f"-XX:SharedArchiveFile={archive}"
    assert kafka_broker.jvm_flags()[:len(kafka_broker.KAFKA_JVM_FLAGS)] == list(kafka_broker.KAFKA_JVM_FLAGS)
    # The training broker writes a new archive instead of mapping today's.
    flags = kafka_broker.jvm_flags(archive_at_exit=cache / "new.jsa")
    assert flags[-1] == f"-XX:ArchiveClassesAtExit={cache / 'new.jsa'}" and "SharedArchiveFile" not in " ".join(flags)
    monkeypatch.setenv(broker_archive.SWITCH, "off")
    assert broker_archive.java_options() == [] and broker_archive.ensure() is None


def test_a_bad_switch_value_names_the_choices(cache, monkeypatch):
    monkeypatch.setenv(broker_archive.SWITCH, "maybe")
    with pytest.raises(LabError) as e:
        broker_archive.ensure()
    assert all(w in str(e.value) for w in ("LAB_BROKER_ARCHIVE", "maybe", "on", "off"))
    assert broker_archive.java_options() == []  # a broker's start never fails for it


def test_a_failed_training_is_reported_once_and_tried_again_only_when_asked(cache, monkeypatch):
    builds = []

    def failing(path):
        builds.append(path)
        return class_archive.build_archive(path, "lab.no_such_trainer_module", str(cache))

    monkeypatch.setattr(broker_archive, "_build", failing)
    st = broker_archive.ensure()
    assert not st.present and not st.built and "ended with code 1" in st.error
    assert sorted(p.name for p in (cache / "cds").iterdir()) == [".lock", "broker-k1.jsa.failed"]
    # The next broker starts do not train again (each would cost a training's seconds) ...
    again = broker_archive.ensure()
    assert len(builds) == 1 and not again.present and "an earlier build failed" in again.error
    assert "ended with code 1" in again.error and "lab fetch" in again.error
    # ... `lab fetch` does.
    assert not broker_archive.ensure(retry=True).present and len(builds) == 2


def test_a_training_that_writes_its_archive_puts_it_in_place_named_by_its_home(cache, monkeypatch):
    trainer = cache / "fake_trainer.py"
    trainer.write_text("import sys; open(sys.argv[2], 'wb').write(b'archive')\n")
    monkeypatch.syspath_prepend(str(cache))
    old = cache / "cds" / "broker-old.jsa"  # the same jar directory's earlier archive: replaced
    old.parent.mkdir()
    old.write_bytes(b"x")
    old.with_suffix(".json").write_text(f'{{"home": "{cache}"}}')
    driver = cache / "cds" / "driver-d.jsa"  # another kind's: kept
    driver.write_bytes(b"x")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(cache), *sys.path]))
    monkeypatch.setattr(broker_archive, "_build", lambda path: class_archive.build_archive(
        path, "fake_trainer", str(cache)))
    st = broker_archive.ensure()
    assert st.present and st.built and st.error is None
    assert (cache / "cds" / "broker-k1.jsa").read_bytes() == b"archive"
    assert sorted(p.name for p in (cache / "cds").glob("*.jsa")) == ["broker-k1.jsa", "driver-d.jsa"]
    assert json.loads((cache / "cds" / "broker-k1.json").read_text()) == {"home": str(cache)}
    assert broker_archive.ensure().built is False  # present: not built again


def test_the_key_follows_the_jars_and_never_downloads_them(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from lab.host import jars
    from lab.host.java import Java

    jar = tmp_path / "kafka.jar"
    jar.write_bytes(b"a")
    monkeypatch.setattr("lab.host.java.find_java", lambda: Java("/j", "/j/bin/java", 17, "17.0.1"))
    monkeypatch.setattr(jars, "missing", lambda name, **kw: [])
    monkeypatch.setattr(jars, "set_dir", lambda name, **kw: tmp_path)
    monkeypatch.setattr(jars, "jar_set", lambda name: SimpleNamespace(jars=[SimpleNamespace(file="kafka.jar")]))
    monkeypatch.setattr(jars, "ensure", lambda *a, **kw: pytest.fail("a key must not fetch jars"))
    first = broker_archive.key()
    assert broker_archive.key() == first
    jar.write_bytes(b"ab")  # another size: another archive
    assert broker_archive.key() != first
    monkeypatch.setattr(jars, "missing", lambda name, **kw: ["kafka.jar"])
    with pytest.raises(LabError, match="not cached"):
        broker_archive.key()


def test_the_training_broker_does_not_wait_for_its_own_archive(tmp_path, monkeypatch):
    """start_embedded(archive_at_exit=...) skips ensure(): the training holds the lock ensure() would wait on."""
    from lab.broker import embedded as broker

    monkeypatch.setattr(broker_archive, "ensure", lambda *a, **kw: pytest.fail("the training must not ensure"))
    monkeypatch.setattr(kafka_broker, "clear_stale", lambda dirs: 0)
    monkeypatch.setattr(kafka_broker, "prerequisites", lambda: ("java", "cp", "4.1.1"))
    from types import SimpleNamespace

    monkeypatch.setattr(broker.proxy_start, "start", lambda *a: (SimpleNamespace(pid=6), 1, 2))
    monkeypatch.setattr(broker.proxy_start, "set_upstream", lambda *a: None)
    started = []
    monkeypatch.setattr(kafka_broker, "start", lambda *a: started.append(a) or (SimpleNamespace(pid=7), 3))
    info = broker.start_embedded(tmp_path, archive_at_exit=tmp_path / "new.jsa")
    assert info.broker_pid == 7 and started[0][-1] == tmp_path / "new.jsa"
    with pytest.raises(LabError, match="one Apache Kafka node"):
        broker.start_embedded(tmp_path, nodes=3, archive_at_exit=tmp_path / "new.jsa")


def test_a_bad_switch_value_stops_a_run_at_its_start_whatever_its_broker():
    from lab.host.start_tuning import StartTuning

    with pytest.raises(LabError, match="LAB_BROKER_ARCHIVE"):
        StartTuning.from_env({"LAB_BROKER_ARCHIVE": "maybe"})


def test_archives_made_before_the_broker_s_are_still_recognised_by_their_spark_home(tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    for name, home in (("driver-same", "/here/spark"), ("driver-live", live)):
        (tmp_path / f"{name}.jsa").write_bytes(b"x")
        (tmp_path / f"{name}.json").write_text(json.dumps({"spark_home": str(home)}))
    (tmp_path / "driver-odd.jsa").write_bytes(b"x")
    (tmp_path / "driver-odd.json").write_text(json.dumps({"home": 5}))  # not a path: replaced, not a crash
    class_archive._remove_replaced(tmp_path, "/here/spark")
    assert sorted(p.name for p in tmp_path.glob("*.jsa")) == ["driver-live.jsa"]
