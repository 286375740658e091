"""Fencing: what Kafka does with a transactional producer that dies, or stalls, mid-transaction.

One job: the experiment behind notebook 05's fencing section, against a real
broker, with real processes. Two cases, each on a topic of its own:

killed
    A child process (``python -m lab.lessons.fencing child``, kafka-python, a fixed
    ``transactional.id``) begins a transaction, sends ``records`` records,
    waits until the broker acknowledged them (they are in the log), writes a
    ready marker and is SIGKILLed (its own process group, started by
    :func:`lab.host.processes.spawn`) before it commits. A new producer with the
    same ``transactional.id`` then calls ``init_transactions()``: the
    transaction coordinator bumps the producer epoch and aborts the dead
    producer's open transaction; the new producer commits its own records.
zombie
    The same, but the child is paused with SIGSTOP instead of killed. While it
    is paused a new producer with the same ``transactional.id`` initialises
    (fencing the paused one) and commits. On SIGCONT the paused producer tries
    to commit; the error kafka-python raises is recorded by name and message.

Both topics are then read to their end at both isolation levels, and the
records of each producer counted (:class:`FencingResult`). The coordinator
would also abort an open transaction on its own once the producer's
transaction timeout passed (kafka-python's default: 60 s); both cases end well
within it (measured: about 5 s together), so every abort measured here is the
successor's doing.

Delivery guarantee
------------------
What Apache Kafka guarantees and this module measures: a ``read_committed``
reader never returns the records of a transaction its producer did not commit,
whether that producer died or was fenced; a ``read_uncommitted`` reader
returns them (they are in the log, followed by an abort marker). The records
themselves are written once each (the producers are idempotent).

On failure
----------
Any error ends every child process the experiment started (SIGKILL to its own
process group, by PID; a paused child is killed just the same) before the
error propagates. A child that does not become ready, or does not finish,
within ``timeout_s`` is a :class:`lab.errors.LabError` naming its log.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.errors import LabError
from lab.kafka.transactions import Sends, bounded

#: The ready marker a child writes once its records are acknowledged inside its open transaction.
READY_FILE = "ready.json"
#: Created by the parent when a paused child, once continued, should try to commit.
GO_FILE = "go"
#: What a child that tried to commit writes: the outcome, and the exception kafka-python raised.
OUTCOME_FILE = "outcome.json"
#: Seconds a child waits for the go file before it gives up on its own (a parent that vanished).
CHILD_MAX_WAIT_S = 300.0
#: How often a child looks for the go file.
POLL_S = 0.05


@dataclass(frozen=True)
class FencingResult:
    """What the two cases measured. Counts are records read from the topics after both cases ended.

    Attributes
    ----------
    broker : str
        The broker's product and version, e.g. ``"apache-kafka 4.1.1"`` (``"external"`` for ``LAB_KAFKA_BOOTSTRAP``).
    records, successor_records : int
        Records each child sent in its open transaction; records each new producer committed.
    killed_epoch, killed_successor_epoch : list of int
        ``[producer id, epoch]`` of the killed child and of the producer that replaced it.
    killed_read_uncommitted, killed_read_committed : int
        The killed child's records a ``read_uncommitted`` / ``read_committed`` reader returns.
    killed_successor_read_uncommitted, killed_successor_read_committed : int
        The replacing producer's records at each isolation level.
    zombie_epoch, zombie_successor_epoch : list of int
        ``[producer id, epoch]`` of the paused child and of the producer that fenced it.
    zombie_error : str
        The class name of what kafka-python raised when the continued child tried to commit
        (empty when the commit succeeded).
    zombie_error_module : str
        Where that class is defined (``kafka.errors``).
    zombie_message : str
        The exception's message.
    zombie_read_uncommitted, zombie_read_committed : int
        The paused child's records at each isolation level.
    zombie_successor_read_uncommitted, zombie_successor_read_committed : int
        The fencing producer's records at each isolation level.
    work_dir : str
        The directory both cases wrote to.
    """

    broker: str
    records: int
    successor_records: int
    killed_epoch: list
    killed_successor_epoch: list
    killed_read_uncommitted: int
    killed_read_committed: int
    killed_successor_read_uncommitted: int
    killed_successor_read_committed: int
    zombie_epoch: list
    zombie_successor_epoch: list
    zombie_error: str
    zombie_error_module: str
    zombie_message: str
    zombie_read_uncommitted: int
    zombie_read_committed: int
    zombie_successor_read_uncommitted: int
    zombie_successor_read_committed: int
    work_dir: str = ""  # where both cases' files and result.json are

    def table(self) -> list[dict]:
        """One row per producer: what each isolation level returns of its records."""
        return [
            {"case": case, "producer": who, "records sent": sent,
             "read_uncommitted": getattr(self, f"{prefix}_read_uncommitted"),
             "read_committed": getattr(self, f"{prefix}_read_committed")}
            for case, who, prefix, sent in (
                ("killed", "killed mid-transaction (SIGKILL)", "killed", self.records),
                ("killed", "new producer, same transactional.id", "killed_successor", self.successor_records),
                ("zombie", "paused mid-transaction (SIGSTOP, SIGCONT)", "zombie", self.records),
                ("zombie", "new producer, same transactional.id", "zombie_successor", self.successor_records),
            )
        ]

    def open_transaction(self) -> tuple[str, str]:
        """What became of the killed producer's open transaction (:data:`lab.audit.predictions.QUESTIONS`' words).

        Committed when a ``read_committed`` reader gets its records; else aborted
        when that reader gets the successor's (the open transaction ended), else
        still open (it holds back every later record of its partitions).
        """
        detail = (f"read_committed returns {self.killed_read_committed} of its {self.records} records and "
                  f"{self.killed_successor_read_committed} of its successor's {self.successor_records}")
        if self.killed_read_committed == self.records:
            return "committed", detail
        if self.killed_successor_read_committed == self.successor_records:
            return "aborted by its successor", detail
        return "still open", detail

    def zombie_commit(self) -> tuple[str, str]:
        """What the broker answered the paused producer's commit after SIGCONT: ``refused`` or ``accepted``."""
        if self.zombie_error:
            return "refused", f"{self.zombie_error_module}.{self.zombie_error}: {self.zombie_message}"
        return "accepted", (f"no error; read_committed returns {self.zombie_read_committed} of its {self.records} "
                            "records")

    def to_dict(self) -> dict:
        return asdict(self)


# -- the parent ------------------------------------------------------------------

def _broker_name(broker) -> str:
    if broker.external:
        return "external"
    return " ".join(filter(None, (broker.product, broker.version)))


def _producer(bootstrap: str, transactional_id: str):
    """A transactional kafka-python producer (idempotent, acks=all: what transactions require, stated)."""
    from kafka import KafkaProducer
    from kafka.serializer import Serializer

    class _Json(Serializer):
        def serialize(self, topic, headers, data):
            return json.dumps(data, separators=(",", ":")).encode()

    return KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, enable_idempotence=True,
                         acks="all", retries=5, max_block_ms=30000, request_timeout_ms=10000,
                         value_serializer=_Json())


def _epoch(producer) -> list:
    """``[producer id, epoch]`` of a kafka-python producer (its transaction manager's, after init_transactions)."""
    pe = getattr(getattr(producer, "_transaction_manager", None), "producer_id_and_epoch", None)
    return [getattr(pe, "producer_id", None), getattr(pe, "epoch", None)]


def _send(producer, topic: str, label: str, count: int) -> None:
    """Send ``count`` records in the open transaction; raise unless every one was acknowledged.

    A commit after a failed send would commit the transaction without it (kafka-python 3.0.12,
    :mod:`lab.kafka.transactions`), and the experiment would count records that were never written.
    """
    sends = Sends()
    for i in range(count):
        sends.add(producer.send(topic, value={"id": f"{label}-{i}", "producer": label}))
    producer.flush(timeout=30)
    sends.check()


def _wait_for(path: Path, proc: subprocess.Popen, log: Path, timeout_s: float, what: str) -> dict:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            raise LabError(f"the fencing child exited with status {proc.returncode} before {what}; see {log}")
        if time.monotonic() > deadline:
            raise LabError(f"the fencing child did not get to {what} within {timeout_s:g} s; see {log}")
        time.sleep(POLL_S)
    return json.loads(path.read_text())


def _wait_stopped(pid: int, timeout_s: float = 5.0) -> None:
    import psutil

    deadline = time.monotonic() + timeout_s
    while psutil.Process(pid).status() != psutil.STATUS_STOPPED:
        if time.monotonic() > deadline:
            raise LabError(f"the fencing child (PID {pid}) did not stop within {timeout_s:g} s of SIGSTOP")
        time.sleep(POLL_S)


def _start_child(bootstrap: str, topic: str, transactional_id: str, label: str, records: int, work: Path):
    from lab.host import processes

    work.mkdir(parents=True, exist_ok=True)
    log = work / "child.log"
    proc = processes.spawn([sys.executable, "-m", "lab.lessons.fencing", "child", "--bootstrap", bootstrap, "--topic",
                            topic, "--transactional-id", transactional_id, "--label", label, "--records", str(records),
                            "--dir", str(work)], log_path=log)
    return proc, log


def _end_child(proc: subprocess.Popen) -> None:
    """SIGKILL the child's own process group (a paused one too) and reap it."""
    from lab.host import processes

    if proc.poll() is None or processes.group_alive(proc.pid):
        processes.kill_group(proc.pid, signal.SIGKILL, 5.0)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _successor(bootstrap: str, topic: str, transactional_id: str, label: str, records: int) -> list:
    """A new producer with the same id: init_transactions (fencing the old one), send, commit; its epoch."""
    p = _producer(bootstrap, transactional_id)
    try:
        p.init_transactions()
        epoch = _epoch(p)
        p.begin_transaction()
        _send(p, topic, label, records)
        bounded(p.commit_transaction, 30.0, "commit_transaction()")
        return epoch
    finally:
        p.close(timeout=5)


def _count(bootstrap: str, topic: str, partitions: int, isolation_level: str) -> dict[str, int]:
    """Records per producer label in ``topic`` as a reader with ``isolation_level`` gets them."""
    from lab.kafka import tools as kafka_tools

    counts: dict[str, int] = {}
    for eid, (copies, _, _) in kafka_tools.topic_copies(bootstrap, topic, partitions,
                                                        isolation_level=isolation_level, timeout_s=60).items():
        label = eid.rsplit("-", 1)[0]
        counts[label] = counts.get(label, 0) + copies
    return counts


def _killed_case(bootstrap: str, topic: str, txn_id: str, records: int, successor_records: int, work: Path,
                 timeout_s: float) -> tuple[list, list]:
    proc, log = _start_child(bootstrap, topic, txn_id, "killed", records, work)
    try:
        ready = _wait_for(work / READY_FILE, proc, log, timeout_s, "its ready marker")
    finally:
        _end_child(proc)  # SIGKILL mid-transaction: no commit, no abort; the transaction stays open
    return ready["epoch"], _successor(bootstrap, topic, txn_id, "killed_successor", successor_records)


def _zombie_case(bootstrap: str, topic: str, txn_id: str, records: int, successor_records: int, work: Path,
                 timeout_s: float) -> tuple[list, list, dict]:
    proc, log = _start_child(bootstrap, topic, txn_id, "zombie", records, work)
    try:
        ready = _wait_for(work / READY_FILE, proc, log, timeout_s, "its ready marker")
        os.killpg(proc.pid, signal.SIGSTOP)
        _wait_stopped(proc.pid)
        successor = _successor(bootstrap, topic, txn_id, "zombie_successor", successor_records)
        (work / GO_FILE).touch()  # created before SIGCONT: the child's first look after it finds it
        os.killpg(proc.pid, signal.SIGCONT)
        outcome = _wait_for(work / OUTCOME_FILE, proc, log, timeout_s, "the end of its commit")
        try:
            proc.wait(timeout=timeout_s)  # it closes its producer and exits; the outcome is already written
        except subprocess.TimeoutExpired:
            pass  # ended below
    finally:
        _end_child(proc)
    return ready["epoch"], successor, outcome


def measure(broker, work_dir, records: int = 20, successor_records: int = 10, partitions: int = 3,
            timeout_s: float = 60.0) -> FencingResult:
    """Run both cases (killed, zombie) against ``broker`` and count what each isolation level reads.

    Parameters
    ----------
    broker : lab.broker.embedded.BrokerInfo
        A running broker (the notebook's, or the one ``lab broker start`` left in ``runs/broker.json``).
    work_dir : path
        Ready markers and each child's log go under it (``killed/``, ``zombie/``).
    records : int
        Records each child sends in the transaction it never commits.
    successor_records : int
        Records each new producer commits.
    partitions : int
        Partitions of each case's topic (one transaction spans them).
    timeout_s : float
        How long a child may take to become ready, and to finish its commit attempt.

    Returns
    -------
    FencingResult

    Raises
    ------
    LabError
        When a child fails or times out.
    """
    from lab.kafka import tools as kafka_tools

    if records < 1 or successor_records < 1:
        raise LabError(f"records and successor_records must be >= 1, got {records} and {successor_records}")
    work = Path(work_dir)
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    topics = {case: f"fencing.{stamp}.{case}" for case in ("killed", "zombie")}
    for topic in topics.values():
        kafka_tools.create_topic(broker.bootstrap, topic, partitions)
    killed, killed_successor = _killed_case(broker.bootstrap, topics["killed"], f"lab-fencing-{stamp}-killed",
                                            records, successor_records, work / "killed", timeout_s)
    zombie, zombie_successor, outcome = _zombie_case(broker.bootstrap, topics["zombie"], f"lab-fencing-{stamp}-zombie",
                                                     records, successor_records, work / "zombie", timeout_s)
    reads = {(case, level): _count(broker.bootstrap, topic, partitions, level)
             for case, topic in topics.items() for level in ("read_uncommitted", "read_committed")}
    result = FencingResult(
        broker=_broker_name(broker), records=records, successor_records=successor_records,
        killed_epoch=killed, killed_successor_epoch=killed_successor,
        zombie_epoch=zombie, zombie_successor_epoch=zombie_successor,
        zombie_error=outcome.get("error", ""), zombie_error_module=outcome.get("module", ""),
        zombie_message=outcome.get("message", ""), work_dir=str(work),
        **{f"{label}_{level}": reads[(case, level)].get(label, 0)
           for case in topics for label in (case, f"{case}_successor")
           for level in ("read_uncommitted", "read_committed")},
    )
    (work / "result.json").write_text(json.dumps(result.to_dict(), indent=2))
    return result


# -- the child -------------------------------------------------------------------

def child(bootstrap: str, topic: str, transactional_id: str, label: str, records: int, work: Path) -> int:
    """The producer in a child process: open a transaction, send, report ready, then commit only when told.

    Delivery guarantee: its records are acknowledged (in the log) before the
    ready marker exists; they count for ``read_committed`` readers only if the
    commit succeeds. On failure of the commit the exception's class and
    message go to :data:`OUTCOME_FILE` and the exit status is 1.
    """
    from lab.host.atomic_file import write_atomic

    p = _producer(bootstrap, transactional_id)
    p.init_transactions()
    p.begin_transaction()
    _send(p, topic, label, records)
    write_atomic(work / READY_FILE, json.dumps({"pid": os.getpid(), "epoch": _epoch(p)}))
    deadline = time.monotonic() + CHILD_MAX_WAIT_S
    while not (work / GO_FILE).exists():
        if time.monotonic() > deadline:
            return 2
        time.sleep(POLL_S)
    try:
        bounded(p.commit_transaction, 30.0, "commit_transaction()")
        outcome = {"outcome": "committed"}
    except Exception as e:  # what a fenced producer gets is the measurement
        outcome = {"outcome": "failed", "error": type(e).__name__, "module": type(e).__module__,
                   "message": str(e)[:300]}
    write_atomic(work / OUTCOME_FILE, json.dumps(outcome))
    try:
        p.close(timeout=2)
    except Exception:  # a fenced producer's close may raise again; the outcome is written
        pass
    return 0 if outcome["outcome"] == "committed" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.lessons.fencing",
                                     description="the fencing experiment's child producer")
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("child")
    c.add_argument("--bootstrap", required=True)
    c.add_argument("--topic", required=True)
    c.add_argument("--transactional-id", required=True)
    c.add_argument("--label", required=True)
    c.add_argument("--records", type=int, required=True)
    c.add_argument("--dir", required=True)
    a = parser.parse_args(argv)
    return child(a.bootstrap, a.topic, a.transactional_id, a.label, a.records, Path(a.dir))


if __name__ == "__main__":
    sys.exit(main())
