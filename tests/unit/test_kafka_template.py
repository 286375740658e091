"""The formatted one-node template and its copies (lab.broker.template), without a JVM."""

from __future__ import annotations

import threading
import time

import pytest

from lab.broker import template as kafka_template
from lab.errors import LabError

META = "#\n#Tue Nov 24 05:59:43 UTC 2026\nnode.id=1\ndirectory.id=B7jVW9S8TJu7pkpQNA7ZAQ\nversion=1\ncluster.id=OLD\n"


def fake_format(target, calls=None, delay=0.0):
    """What format_data_dir leaves: the directory appears whole (staging renamed)."""
    if calls is not None:
        calls.append(target)
    time.sleep(delay)
    staging = target.with_name(target.name + ".staging")
    (staging / "__cluster_metadata-0").mkdir(parents=True)
    (staging / "meta.properties").write_text(META)
    (staging / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").write_bytes(b"\x00voters")
    staging.rename(target)


def test_a_copy_has_its_own_cluster_id_and_the_template_s_other_bytes(tmp_path):
    template = tmp_path / "cache" / "kafka-data"
    assert kafka_template.ensure_template(template, fake_format)
    a, b = tmp_path / "a" / "kafka-data", tmp_path / "b" / "kafka-data"
    a.parent.mkdir(), b.parent.mkdir()
    assert kafka_template.copy_into(template, a, "CLUSTER-A") and kafka_template.copy_into(template, b, "CLUSTER-B")
    assert "cluster.id=CLUSTER-A\n" in (a / "meta.properties").read_text()
    assert "cluster.id=CLUSTER-B\n" in (b / "meta.properties").read_text()
    assert "cluster.id=OLD\n" in (template / "meta.properties").read_text()  # the template is never changed
    for name in ("__cluster_metadata-0/00000000000000000000-0000000000.checkpoint",):
        assert (a / name).read_bytes() == (template / name).read_bytes()
    assert "directory.id=B7jVW9S8TJu7pkpQNA7ZAQ" in (a / "meta.properties").read_text()
    assert sorted(p.name for p in a.parent.iterdir()) == ["kafka-data"]  # no staging left beside it


def test_a_missing_or_odd_template_is_no_copy_and_leaves_nothing(tmp_path):
    data = tmp_path / "run" / "kafka-data"
    data.parent.mkdir()
    assert not kafka_template.copy_into(tmp_path / "absent", data, "C")
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "meta.properties").write_text("node.id=1\n")  # no cluster.id line to replace
    assert not kafka_template.copy_into(odd, data, "C")
    assert list(data.parent.iterdir()) == []


def test_a_template_that_cannot_be_made_is_reported_as_absent(tmp_path):
    def failing(target):
        raise LabError("Apache Kafka's StorageTool format failed with status 1")

    assert not kafka_template.ensure_template(tmp_path / "k" / "kafka-data", failing)
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert not kafka_template.ensure_template(blocked / "k" / "kafka-data", fake_format)


def test_brokers_starting_together_format_the_template_once(tmp_path):
    template = tmp_path / "cache" / "kafka-data"
    calls, results = [], []
    threads = [threading.Thread(target=lambda: results.append(
        kafka_template.ensure_template(template, lambda t: fake_format(t, calls, delay=0.3)))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True, True, True] and len(calls) == 1


def test_the_template_s_place_changes_with_the_version_and_the_properties(tmp_path):
    base = kafka_template.template_dir("4.1.1", "node.id=1\n", cache=tmp_path)
    assert base.parent.parent == tmp_path / "kafka-format" and base.name == "kafka-data"
    assert kafka_template.template_dir("4.1.1", "node.id=1\n", cache=tmp_path) == base
    assert kafka_template.template_dir("4.2.0", "node.id=1\n", cache=tmp_path) != base
    assert kafka_template.template_dir("4.1.1", "node.id=2\n", cache=tmp_path) != base


def test_lab_kafka_format_names_its_choices(monkeypatch):
    monkeypatch.delenv("LAB_KAFKA_FORMAT", raising=False)
    assert kafka_template.format_mode() == "template"
    monkeypatch.setenv("LAB_KAFKA_FORMAT", "each")
    assert kafka_template.format_mode() == "each"
    monkeypatch.setenv("LAB_KAFKA_FORMAT", "once")
    with pytest.raises(LabError, match="'once'.*each, template"):
        kafka_template.format_mode()


def test_a_partly_cleaned_template_is_made_again_not_copied(tmp_path):
    template = tmp_path / "cache" / "kafka-data"
    calls = []
    assert kafka_template.ensure_template(template, lambda t: fake_format(t, calls))
    (template / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").unlink()
    assert not kafka_template.complete(template)
    assert kafka_template.ensure_template(template, lambda t: fake_format(t, calls))
    assert len(calls) == 2 and kafka_template.complete(template)


def test_a_first_start_clears_what_an_earlier_broker_left_unless_one_runs_on_it(tmp_path):
    import subprocess
    import sys

    from lab.broker.apache import clear_stale

    node, other = tmp_path / "node-1", tmp_path / "node-2"
    assert clear_stale([node]) == 0  # nothing there yet
    for d in (node, other):
        (d / "kafka-data" / "run-topic-0").mkdir(parents=True)
        (d / "kafka.log").write_text(f"the earlier broker's log in {d.name}\n")
    (node / "kafka-data" / ".lock").write_text("")  # left by a JVM killed with -9: the file, no lock
    lock = other / "kafka-data" / ".lock"
    lock.write_text("")
    # A running broker holds a POSIX record lock on .lock (Java's FileChannel.tryLock): another process here.
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl,sys,time\nf=open(sys.argv[1],'a')\n"
                               "fcntl.lockf(f,fcntl.LOCK_EX)\nprint('held',flush=True)\ntime.sleep(60)", str(lock)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LabError, match=r"a running Kafka broker holds .*node-2/kafka-data; end it first"):
            clear_stale([node, other])
        # nothing removed, no log moved, in either directory: all or nothing
        assert (node / "kafka-data" / "run-topic-0").is_dir() and (node / "kafka.log").exists()
        assert lock.exists() and (other / "kafka.log").exists()
    finally:
        holder.kill()
        holder.wait()
    assert clear_stale([node, other]) == 2
    assert not (node / "kafka-data").exists() and not (other / "kafka-data").exists()
    assert (node / "kafka.log.1").read_text() == "the earlier broker's log in node-1\n"
