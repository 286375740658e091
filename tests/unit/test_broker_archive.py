"""The broker JVM's class archive: mapped only when present and on, keyed by its jars, failures reported (no JVM)."""

import os
import sys

import pytest

from lab import broker_archive, class_archive, kafka_broker
from lab.errors import LabError


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


def test_a_failed_training_is_reported_and_nothing_is_left(cache, monkeypatch):
    monkeypatch.setattr(broker_archive, "_build", lambda path: class_archive.build_archive(
        path, "lab.no_such_trainer_module", str(cache)))
    st = broker_archive.ensure()
    assert not st.present and not st.built and "ended with code 1" in st.error
    assert sorted(p.name for p in (cache / "cds").iterdir()) == [".lock"]


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
    assert broker_archive.ensure().built is False  # present: not built again


def test_the_key_follows_the_jars(tmp_path, monkeypatch):
    from lab import jars
    from lab.java import Java

    jar = tmp_path / "kafka.jar"
    jar.write_bytes(b"a")
    monkeypatch.setattr("lab.java.find_java", lambda: Java("/j", "/j/bin/java", 17, "17.0.1"))
    monkeypatch.setattr(jars, "classpath", lambda name, **kw: str(jar))
    first = broker_archive.key()
    assert broker_archive.key() == first
    jar.write_bytes(b"ab")  # another size: another archive
    assert broker_archive.key() != first
