"""Transactions v1 against v2 on the lab's broker (``transaction.version`` 2): the same transactions by kafka-python
and by Kafka's Java client, then the broker's log read for each transaction's producer id and epochs.

Expected from KIP-890 part 2: a client on the new protocol gets a new epoch at every transaction's end (its end
marker written one epoch above its records, its next transaction's records under the marker's); the older protocol
keeps one epoch.
"""

from __future__ import annotations

import pytest

from lab.broker.log_files import broker_data_dir
from lab.lessons.txn_epochs import compare

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_the_java_client_gets_a_new_epoch_per_transaction_and_kafka_python_keeps_one(session_broker):
    python, java = compare(session_broker.bootstrap, broker_data_dir(session_broker), transactions=5, records=20,
                           abort_every=3, partitions=2)
    for c in (python, java):
        s = c.summary()
        assert (s["committed"], s["aborted"], s["producer ids"]) == (4, 1, 1), s
        # every transaction ended in each partition it wrote, as the client said it ended
        logged = [t for t in c.logged if t.records]
        assert len(logged) == 10 and all(t.outcome is not None for t in logged), logged
        for r in c.reported:
            ended = {t.outcome for t in logged if any(lo <= t.first_offset <= hi and t.partition == int(p)
                                                      for p, (lo, hi) in r["offsets"].items())}
            assert ended == {r["outcome"]}, (r, ended)
    assert python.version.startswith("kafka-python") and java.version == "kafka-clients 4.4.0"
    assert python.summary()["one epoch"] and python.summary()["markers above the data epoch"] == 0
    j = java.summary()
    assert j["a new epoch per transaction"] and j["data epochs"] == [0, 1, 2, 3, 4], j
    for t in java.logged:  # the marker one above the records; the next transaction's records under the marker's
        assert t.marker_epoch == t.data_epochs[0] + 1, t


def test_a_transactional_run_reports_its_transactions_as_the_broker_logged_them(runs_dir):
    from lab.config import make_config
    from lab.run.supervisor import run_scenario
    from lab.sinks.topic import output_topic

    result = run_scenario(make_config(pipeline="kafka-eos", events=1500, rate=1000, transactional=True))
    logged = result.report["transactions_in_log"]
    cfg = result.config
    assert set(logged) == {cfg.topic, output_topic(cfg.topic)}, logged
    # kafka-python on both sides, the ledgered producer and the driver: one producer id each, one epoch, no bump
    for topic, producers in logged.items():
        (p,) = producers.values()
        assert p["one_epoch"] and p["markers_above_data"] == 0 and p["transactions"] > 0, (topic, p)
    assert logged[cfg.topic] != logged[output_topic(cfg.topic)]
