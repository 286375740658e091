"""The fencing experiment (lab/lessons/fencing.py) against the session's Apache Kafka, with real child processes."""

import json

import psutil
import pytest

from lab.broker import shared as shared_broker
from lab.lessons import fencing

pytestmark = pytest.mark.integration


def test_a_killed_or_paused_producer_is_fenced_and_its_open_transaction_hidden_from_read_committed(runs_dir, tmp_path):
    info = shared_broker.load_running(runs_dir)
    assert info is not None and info.product == "apache-kafka"
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    r = fencing.measure(info, tmp_path / "fencing", records=15, successor_records=7)
    # killed mid-transaction: its 15 records are in the log, aborted by the successor's init_transactions()
    assert (r.killed_read_uncommitted, r.killed_read_committed) == (15, 0), r
    assert (r.killed_successor_read_uncommitted, r.killed_successor_read_committed) == (7, 7), r
    same_id = r.killed_successor_epoch[0] == r.killed_epoch[0]
    assert same_id and r.killed_successor_epoch[1] > r.killed_epoch[1], "the same producer id, a higher epoch"
    # paused, replaced, continued: its commit is refused with Kafka's fencing error
    assert (r.zombie_error_module, r.zombie_error) == ("kafka.errors", "ProducerFencedError"), r
    assert (r.zombie_read_uncommitted, r.zombie_read_committed) == (15, 0), r
    assert (r.zombie_successor_read_uncommitted, r.zombie_successor_read_committed) == (7, 7), r
    assert r.zombie_successor_epoch[1] > r.zombie_epoch[1]
    # both children wrote their ready marker with their own PID; neither is left running
    for case in ("killed", "zombie"):
        pid = json.loads((tmp_path / "fencing" / case / fencing.READY_FILE).read_text())["pid"]
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
    assert json.loads((tmp_path / "fencing" / "result.json").read_text()) == r.to_dict()

