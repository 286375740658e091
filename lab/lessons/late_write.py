"""The late write: one transactional produce request reaching its partition's leader after its transaction ended.

Jepsen's analysis of a Kafka-compatible broker (2024) found aborted reads and lost writes in Kafka's transaction
protocol coming from late and reordered transactional requests; KIP-890 answers them in two parts: the broker
checks that a transactional write's partition is in an ongoing transaction (part 1, every client), and a client
on the new protocol (``transaction.version`` 2) gets a new producer epoch at every transaction's end, so a write
from an ended transaction carries an old epoch (part 2). This lesson makes the late request for real and reports
what the broker did with it, for each client.

Protocol
--------
1. On the lab's three-broker cluster, a topic of one partition per broker, three replicas each. The partition
   written is one whose leader is not the transaction coordinator (the leader of ``__transaction_state``'s only
   partition), so the coordinator's end markers never queue behind the kept request.
2. The leader's client proxy is armed (``hold_produce``, :mod:`lab.broker.proxy`) to keep the first produce
   request carrying ``"late":true``.
3. The client (:data:`CLIENTS`) writes :data:`TRANSACTIONS` transactions of ``records`` records to that partition,
   transaction :data:`LATE_INDEX`'s values marked ``"late":true``. Its produce request is kept: the client's request
   timeout (:data:`REQUEST_TIMEOUT_MS`) ends the wait, the client sends the batch again on a new connection (the
   same producer id, epoch and sequence), that one goes through, and the client ends the transaction: it commits
   only if every send in it succeeded, else aborts.
4. The next transaction is begun and its records acknowledged: the partition is again in a transaction of the same
   producer. The client reports it open and waits; the proxy now sends the kept request to the leader, the worst
   moment for it, and keeps the leader's answer. Then the client commits and writes the last transaction.
5. Once every end marker is written, the partition is read by a ``read_committed`` and a ``read_uncommitted``
   reader, and its log by :mod:`lab.kafka.log_segments`: each transaction's records, their copies, and their epochs.

Delivery guarantee: each client commits a transaction only after every send in it succeeded; what the broker let
through of the late request is what the readers count (:func:`audit_copies`), never assumed from its answer.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError

#: The clients, by ``client``: kafka-python (the older protocol) and Kafka's Java client (``LabTxnProducer``).
CLIENTS = ("python", "java")
#: Transactions each client writes; the kept request is transaction :data:`LATE_INDEX`'s, released while the next is
#: open.
TRANSACTIONS = 4
LATE_INDEX = 1
#: The clients' request timeout: how long they wait for the kept request's answer before sending the batch again
#: (both clients' default is 30 s; shorter keeps the lesson short and is still a timeout, as on a slow network).
REQUEST_TIMEOUT_MS = 3000
#: The clients' linger: a transaction's records go in one produce request, the one kept.
LINGER_MS = 100
#: Seconds to wait for the broker's answer to the released request.
ANSWER_TIMEOUT_S = 40.0
#: What the proxy looks for in a produce request's bytes (records go uncompressed).
LATE_MARK = '"late":true'


@dataclass(frozen=True)
class LateWrite:
    """One client's late write and what came of it.

    Attributes
    ----------
    client, version : str
        ``python`` or ``java``, and the client library's name and version.
    topic : str
    partition, leader, coordinator : int
        The partition written, the broker leading it, and the transaction coordinator's broker.
    reported : list of dict
        The client's transactions as it reported them (``index``, ``outcome``, ``offsets``, ``error``).
    released_while_open : bool
        Whether the kept request reached the leader while the client's next transaction was open (else after the
        client's last transaction).
    held : dict
        The proxy's record of the kept request (``state``, ``held_at``, ``released_at``, ``answered_at``).
    late : dict or None
        The kept request's batch: ``producer_id``, ``epoch``, ``base_sequence``, ``records``.
    answer : list of dict
        The leader's answer to it, per partition (:class:`lab.kafka.produce_frames.PartitionAnswer`).
    copies : dict
        ``{"read_committed": {transaction: {record: copies}}, "read_uncommitted": ...}``.
    logged : list
        The partition's transactions as its log holds them (:class:`lab.kafka.log_segments.Transaction`).
    could_not_show : list of str
        Why this run could not show the late write, when it could not.
    late_index : int
        The transaction whose request was kept (:data:`LATE_INDEX`).
    """

    client: str
    version: str
    topic: str
    partition: int
    leader: int
    coordinator: int
    reported: list[dict]
    released_while_open: bool
    held: dict
    late: dict | None
    answer: list[dict]
    copies: dict = field(repr=False)
    logged: list = field(repr=False)
    could_not_show: list[str] = field(default_factory=list)
    late_index: int = LATE_INDEX

    def audit(self) -> dict:
        """The readers' counts (:func:`audit_copies`) against what the client reported."""
        return audit_copies(self.reported, self.copies, self.records_per_transaction())

    def records_per_transaction(self) -> int:
        return int(self.reported[0]["records"]) if self.reported else 0

    def summary(self) -> dict:
        """The client's row: the late request, the broker's answer, and what the readers got."""
        a = self.audit()
        answer = self.answer[0] if self.answer else {}
        epochs = [t.data_epochs for t in self.logged if t.records and t.partition == self.partition]
        return {"client": self.client, "version": self.version,
                "late request (producer id, epoch, sequence)": (
                    (self.late["producer_id"], self.late["epoch"], self.late["base_sequence"]) if self.late else None),
                "its transaction": outcome_of(self.reported, LATE_INDEX),
                "epochs of the partition's transactions": [list(e) for e in epochs],
                "broker's answer": answer.get("error", self.held.get("error") or self.held.get("state")),
                "written again": written_again(a),
                "duplicated (read_committed)": a["duplicated"], "lost": a["lost"],
                "aborted records read (read_committed)": a["aborted_read"],
                "verdict": verdict(answer.get("error"), a)}


def outcome_of(reported: list[dict], index: int) -> str | None:
    """The client's outcome of transaction ``index`` (``COMMIT``, ``ABORT``, ``FAILED``; None if never reached)."""
    return next((r["outcome"] for r in reported if r["index"] == index), None)


def audit_copies(reported: list[dict], copies: dict, records: int) -> dict:
    """What the readers got, transaction by transaction, against what the client said it committed.

    Pure. ``copies``: per isolation level, ``{transaction: {record: copies}}`` (keys as ints). A committed
    transaction's records must each be read once by a ``read_committed`` reader (``lost`` those not read,
    ``duplicated`` those read more than once); an aborted or failed one's, never (``aborted_read``).
    ``late_copies_uncommitted``: the late transaction's records in the log at all (a ``read_uncommitted`` reader),
    against ``late_expected_uncommitted``, what its sends and their retries wrote once (None when the late
    transaction failed or was never reached: then no count of copies is expected).
    """
    committed = copies.get("read_committed", {})
    everything = copies.get("read_uncommitted", {})
    lost = duplicated = aborted_read = 0
    for r in reported:
        got = committed.get(r["index"], {})
        if r["outcome"] == "COMMIT":
            lost += sum(1 for j in range(records) if got.get(j, 0) == 0)
            duplicated += sum(1 for j in range(records) if got.get(j, 0) > 1)
        else:
            aborted_read += sum(got.values())
    late = everything.get(LATE_INDEX, {})
    sent_once = outcome_of(reported, LATE_INDEX) in ("COMMIT", "ABORT")
    return {"lost": lost, "duplicated": duplicated, "aborted_read": aborted_read,
            "late_copies_uncommitted": sum(late.values()),
            "late_expected_uncommitted": records if sent_once else None}


def verdict(error: str | None, audit: dict) -> str:
    """One line: what the broker did with the late request, decided by its answer and the readers' counts."""
    if audit["duplicated"] or audit["aborted_read"] or audit["lost"]:
        return (f"let through: {audit['duplicated']} duplicated, {audit['aborted_read']} aborted records read, "
                f"{audit['lost']} lost")
    if error is None:
        return "no answer"
    if error in ("INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"):
        return f"fenced: an epoch older than the producer's ({error})"
    if error in ("NONE", "DUPLICATE_SEQUENCE_NUMBER") and written_again(audit) is None:
        return f"answered {error}; its transaction failed at the client, so no count of copies is expected"
    if error in ("NONE", "DUPLICATE_SEQUENCE_NUMBER") and not written_again(audit):
        return f"recognised as a duplicate by its sequence number, not written again ({error})"
    if error == "NONE":
        return "written again, in a transaction the readers skip"
    return f"refused ({error})"


def written_again(audit: dict) -> bool | None:
    """Whether the log holds more of the late transaction's records than its sends wrote (None: nothing expected,
    the late transaction failed)."""
    if audit["late_expected_uncommitted"] is None:
        return None
    return audit["late_copies_uncommitted"] > audit["late_expected_uncommitted"]


def pick_partition(bootstrap: str, topic: str) -> tuple[int, int, int]:
    """``(partition, its leader, the transaction coordinator)``: a partition of ``topic`` led by a broker that does
    not coordinate transactions.

    Raises
    ------
    LabError
        When every partition is led by the coordinator's broker (the cluster is down to one broker).
    """
    from lab.broker.cluster import COORDINATOR_TOPICS
    from lab.kafka import replication as replication_watch

    coordinator = replication_watch.describe(bootstrap, COORDINATOR_TOPICS[0]).get(0, {}).get("leader")
    states = replication_watch.describe(bootstrap, topic)
    for p, state in sorted(states.items()):
        if state.get("leader") is not None and state["leader"] != coordinator:
            return p, state["leader"], coordinator
    raise LabError(f"every partition of {topic!r} is led by the transaction coordinator's broker ({coordinator}); "
                   "the late write needs the lab's three-broker cluster with every broker up")


def read_copies(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, dict[int, int]]:
    """``{transaction: {record: copies}}`` of the topic, as a reader with ``isolation`` gets it."""
    from lab.kafka import tools as kafka_tools

    out: dict[int, dict[int, int]] = {}
    by_record = kafka_tools.topic_copies(bootstrap, topic, partitions, isolation, 30.0,
                                         key=lambda v: (int(v["transaction"]), int(v["record"])))
    for (transaction, record), (n, _, _) in by_record.items():
        out.setdefault(transaction, {})[record] = n
    return out


class _Release:
    """Called when the client reports the transaction after the late one open: the kept request is sent, its answer
    awaited, then the client is let go (Java: the release file; kafka-python: on return)."""

    def __init__(self, control_port: int, release_file: Path) -> None:
        self.control_port, self.release_file = control_port, release_file
        self.record: dict | None = None

    def __call__(self) -> None:
        from lab.broker import proxy

        try:
            reply = proxy.control(self.control_port, {"cmd": "release"})
            if reply.get("ok"):
                deadline = time.monotonic() + ANSWER_TIMEOUT_S
                while (reply := proxy.control(self.control_port, {"cmd": "status"}))["held_produce"]["state"] \
                        == "released" and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.record = reply["held_produce"]
            else:
                self.record = {**(proxy.control(self.control_port, {"cmd": "status"})["held_produce"] or {}),
                               "error": reply.get("error")}
        finally:
            self.release_file.touch()


def run(broker, client: str, records: int = 10) -> LateWrite:
    """One client's late write on the lab's three-broker cluster ``broker`` (a :class:`BrokerInfo` with ``nodes``).

    Raises
    ------
    LabError
        For an unknown ``client`` (naming the valid ones), a broker that is not the lab's cluster, or a client
        that failed to run.
    """
    from importlib.metadata import version

    from lab.broker import proxy
    from lab.broker.log_files import broker_data_dirs
    from lab.kafka import tools as kafka_tools
    from lab.kafka.log_segments import partition_dirs, read_partition, transactions_of
    from lab.kafka.produce_frames import read_answer, request_batches
    from lab.lessons.txn_epochs import java_transactions, python_transactions, wait_for_markers

    if client not in CLIENTS:
        raise LabError(f"unknown client {client!r}; valid: {', '.join(CLIENTS)}")
    if not getattr(broker, "nodes", None) or len(broker.nodes) < 3:
        raise LabError("the late write needs the lab's three-broker cluster (lab broker start --nodes 3)")
    run_id = uuid.uuid4().hex[:8]
    topic, tid = f"late-write-{run_id}-{client}", f"lab-late-write-{run_id}-{client}"
    kafka_tools.create_topic(broker.bootstrap, topic, len(broker.nodes), replication=3,
                             configs={"min.insync.replicas": "2"})
    partition, leader, coordinator = pick_partition(broker.bootstrap, topic)
    control_port = broker.node(leader).control_port
    armed = proxy.control(control_port, {"cmd": "hold_produce", "contains": LATE_MARK})
    if not armed.get("ok"):
        raise LabError(f"the proxy of broker {leader} refused to keep a request: {armed.get('error')}")
    with tempfile.TemporaryDirectory(prefix="lab-late-write-") as tmp:
        release = _Release(control_port, Path(tmp) / "release")
        try:
            if client == "python":
                reported = python_transactions(
                    broker.bootstrap, topic, tid, TRANSACTIONS, records, partition=partition, late_index=LATE_INDEX,
                    open_index=LATE_INDEX + 1, on_open=release, linger_ms=LINGER_MS,
                    request_timeout_ms=REQUEST_TIMEOUT_MS)
                name = f"kafka-python {version('kafka-python')}"
            else:
                reported, name = java_transactions(
                    broker.bootstrap, topic, tid, TRANSACTIONS, records, options={
                        "partition": partition, "late-index": LATE_INDEX, "open-index": LATE_INDEX + 1,
                        "release-file": release.release_file, "linger-ms": LINGER_MS,
                        "request-timeout-ms": REQUEST_TIMEOUT_MS}, on_open=release)
        finally:
            opened = release.record is not None
            held = proxy.control(control_port, {"cmd": "status"})["held_produce"] or {}
            if not opened and held.get("state") == "held":
                release()  # the next transaction never opened: the kept request goes now, after the client's last
            proxy.control(control_port, {"cmd": "heal"})
    held = release.record or held
    wait_for_markers(broker.bootstrap, topic, len(broker.nodes))
    copies = {iso: read_copies(broker.bootstrap, topic, len(broker.nodes), iso)  # one partition is written
              for iso in ("read_committed", "read_uncommitted")}
    logged = []
    for d in broker_data_dirs(broker):
        path = partition_dirs(d, topic).get(partition)
        if path is not None:
            logged = transactions_of(partition, read_partition(path))
            break
    late = answer = None
    if held.get("request"):
        batches = request_batches(bytes.fromhex(held["request"]), held["version"])
        late = next(({"producer_id": b.producer_id, "epoch": b.producer_epoch, "base_sequence": b.base_sequence,
                      "records": b.records} for _, b in batches), None)
    if held.get("response"):
        answer = [vars(a) for a in read_answer(bytes.fromhex(held["response"]), held["version"])]
    why = []
    if held.get("state") in (None, "armed"):
        why.append("the proxy kept no produce request of the late transaction: the client sent none it could match")
    elif not opened:
        why.append(f"the client did not open transaction {LATE_INDEX + 1} (the late one: "
                   f"{outcome_of(reported, LATE_INDEX)}), so the kept request reached the leader after its last "
                   "transaction, not into an open one")
    return LateWrite(client=client, version=name, topic=topic, partition=partition, leader=leader,
                     coordinator=coordinator, reported=reported, released_while_open=opened,
                     held={k: v for k, v in held.items() if k not in ("request", "response")},
                     late=late, answer=answer or [], copies=copies, logged=logged, could_not_show=why)
