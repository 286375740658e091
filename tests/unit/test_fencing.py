"""lab/lessons/fencing.py without a broker: what it refuses, and its result's table."""

import pytest

from lab.broker.embedded import BrokerInfo
from lab.errors import LabError
from lab.lessons import fencing


def test_bad_record_counts_are_refused(tmp_path):
    kafka = BrokerInfo(bootstrap="127.0.0.1:1", product="apache-kafka")
    with pytest.raises(LabError, match="records and successor_records must be >= 1, got 0 and 5"):
        fencing.measure(kafka, tmp_path, records=0, successor_records=5)


def test_the_table_has_one_row_per_producer_with_both_isolation_levels():
    counts = {f"{who}_{level}": n for n, (who, level) in enumerate(
        (w, lvl) for w in ("killed", "killed_successor", "zombie", "zombie_successor")
        for lvl in ("read_uncommitted", "read_committed"))}
    r = fencing.FencingResult(broker="apache-kafka 4.1.1", records=20, successor_records=10, killed_epoch=[0, 0],
                              killed_successor_epoch=[0, 2], zombie_epoch=[1, 0], zombie_successor_epoch=[1, 2],
                              zombie_error="ProducerFencedError", zombie_error_module="kafka.errors",
                              zombie_message="[Error 90] ProducerFencedError", **counts)
    rows = r.table()
    assert [(row["case"], row["records sent"]) for row in rows] == [("killed", 20), ("killed", 10),
                                                                    ("zombie", 20), ("zombie", 10)]
    assert [(row["read_uncommitted"], row["read_committed"]) for row in rows] == [(0, 1), (2, 3), (4, 5), (6, 7)]
