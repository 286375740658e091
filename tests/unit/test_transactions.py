"""A transactional writer's own checks: every send acknowledged before a commit, every call bounded."""

import threading

import pytest
from kafka.errors import KafkaTimeoutError
from kafka.future import Future

from lab.kafka.transactions import CallTimedOut, SendFailed, Sends, bounded


def done(error=None):
    f = Future()
    f.failure(error) if error else f.success(None)
    return f


def test_sends_all_acknowledged_pass():
    sends = Sends()
    for _ in range(3):
        sends.add(done())
    sends.check()
    assert len(sends) == 3


def test_a_failed_send_is_named_with_the_count():
    sends = Sends()
    for f in (done(), done(KafkaTimeoutError("Expiring 20 record(s)")), done(), done(KafkaTimeoutError("again"))):
        sends.add(f)
    with pytest.raises(SendFailed, match=r"2 of 4 sends of the transaction not acknowledged; the first: "
                                         r"KafkaTimeoutError") as e:
        sends.check()
    assert (e.value.failed, e.value.sent) == (2, 4)


def test_a_send_not_completed_after_flush_counts_as_failed():
    sends = Sends()
    sends.add(Future())
    with pytest.raises(SendFailed, match="not completed after flush"):
        sends.check()


def test_bounded_returns_the_result_or_the_error():
    assert bounded(lambda: 42, 1.0, "answer") == 42
    with pytest.raises(KafkaTimeoutError):
        bounded(lambda: (_ for _ in ()).throw(KafkaTimeoutError("no coordinator")), 1.0, "commit")


def test_bounded_gives_up_on_a_call_that_never_returns():
    never, returned = threading.Event(), []

    def commit():
        never.wait()
        returned.append(True)

    with pytest.raises(CallTimedOut, match=r"commit_transaction\(\) did not return within 0.1 s"):
        bounded(commit, 0.1, "commit_transaction()")
    assert returned == []  # given up on while the call still waited
    never.set()
