"""A broker's answer to one produce request, read from the frame's bytes (lab.kafka.produce_frames)."""

import uuid

import pytest

from lab.kafka.produce_frames import PartitionAnswer, error_name, read_answer


def frame(version: int, error_code: int, partition: int = 2, base_offset: int = -1) -> bytes:
    """A Produce response frame as a broker sends it, built with kafka-python's message classes."""
    from kafka.protocol.producer.produce import ProduceResponse

    topic, part = ProduceResponse.TopicProduceResponse, ProduceResponse.TopicProduceResponse.PartitionProduceResponse
    named = {"topic_id": uuid.uuid4()} if version >= 13 else {"name": "late.in"}
    response = ProduceResponse(version=version, throttle_time_ms=0, responses=[topic(
        version=version, **named, partition_responses=[part(version=version, index=partition, error_code=error_code,
                                                             base_offset=base_offset)])])
    response.with_header(correlation_id=7)
    return bytes(response.encode(header=True, framed=True))


@pytest.mark.parametrize("version", [3, 8, 11, 13])
def test_each_version_s_answer_names_the_partition_and_its_error(version):
    [answer] = read_answer(frame(version, 47), version)
    assert answer == PartitionAnswer(partition=2, error="INVALID_PRODUCER_EPOCH", error_code=47, base_offset=-1,
                                     message=None)
    [taken] = read_answer(frame(version, 0, partition=0, base_offset=41), version)
    assert (taken.error, taken.base_offset) == ("NONE", 41)


def test_error_names_are_kafkas_and_an_unknown_code_says_so():
    assert [error_name(c) for c in (0, 45, 46, 48, 90)] == [
        "NONE", "OUT_OF_ORDER_SEQUENCE_NUMBER", "DUPLICATE_SEQUENCE_NUMBER", "INVALID_TXN_STATE", "PRODUCER_FENCED"]
    assert error_name(9999) == "UNKNOWN_CODE_9999"


def test_bytes_that_are_not_a_produce_response_are_a_value_error():
    with pytest.raises(ValueError, match="not a Produce response v11"):
        read_answer(b"\x00\x00\x00\x02ok", 11)


def request_frame(version: int) -> bytes:
    """A transactional Produce request frame with one batch (producer 4001, epoch 3, sequence 10, two records)."""
    from kafka.protocol.producer.produce import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=4001,
                                        producer_epoch=3, base_sequence=10, batch_size=16384)
    for i in range(2):
        builder.append(i, timestamp=1_796_000_000_000, key=b"k00", value=b'{"late":true}', headers=[])
    data, part = ProduceRequest.TopicProduceData, ProduceRequest.TopicProduceData.PartitionProduceData
    named = {"topic_id": uuid.uuid4()} if version >= 13 else {"name": "late.in"}
    batch = part(version=version, index=1, records=bytes(builder.build()))
    request = ProduceRequest(version=version, transactional_id="lab-late", acks=-1, timeout_ms=30_000,
                             topic_data=[data(version=version, **named, partition_data=[batch])])
    request.with_header(correlation_id=9, client_id="lab-txn-producer")
    return bytes(request.encode(header=True, framed=True))


@pytest.mark.parametrize("version", [3, 9, 13])
def test_a_kept_request_s_batches_say_their_producer_id_epoch_and_sequence(version):
    from lab.kafka.produce_frames import request_batches

    [(partition, batch)] = request_batches(request_frame(version), version)
    assert partition == 1 and batch.transactional and not batch.control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.records) == (4001, 3, 10, 2)
    with pytest.raises(ValueError, match="not a Produce request v9"):
        request_batches(b"\x00\x00\x00\x02ok", 9)
