"""The one record-to-row rule, its Arrow variant and the range reader's batching, without a broker."""

import json
import sys
from types import SimpleNamespace

import pytest

from lab.kafka.read import (
    COLUMNS,
    RECORD_COLUMNS,
    ROW_COLUMNS,
    NotALabEvent,
    arrow_chunks,
    arrow_events,
    event_fields,
    record_row,
    rows_of_arrow,
    rows_of_records,
)

UUID = "0b0e5f0e-1d1d-4a4a-8b8b-0123456789ab"


def produced(event_id: str = UUID, seq: int = 42, key: str = "k07", **extra) -> bytes:
    """A value laid out as the lab's producer writes it (compact separators)."""
    return json.dumps({"id": event_id, "seq": seq, "key": key, "produced_at": 1.5, **extra},
                      separators=(",", ":")).encode()


#: Values that are lab events, each with the fields it must give; the first takes the sliced fast path.
EVENTS = [
    (produced(), (UUID, 42, "k07")),
    (produced(seq=0), (UUID, 0, "k07")),
    (json.dumps({"id": "short", "seq": 3, "key": "k"}).encode(), ("short", 3, "k")),  # spaces: the JSON path
    (json.dumps({"seq": 9, "key": "k", "id": "x"}).encode(), ("x", 9, "k")),  # other field order
    (produced(key='k"q'), (UUID, 42, 'k"q')),  # an escaped quote in the key
    (produced(event_id="é" * 36), ("é" * 36, 42, "k07")),
    (produced(seq=-5), (UUID, -5, "k07")),
]

#: Values that are not lab events.
NOT_EVENTS = [b"not json", b"", None, b"[1, 2]", b'{"seq": 4, "key": "k"}', b'{"id": "a", "seq": 4}',
              b'{"id": 1, "seq": 4, "key": "k"}', b'{"id": "a", "seq": "4", "key": "k"}',
              b'{"id": "a", "seq": 4.0, "key": "k"}', b'{"id": "a", "seq": true, "key": "k"}',
              b'{"id": "a", "seq": 4, "key": null}', b'{"id": "a", "seq": 99999999999999999999, "key": "k"}',
              b'{"id":"\xff\xfe","seq":1,"key":"k"}']


@pytest.mark.parametrize("value, fields", EVENTS)
def test_an_event_gives_its_fields_and_row(value, fields):
    assert event_fields(value, 2, 977) == fields
    assert record_row(2, 977, value) == (fields[0], fields[1], 2, 977)


@pytest.mark.parametrize("value", NOT_EVENTS)
def test_a_record_that_is_not_an_event_is_named_by_partition_and_offset(value):
    with pytest.raises(NotALabEvent, match=r"^record 1@3 is not a lab event: ") as e:
        record_row(1, 3, value)
    assert isinstance(e.value, ValueError)  # what Spark tasks and callers already catch


def test_the_row_is_the_sinks_row_layout():
    from lab.sinks.database import _schema_sql

    assert ROW_COLUMNS == ("event_id", "seq", "partition", "offset")
    # The sink stores (event_id, seq, partition, kafka_offset) in that order.
    assert ("event_id TEXT NOT NULL, seq INTEGER, partition INTEGER,\n            kafka_offset"
            in _schema_sql("append")[0])


def test_arrow_variant_gives_the_rows_of_the_pure_function():
    values = [v for v, _ in EVENTS] * 3
    offsets = list(range(100, 100 + len(values)))
    batch = arrow_events(4, offsets, values)
    assert batch.schema.names == [name for name, _ in COLUMNS]
    assert [str(t) for t in batch.schema.types] == ["string", "int64", "string", "int32", "int64", "int64"]
    assert rows_of_arrow([batch]) == [record_row(4, o, v) for o, v in zip(offsets, values)]
    assert batch.column("key").to_pylist() == [f[2] for _, f in EVENTS] * 3
    assert batch.column("event_time_ms").to_pylist() == [None] * len(values)  # these values carry none


@pytest.mark.parametrize("fallback", [False, True])
def test_the_event_time_is_read_when_the_value_carries_it(fallback):
    values = [produced(seq=i, event_time_ms=1_795_000_000_000 + i) for i in range(3)]
    if fallback:  # a value spanning lines takes the record-by-record path
        values.append(b'{"id": "x",\n "seq": 9, "key": "k", "event_time_ms": 7}')
    batch = arrow_events(0, list(range(len(values))), values)
    expected = [1_795_000_000_000 + i for i in range(3)] + ([7] if fallback else [])
    assert batch.column("event_time_ms").to_pylist() == expected


@pytest.mark.parametrize("bad", NOT_EVENTS)
def test_arrow_variant_fails_on_the_first_non_event_as_the_pure_function_does(bad):
    values = [produced(seq=i) for i in range(5)] + [bad] + [b"also bad"]
    with pytest.raises(NotALabEvent, match=r"^record 0@15 is not a lab event"):
        arrow_events(0, list(range(10, 17)), values)


def test_arrow_variant_falls_back_when_a_value_spans_lines():
    # A newline inside a value would shift Arrow's rows against the offsets: parsed one by one instead.
    values = [produced(seq=1), b'{"id": "x",\n "seq": 2, "key": "k"}', produced(seq=3)]
    assert rows_of_arrow([arrow_events(0, [0, 1, 2], values)]) == [(UUID, 1, 0, 0), ("x", 2, 0, 1), (UUID, 3, 0, 2)]
    assert arrow_events(0, [], []).num_rows == 0


def _records(partitions, offsets, values):
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array(values, pa.binary()), pa.array(partitions, pa.int32()),
                                       pa.array(offsets, pa.int64())], names=list(RECORD_COLUMNS))


def test_records_parsed_in_a_task_give_the_rows_of_the_pure_function_across_partitions_and_batches():
    values = [v for v, _ in EVENTS] * 2
    partitions = [0] * 5 + [2] * 4 + [0] * (len(values) - 9)  # runs of partitions, one coming back
    offsets = list(range(len(values)))
    first, second = _records(partitions[:6], offsets[:6], values[:6]), _records(partitions[6:], offsets[6:], values[6:])
    empty = _records([], [], [])
    assert rows_of_records([empty, first, second]) == [record_row(p, o, v)
                                                       for p, o, v in zip(partitions, offsets, values)]


@pytest.mark.parametrize("bad", NOT_EVENTS)
def test_records_parsed_in_a_task_fail_on_the_first_non_event_by_partition_and_offset(bad):
    values = [produced(seq=i) for i in range(3)] + [bad]
    with pytest.raises(NotALabEvent, match=r"^record 1@13 is not a lab event"):
        rows_of_records([_records([1] * 4, list(range(10, 14)), values)])


def test_arrow_chunks_batch_the_polls_to_at_least_chunk_rows():
    polls = [[SimpleNamespace(offset=o, value=produced(seq=o)) for o in range(start, start + n)]
             for start, n in ((0, 3), (3, 4), (7, 2), (9, 1))]
    sizes = [b.num_rows for b in arrow_chunks(polls, 1, chunk_rows=5)]
    assert sizes == [7, 3]  # 3+4 reaches 5; the rest at the end
    rows = rows_of_arrow(arrow_chunks(polls, 1, chunk_rows=5))
    assert [r[3] for r in rows] == list(range(10)) and {r[2] for r in rows} == {1}
    assert list(arrow_chunks([], 1)) == []


def test_workers_import_it_without_pyspark():
    import subprocess

    code = ("import sys, lab.kafka.read, lab.pipelines.shared.tasks; "
            "print(sorted(m for m in ('pyspark', 'kafka', 'pyarrow', 'psutil') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
