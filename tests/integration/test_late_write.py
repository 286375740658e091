"""The late write with each client, on the three-broker cluster (lab.lessons.late_write).

One transactional produce request is kept by the partition leader's proxy until the client has ended that
transaction and opened the next on the same partition; then it reaches the leader. The checks are what the run's
own files and reads decide: the request kept is the late transaction's (its producer id and epoch are the ones the
log holds for that transaction's records), it reached the leader while the next transaction was open, the leader
answered it, and the readers' counts agree with the verdict. One cluster for the module, each client its own topic.
"""

import pytest

from lab.broker import shared as shared_broker
from lab.lessons.late_write import LATE_INDEX, run
from tests.integration.conftest import module_cluster

pytestmark = [pytest.mark.integration, pytest.mark.own_broker, pytest.mark.timeout(600),
              pytest.mark.xdist_group("test_late_write")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with module_cluster(tmp_path_factory) as path:
        yield shared_broker.load_running(path)


def check_the_late_request(r):
    """What holds whatever the broker did: the right request kept, sent late into an open transaction, answered."""
    assert not r.could_not_show, r.could_not_show
    assert r.leader != r.coordinator and r.released_while_open, r
    assert r.held["state"] == "answered" and r.held["held_at"] < r.held["released_at"] < r.held["answered_at"], r.held
    assert r.held["client_id"].startswith("lab-txn-producer"), r.held
    mine = [t for t in r.logged if t.records and t.partition == r.partition]
    late_txn = mine[LATE_INDEX]
    # the kept batch is the late transaction's: the producer id and epoch its records were logged under
    assert (r.late["producer_id"], r.late["epoch"]) == (late_txn.producer_id, late_txn.data_epochs[0]), (r.late, mine)
    assert len(r.answer) == 1 and r.answer[0]["partition"] == r.partition, r.answer
    return mine


def test_the_java_client_s_late_write_is_fenced_by_its_old_epoch(cluster):
    r = run(cluster, "java")
    mine = check_the_late_request(r)
    assert r.version == "kafka-clients 4.4.0"
    # KIP-890 part 2: the transaction open when the late request came is under a newer epoch than the request's
    assert mine[LATE_INDEX + 1].data_epochs[0] > r.late["epoch"], mine
    a = r.audit()
    assert (a["lost"], a["duplicated"], a["aborted_read"]) == (0, 0, 0), a
    assert r.answer[0]["error"] in ("INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"), r.answer
    assert r.summary()["verdict"].startswith("fenced"), r.summary()


def test_kafka_python_s_late_write_is_answered_as_the_duplicate_its_sequence_number_makes_it(cluster):
    # The older protocol keeps one epoch, so the epoch does not stop the late request. Its batch's sequence numbers
    # are the retry's, which the leader appended already: among the last five batches it keeps per producer, so it
    # answers with the offset of that first copy and appends nothing (measured: NONE; Kafka's documented answer to
    # a duplicate batch).
    r = run(cluster, "python")
    mine = check_the_late_request(r)
    assert r.version.startswith("kafka-python")
    assert len({t.data_epochs for t in mine}) == 1 and r.late["epoch"] == mine[LATE_INDEX + 1].data_epochs[0], mine
    a = r.audit()
    assert (a["lost"], a["duplicated"], a["aborted_read"]) == (0, 0, 0), a
    assert a["late_copies_uncommitted"] == a["late_expected_uncommitted"] == r.records_per_transaction(), a
    assert r.answer[0]["error"] in ("NONE", "DUPLICATE_SEQUENCE_NUMBER"), r.answer
    assert r.answer[0]["base_offset"] == mine[LATE_INDEX].first_offset, (r.answer, mine[LATE_INDEX])
    assert r.summary()["verdict"].startswith("recognised as a duplicate"), r.summary()
