"""One produce request and the broker's answer to it, read from the frames' bytes.

The lab's proxy keeps a produce request it sends late, and the answer to it (``hold_produce`` and ``release``,
:mod:`lab.broker.proxy`), as the hex of each whole frame. :func:`request_batches` reads the record batches the
request carried (each one's producer id, epoch and base sequence: what the broker checks a transactional write
against); :func:`read_answer` decodes the answer with kafka-python's own message classes (every Produce
response version a broker sends, 3 to 13: topic names up to 12, topic ids from 13), so the lab names the error the
broker gave each partition rather than guessing it from a client's behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.kafka.log_segments import Batch, read_batches


@dataclass(frozen=True)
class PartitionAnswer:
    """The broker's answer for one partition of a produce request.

    Attributes
    ----------
    partition : int
    error : str
        Kafka's name for the error code (``NONE`` when the batch was taken), e.g. ``INVALID_PRODUCER_EPOCH``.
    error_code : int
    base_offset : int
        Where the batch was written (or, for a duplicate the broker recognised, where it already was); -1 when
        refused.
    message : str or None
        The broker's error message, when it sent one (versions 8 and later).
    """

    partition: int
    error: str
    error_code: int
    base_offset: int
    message: str | None


def error_name(code: int) -> str:
    """Kafka's name of an error code as kafka-python's table spells it (``INVALID_PRODUCER_EPOCH``; ``NONE`` for 0,
    ``UNKNOWN_CODE_<n>`` for a code the table lacks)."""
    from kafka import errors

    if code == 0:
        return "NONE"
    name = getattr(errors.for_code(code), "message", "UNKNOWN")
    return f"UNKNOWN_CODE_{code}" if name == "UNKNOWN" and code != -1 else name


def read_answer(frame: bytes, version: int) -> list[PartitionAnswer]:
    """Every partition's answer in a Produce response ``frame`` (size prefix and header included) of ``version``.

    Raises
    ------
    ValueError
        When ``frame`` is not a Produce response of that version.
    """
    from kafka.protocol.producer.produce import ProduceResponse

    decoded = _decode(ProduceResponse, "response", frame, version)
    return [PartitionAnswer(partition=p.index, error=error_name(p.error_code), error_code=p.error_code,
                            base_offset=p.base_offset, message=getattr(p, "error_message", None))
            for topic in decoded.responses for p in topic.partition_responses]


def request_batches(frame: bytes, version: int) -> list[tuple[int, Batch]]:
    """``(partition, batch header)`` of every record batch in a Produce request ``frame`` of ``version`` (size
    prefix and header included); batches carry offsets from 0 until the leader assigns them.

    Raises
    ------
    ValueError
        When ``frame`` is not a Produce request of that version.
    """
    from kafka.protocol.producer.produce import ProduceRequest

    decoded = _decode(ProduceRequest, "request", frame, version)
    return [(p.index, b) for topic in decoded.topic_data for p in topic.partition_data
            for b in read_batches(bytes(p.records or b""))]


def _decode(message, kind: str, frame: bytes, version: int):
    """``frame`` decoded as kafka-python's ``message`` class at ``version``; ValueError naming ``kind`` if not."""
    try:
        return message.decode(bytes(frame), version=version, header=True, framed=True)
    except Exception as e:  # kafka-python raises its own decoding errors, and struct's
        raise ValueError(f"not a Produce {kind} v{version}: {type(e).__name__}: {e}") from None
