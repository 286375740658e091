"""Transactions v1 against v2, as the broker records them: the same transactions by each client, then its log read.

Two clients write the same transactions (``transactions`` of ``records`` records, every ``abort_every``-th one
aborted) into a topic each, on one broker:

``python``  kafka-python, the lab's transactional client (the kafka-eos driver, the ledgered producer). Measured
            with 3.0.12: it ends a transaction with ``EndTxn`` version 3 at most, the older protocol, so the broker
            keeps the producer's epoch.
``java``    Kafka's own Java client (``kafka-clients`` 4.4.0: ``LabTxnProducer``,
            :data:`lab.broker.java_clients.TXN_PRODUCER`, compiled once into the cache): ``EndTxn`` version 5
            on a broker that finalizes ``transaction.version`` 2 (KIP-890 part 2), whose coordinator bumps the
            producer's epoch at each transaction's end.

Each topic's log is then read from the broker's data directory (:mod:`lab.kafka.log_segments`): per transaction,
the epoch its records were written under and the epoch of its end marker. Expected from KIP-890: v2, a new epoch per
transaction (the marker one above its records, the next transaction's records under the marker's); v1, one epoch for
them all.

Delivery guarantee: each client commits a transaction only after every send in it succeeded
(:class:`lab.kafka.transactions.Sends`, and ``LabTxnProducer``'s own check); a failed send aborts it.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from lab.broker.java_clients import TXN_PRODUCER
from lab.errors import LabError

#: The clients compared, by ``client``.
CLIENTS = ("python", "java")
#: Seconds a client's whole run may take (measured: the Java client's 5 transactions in about 2 s with its JVM).
CLIENT_TIMEOUT_S = 120.0
#: Per-call bound of kafka-python's transactional calls (they wait without one: :mod:`lab.kafka.transactions`).
CALL_TIMEOUT_S = 30.0
#: Seconds to wait for a topic's last end markers after its client returned.
MARKERS_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ClientTransactions:
    """One client's transactions: what it reported and what the broker's log holds of them."""

    client: str
    version: str
    topic: str
    reported: list[dict]
    logged: list = field(repr=False)  # lab.kafka.log_segments.Transaction, every partition's

    def summary(self) -> dict:
        """The client's row: its transactions as reported, and per the log its producer id, epochs and markers."""
        from lab.kafka.log_segments import epochs_per_producer

        per_pid = epochs_per_producer(self.logged)
        pids = sorted(per_pid)
        first = per_pid[pids[0]] if len(pids) == 1 else {}
        return {"client": self.client, "version": self.version,
                "committed": sum(r["outcome"] == "COMMIT" for r in self.reported),
                "aborted": sum(r["outcome"] == "ABORT" for r in self.reported),
                "producer ids": len(pids), "data epochs": first.get("data_epochs", []),
                "markers above the data epoch": first.get("markers_above_data"),
                "end markers": first.get("markers"),
                "a new epoch per transaction": first.get("new_epoch_per_transaction"),
                "one epoch": first.get("one_epoch")}


def python_transactions(bootstrap: str, topic: str, transactional_id: str, transactions: int, records: int,
                        abort_every: int = 0, *, partition: int | None = None, late_index: int = -1,
                        open_index: int = -1, on_open=None, linger_ms: int = 0,
                        request_timeout_ms: int | None = None) -> list[dict]:
    """kafka-python's transactions, one dict each as ``LabTxnProducer`` prints them (its options likewise:
    ``partition``, ``late_index``, ``open_index`` with ``on_open`` called once that transaction's sends succeeded
    and before it is committed, ``linger_ms``, ``request_timeout_ms``). A transaction whose send check or end
    raises is reported ``FAILED`` with its ``error``, and the producer stops."""
    from kafka import KafkaProducer

    from lab.kafka.transactions import SendFailed, Sends, bounded

    timeouts = {"request_timeout_ms": request_timeout_ms} if request_timeout_ms else {}
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                             client_id="lab-txn-producer-python", acks="all", enable_idempotence=True,
                             linger_ms=linger_ms, **timeouts)
    out = []
    try:
        bounded(producer.init_transactions, CALL_TIMEOUT_S, "init_transactions()")
        for i in range(transactions):
            line: dict = {"op": "transaction", "index": i, "records": records}
            offsets: dict[str, list[int]] = {}
            failed = None
            try:
                producer.begin_transaction()
                sends = Sends()
                for j in range(records):
                    value = json.dumps({"transaction": i, "record": j, "late": i == late_index}, separators=(",", ":"))
                    sends.add(producer.send(topic, key=f"k{j % 8:02d}".encode(), value=value.encode(),
                                            partition=partition))
                producer.flush(timeout=CALL_TIMEOUT_S)
                try:
                    sends.check()
                except SendFailed as e:
                    failed = str(e)
                for f in sends.futures:
                    if f.is_done and f.succeeded():
                        m = f.value
                        lo, hi = offsets.get(str(m.partition), [m.offset, m.offset])
                        offsets[str(m.partition)] = [min(lo, m.offset), max(hi, m.offset)]
                abort = failed is not None or (abort_every > 0 and (i + 1) % abort_every == 0)
                if i == open_index and not abort and on_open is not None:
                    on_open()
                end = producer.abort_transaction if abort else producer.commit_transaction
                bounded(end, CALL_TIMEOUT_S, "abort_transaction()" if abort else "commit_transaction()")
                line["outcome"] = "ABORT" if abort else "COMMIT"
            except Exception as e:  # the client's own error, reported as the Java client's is
                line.update(outcome="FAILED", error=f"{type(e).__name__}: {e}")
            line["offsets"] = dict(sorted(offsets.items()))
            out.append({**line, **({"failed_send": failed} if failed else {})})
            if line["outcome"] == "FAILED":
                break
    finally:
        producer.close(timeout=5)
    return out


def java_transactions(bootstrap: str, topic: str, transactional_id: str, transactions: int, records: int,
                      abort_every: int = 0, *, options: dict | None = None, on_open=None) -> tuple[list[dict], str]:
    """``LabTxnProducer``'s transactions and the client's version.

    ``options``: its options by name without the dashes (``{"partition": 1, "release-file": path}``); ``on_open``
    is called when it reports its ``--open-index`` transaction open (it commits once the release file exists).

    Raises
    ------
    LabError
        When the JVM fails or takes longer than :data:`CLIENT_TIMEOUT_S` (its last line of error output).
    """
    import tempfile
    import threading

    args = [*TXN_PRODUCER.command("-Xmx128m"), bootstrap, topic, transactional_id, str(transactions), str(records),
            str(abort_every), *[str(a) for k, v in (options or {}).items() for a in (f"--{k}", v)]]
    lines: list[dict] = []
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True)
        timer = threading.Timer(CLIENT_TIMEOUT_S, proc.kill)
        timer.start()
        try:
            for raw in proc.stdout:
                if raw.startswith("{"):
                    lines.append(json.loads(raw))
                    if lines[-1]["op"] == "open" and on_open is not None:
                        on_open()
            code = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        errors = [line for line in err.read().splitlines() if line.strip()]
    if code != 0 or not lines or lines[-1].get("op") != "done":
        if code == -9:
            raise LabError(f"the Java transactional producer did not finish within {CLIENT_TIMEOUT_S:g} s")
        raise LabError(f"the Java transactional producer exited {code}: {errors[-1] if errors else 'no output'}")
    return [m for m in lines if m["op"] == "transaction"], lines[-1]["client"]


def compare(bootstrap: str, data_dir: Path | str, transactions: int = 5, records: int = 20, abort_every: int = 0,
            partitions: int = 1) -> list[ClientTransactions]:
    """Each client of :data:`CLIENTS` writes the same transactions into a new topic of its own; the broker's log of
    each (under ``data_dir``, its ``log.dirs``) read after.

    Raises
    ------
    LabError
        When ``data_dir`` holds no log of the topics (a broker elsewhere: its files are not readable here).
    """
    from importlib.metadata import version

    from lab.kafka import tools as kafka_tools
    from lab.kafka.log_segments import partition_dirs, topic_transactions

    run = uuid.uuid4().hex[:8]
    out = []
    for client in CLIENTS:
        topic, tid = f"txn-epochs-{run}-{client}", f"lab-txn-epochs-{run}-{client}"
        kafka_tools.create_topic(bootstrap, topic, partitions)
        if client == "python":
            reported, name = (python_transactions(bootstrap, topic, tid, transactions, records, abort_every),
                              f"kafka-python {version('kafka-python')}")
        else:
            reported, name = java_transactions(bootstrap, topic, tid, transactions, records, abort_every)
        wait_for_markers(bootstrap, topic, partitions)
        if not partition_dirs(data_dir, topic):
            raise LabError(f"no log of topic {topic!r} under {data_dir}: the broker's data directory must be on this "
                           "machine (the lab's own broker or cluster)")
        out.append(ClientTransactions(client, name, topic, reported, topic_transactions(data_dir, topic)))
    return out


def wait_for_markers(bootstrap: str, topic: str, partitions: int, timeout_s: float = MARKERS_TIMEOUT_S) -> None:
    """Wait until no transaction of ``topic`` is open: a ``read_committed`` reader's end (the last stable offset) is
    the log's end in every partition.

    A commit returns once the coordinator has logged its decision; the markers are written to the partitions
    after (measured: kafka-python's last transaction had no marker in the log when its commit returned).

    Raises
    ------
    LabError
        When a transaction is still open after ``timeout_s``.
    """
    import time

    from kafka import TopicPartition

    from lab.kafka import tools as kafka_tools

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    committed = kafka_tools.bulk_consumer(bootstrap, "read_committed")
    everything = kafka_tools.bulk_consumer(bootstrap, "read_uncommitted")
    try:
        deadline = time.monotonic() + timeout_s
        while committed.end_offsets(tps) != everything.end_offsets(tps):
            if time.monotonic() > deadline:
                raise LabError(f"a transaction of {topic!r} is still open after {timeout_s:g} s")
            time.sleep(0.1)
    finally:
        committed.close()
        everything.close()
