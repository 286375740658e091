"""What a transactional writer checks itself before it trusts kafka-python: its sends, and its time.

Every transactional producer of the lab (the kafka-eos driver and its changelog, the ledgered producer
with ``--transactional on``, the fencing lesson) keeps one rule: **a transaction is committed only after
every send in it was acknowledged**, and every call into the client returns within a bound.

Why the lab checks, rather than trusting ``commit_transaction()`` to refuse
----------------------------------------------------------------------------
kafka-python 3.0.12 (``kafka/producer/sender.py``, ``Sender._dispatch_error``) completes a batch that
ran out of its delivery timeout with a retriable error "without any state transition" (its own
comment): the transaction is not made abortable, so ``commit_transaction()`` succeeds and commits the
transaction without that batch's records, while the consumed offsets sent with it move past them.
Measured on the lab's three-broker cluster (a leader crash, issue 79) and on purpose with the
``leader-unreachable`` fault: events acknowledged to the producer, lost from the output. The Java client
had the same defect until KAFKA-5385 (2017), where an expired batch moves the transaction to an
abortable error. The send's future does fail (``KafkaTimeoutError``), so a writer that looks at its
futures before it commits is safe: :class:`Sends`.

kafka-python's ``send_offsets_to_transaction()``, ``commit_transaction()`` and
``abort_transaction()`` wait for their answer without a bound (``TransactionalRequestResult.wait()``
with no timeout), where the Java client bounds them by ``max.block.ms``. A coordinator that never
answers would hold the writer for good: :func:`bounded` waits for such a call at most a given time,
and the writer then ends (a restarted writer's ``init_transactions()`` settles the transaction).

Delivery guarantee: none of its own; these are the checks that let the writer's guarantee hold.
"""

from __future__ import annotations

import threading


def transactional_id(run_id: str) -> str:
    """The kafka-eos producer's ``transactional_id``: one per run, the same for every driver attempt (and the
    client id prefix the leader-unreachable fault cuts off)."""
    return f"lab-{run_id}-eos"

class SendFailed(Exception):
    """A send of the open transaction was not acknowledged: the transaction must be aborted, not committed.

    Attributes
    ----------
    failed : int
        Sends of the transaction that failed or had not completed.
    sent : int
        Sends of the transaction checked.
    error : BaseException or None
        The first failed send's error (``None``: it had not completed).
    """

    def __init__(self, failed: int, sent: int, error: BaseException | None) -> None:
        self.failed, self.sent, self.error = failed, sent, error
        cause = repr(error) if error is not None else "not completed after flush()"
        super().__init__(f"{failed} of {sent} sends of the transaction not acknowledged; the first: {cause}")


class CallTimedOut(Exception):
    """A call into the client did not return within its bound; its outcome is unknown."""

    def __init__(self, what: str, timeout_s: float) -> None:
        self.what, self.timeout_s = what, timeout_s
        super().__init__(f"{what} did not return within {timeout_s:g} s")


class Sends:
    """The futures of one transaction's sends, checked before the commit.

    ``add()`` each future ``KafkaProducer.send()`` returns; after ``flush()``, :meth:`check`
    raises :class:`SendFailed` unless every one of them succeeded.
    """

    def __init__(self) -> None:
        self.futures: list = []

    def __len__(self) -> int:
        return len(self.futures)

    def add(self, future):
        """Keep ``future`` (returned, so a send reads ``sends.add(producer.send(...))``)."""
        self.futures.append(future)
        return future

    def check(self) -> None:
        """Raise :class:`SendFailed` unless every send so far was acknowledged.

        Call it after ``flush()``: a future not done then counts as failed.
        """
        bad = [f for f in self.futures if not (f.is_done and f.succeeded())]
        if bad:
            first = bad[0]
            raise SendFailed(len(bad), len(self.futures), first.exception if first.is_done else None)


def bounded(call, timeout_s: float, what: str):
    """``call()``'s result (or its exception) if it returns within ``timeout_s``, else :class:`CallTimedOut`.

    The call runs in a daemon thread, so a call that never returns does not keep the
    process alive; after :class:`CallTimedOut` the client is in an unknown state and the
    caller must not use it again for that transaction (end the writer; its successor's
    ``init_transactions()`` completes or aborts what was left open).
    """
    box: dict = {}

    def target() -> None:
        try:
            box["result"] = call()
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    thread = threading.Thread(target=target, name=f"lab-bounded-{what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise CallTimedOut(what, timeout_s)
    if "error" in box:
        raise box["error"]
    return box.get("result")
