"""Kafka's Java producer behind kafka-python's transactional calls: the kafka-eos driver's ``--txn-client java``.

A :class:`JavaTxnProducer` starts ``LabTxnServer`` (:mod:`lab.broker.java_clients`; ``kafka-clients`` 4.4.0, which
ends a transaction with ``EndTxn`` version 5: transactions v2, a new epoch per transaction) as a child in the caller's
process group, so a ``killpg`` of the driver ends it too, and forwards each call to it as one JSON line
(``LabTxnServer.java`` has the protocol). It offers the calls of kafka-python's ``KafkaProducer`` the driver makes,
with the same error classes (:data:`ERRORS`), so the driver's checks are the same for both clients.

Protocol
--------
* A call other than ``send`` waits for its answer; the answers come in order. ``send`` returns a
  :class:`SendFuture` at once; the JVM answers it from the send's callback, later.
* A reader thread matches each answer to its request by ``id``. When the JVM's output ends (it died, or was
  killed with the driver), every call waiting and every send not yet answered fails with ``KafkaConnectionError``.
* ``flush(timeout)`` raises ``KafkaTimeoutError`` past ``timeout``, as kafka-python's does; the other calls wait as
  long as the JVM's own bound on them (``max.block.ms``) plus :data:`ANSWER_SLACK_S`.

Delivery guarantee: none of its own. A send's future succeeds only on the JVM's acknowledgement of that record; the
caller commits only after every future succeeded (:class:`lab.kafka.transactions.Sends`).
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading

from lab.errors import LabError

#: Seconds an answer may come after the JVM's own bound on the call (its ``max.block.ms``).
ANSWER_SLACK_S = 5.0
#: Seconds the JVM has to start and create its producer.
START_S = 60.0


def _errors() -> dict:
    """The Java client's exceptions, by simple name, as kafka-python's error classes."""
    from kafka import errors as ke

    return {"ProducerFencedException": ke.ProducerFencedError, "TimeoutException": ke.KafkaTimeoutError,
            "InvalidProducerEpochException": ke.InvalidProducerEpochError,
            "InvalidTxnStateException": ke.InvalidTxnStateError, "KafkaConnectionError": ke.KafkaConnectionError}


def error_of(answer: dict) -> Exception:
    """The kafka-python error for a failed answer: its class by the Java exception's name (else ``KafkaError``),
    its message naming the Java exception, ``retriable`` as the JVM said."""
    from kafka.errors import KafkaError

    cls = _errors().get(answer.get("error"), KafkaError)
    e = cls(f"{answer.get('error')}: {answer.get('message')}")
    e.retriable = bool(answer.get("retriable"))
    return e


def _jvm_command() -> list[str]:
    from lab.broker.java_clients import TXN_SERVER

    # the client's INFO lines: 144 at each start
    return TXN_SERVER.command("-Xmx192m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")


class SendFuture:
    """One request's outcome; for a send, as kafka-python's ``FutureRecordMetadata`` offers it to the driver's
    checks (``is_done``, ``succeeded()``, ``exception``)."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self.answer: dict = {}
        self.exception: Exception | None = None

    @property
    def is_done(self) -> bool:
        return self._done.is_set()

    def succeeded(self) -> bool:
        return self.is_done and self.exception is None

    def failed(self) -> bool:
        return self.is_done and self.exception is not None

    def wait(self, timeout_s: float) -> bool:
        return self._done.wait(timeout_s)

    def _resolve(self, answer: dict) -> None:
        self.answer = answer
        if not answer.get("ok"):
            self.exception = error_of(answer)
        self._done.set()


class JavaTxnProducer:
    """``LabTxnServer`` in a child JVM, called as kafka-python's transactional producer is.

    Parameters
    ----------
    settings : dict
        The Java producer's settings by their Java names (``transactional.id``, ``acks``, ...): every one that
        decides delivery is the caller's to state.
    stderr :
        Where the JVM's own output goes (the driver's log).
    command : list of str, optional
        The server's command line without its settings (default: the JVM running ``LabTxnServer``).

    Raises
    ------
    LabError
        When the JVM does not start its producer within :data:`START_S` (its last line of error output).
    """

    def __init__(self, settings: dict, stderr=None, command: list[str] | None = None) -> None:
        self.max_block_s = int(settings.get("max.block.ms", 60_000)) / 1000
        self.producer_id_and_epoch: tuple[int | None, int | None] = (None, None)
        args = [*(command or _jvm_command()), *(f"{k}={v}" for k, v in settings.items())]
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                      bufsize=1)
        self._lock = threading.Lock()
        self._next_id = 1
        hello = SendFuture()  # the JVM's first line (id 0): its producer is created
        self._waiting: dict[int, SendFuture] = {0: hello}
        self._reader = threading.Thread(target=self._read, name="lab-java-producer", daemon=True)
        self._reader.start()
        if not hello.wait(START_S) or hello.exception is not None:
            self._proc.kill()
            self._proc.wait()
            raise LabError(f"Kafka's Java producer did not start within {START_S:g} s (exit status "
                           f"{self._proc.returncode}); see the driver's log")
        self.client: str = hello.answer.get("client", "kafka-clients")

    def _read(self) -> None:
        for raw in self._proc.stdout:
            if not raw.startswith("{"):
                continue
            answer = json.loads(raw)
            with self._lock:
                future = self._waiting.pop(int(answer["id"]), None)
            if future is not None:
                future._resolve(answer)
        with self._lock:  # the JVM is gone: nothing more will be answered
            left, self._waiting = list(self._waiting.values()), {}
        for future in left:
            future._resolve({"ok": False, "error": "KafkaConnectionError", "message": "the Java producer exited "
                             f"(status {self._proc.poll()}) before answering"})

    def _request(self, op: str, **fields) -> SendFuture:
        future = SendFuture()
        with self._lock:
            rid, self._next_id = self._next_id, self._next_id + 1
            self._waiting[rid] = future
            try:
                self._proc.stdin.write(json.dumps({"id": rid, "op": op, **fields}) + "\n")
                self._proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                self._waiting.pop(rid, None)
                future._resolve({"ok": False, "error": "KafkaConnectionError", "message": "the Java producer exited "
                                 f"(status {self._proc.poll()})"})
        return future

    def _call(self, op: str, timeout_s: float | None = None, **fields) -> dict:
        """Send one request and wait for its answer; raise its error as kafka-python's."""
        from kafka.errors import KafkaTimeoutError

        wait_s = self.max_block_s + ANSWER_SLACK_S if timeout_s is None else timeout_s
        future = self._request(op, **fields)
        if not future.wait(wait_s):
            raise KafkaTimeoutError(f"{op} not answered by the Java producer within {wait_s:g} s")
        if future.exception is not None:
            raise future.exception
        if "epoch" in future.answer:  # init's and commit's: the producer id and epoch the client holds
            self.producer_id_and_epoch = (future.answer.get("producer_id"), future.answer.get("epoch"))
        return future.answer

    # kafka-python's calls, as the kafka-eos driver makes them
    def init_transactions(self) -> None:
        self._call("init")

    def begin_transaction(self) -> None:
        self._call("begin")

    def send(self, topic: str, value: bytes, key: bytes | None = None, partition: int | None = None) -> SendFuture:
        if partition is None:
            raise ValueError("the Java producer's sends name their partition")
        return self._request("send", topic=topic, partition=int(partition), value=base64.b64encode(value).decode(),
                             key=None if key is None else base64.b64encode(key).decode())

    def flush(self, timeout: float | None = None) -> None:
        self._call("flush", timeout_s=timeout)

    def send_offsets_to_transaction(self, offsets: dict, group: str) -> None:
        topics = {tp.topic for tp in offsets}
        if len(topics) != 1:
            raise ValueError(f"offsets of one topic at a time; got {sorted(topics)}")
        self._call("offsets", group=group, topic=topics.pop(),
                   offsets={str(tp.partition): [om.offset, om.metadata or ""] for tp, om in offsets.items()})

    def commit_transaction(self) -> None:
        self._call("commit")

    def abort_transaction(self) -> None:
        self._call("abort")

    def close(self, timeout: float | None = None) -> None:
        """Close the producer and end the JVM (killed if it has not ended ``timeout`` s after)."""
        try:
            self._request("close")
            self._proc.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass
        try:
            self._proc.wait(timeout if timeout is not None else 10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
