"""The late write's pure parts (lab.lessons.late_write): the readers' counts and the verdict they decide."""

import pytest

from lab.errors import LabError
from lab.lessons.late_write import LATE_INDEX, audit_copies, run, verdict, written_again

RECORDS = 4


def reported(*outcomes):
    return [{"index": i, "outcome": o, "records": RECORDS} for i, o in enumerate(outcomes)]


def once(*transactions):
    return {t: {j: 1 for j in range(RECORDS)} for t in transactions}


def test_every_committed_record_once_and_no_aborted_one_is_a_clean_audit():
    copies = {"read_committed": once(0, 1, 2, 3), "read_uncommitted": once(0, 1, 2, 3)}
    a = audit_copies(reported("COMMIT", "COMMIT", "COMMIT", "COMMIT"), copies, RECORDS)
    assert a == {"lost": 0, "duplicated": 0, "aborted_read": 0, "late_copies_uncommitted": RECORDS,
                 "late_expected_uncommitted": RECORDS}
    assert verdict("INVALID_PRODUCER_EPOCH", a) == "fenced: an epoch older than the producer's (INVALID_PRODUCER_EPOCH)"
    assert verdict("NONE", a).startswith("recognised as a duplicate")
    assert verdict("INVALID_TXN_STATE", a) == "refused (INVALID_TXN_STATE)"
    assert verdict(None, a) == "no answer"


def test_a_late_copy_taken_into_the_next_committed_transaction_is_let_through():
    committed = once(0, 1, 2, 3)
    committed[LATE_INDEX] = {j: 2 for j in range(RECORDS)}  # read twice: the retry's copy and the late one
    copies = {"read_committed": committed, "read_uncommitted": committed}
    a = audit_copies(reported("COMMIT", "COMMIT", "COMMIT", "COMMIT"), copies, RECORDS)
    assert (a["duplicated"], a["late_copies_uncommitted"]) == (RECORDS, 2 * RECORDS)
    assert verdict("NONE", a) == f"let through: {RECORDS} duplicated, 0 aborted records read, 0 lost"


def test_an_aborted_transaction_s_records_read_committed_are_an_aborted_read():
    # the client aborted the late transaction (its send failed); its late copy landed in the next, committed one
    copies = {"read_committed": {**once(0, 2, 3), LATE_INDEX: {j: 1 for j in range(RECORDS)}},
              "read_uncommitted": {**once(0, 2, 3), LATE_INDEX: {j: 2 for j in range(RECORDS)}}}
    a = audit_copies(reported("COMMIT", "ABORT", "COMMIT", "COMMIT"), copies, RECORDS)
    assert (a["aborted_read"], a["lost"], a["duplicated"]) == (RECORDS, 0, 0)
    assert verdict("NONE", a).startswith("let through: 0 duplicated, 4 aborted records read")


def test_a_late_copy_written_only_where_readers_skip_it_says_so():
    copies = {"read_committed": once(0, 1, 2, 3),
              "read_uncommitted": {**once(0, 2, 3), LATE_INDEX: {j: 2 for j in range(RECORDS)}}}
    a = audit_copies(reported("COMMIT", "COMMIT", "COMMIT", "COMMIT"), copies, RECORDS)
    assert verdict("NONE", a) == "written again, in a transaction the readers skip"


def test_a_failed_late_transaction_expects_no_count_of_copies():
    # the client's late transaction failed: whatever of it the log holds, nothing says how many copies it should
    copies = {"read_committed": once(0, 2, 3), "read_uncommitted": {**once(0, 2, 3), LATE_INDEX: {0: 1}}}
    a = audit_copies(reported("COMMIT", "FAILED"), copies, RECORDS)
    assert (a["late_expected_uncommitted"], a["late_copies_uncommitted"], written_again(a)) == (None, 1, None)
    assert verdict("NONE", a).startswith("answered NONE; its transaction failed at the client")
    assert verdict("INVALID_PRODUCER_EPOCH", a).startswith("fenced")


def test_a_committed_transaction_missing_records_counts_them_lost():
    copies = {"read_committed": {**once(0, 2, 3), LATE_INDEX: {0: 1}}, "read_uncommitted": once(0, 1, 2, 3)}
    assert audit_copies(reported("COMMIT", "COMMIT", "COMMIT", "COMMIT"), copies, RECORDS)["lost"] == RECORDS - 1


def test_an_unknown_client_or_a_single_broker_is_one_line_naming_the_valid_choices():
    class Single:
        nodes = []
        bootstrap = "127.0.0.1:9"

    with pytest.raises(LabError, match="unknown client 'go'; valid: python, java"):
        run(Single(), "go")
    with pytest.raises(LabError, match="three-broker cluster"):
        run(Single(), "java")
