"""A Spark pipeline's choice of Kafka reader and the structured one's rows, with a real Spark session (in a child
process).

These tests put no connector on the classpath (``LAB_SPARK_PACKAGES`` unset, an
empty ``LAB_CACHE_DIR``), so the ``spark`` reader is checked up to the connector:
the choice, its error, and the conversion of the connector's documented rows
into the lab's columns by the same rule as the ``labkafka`` reader.
"""

import json
import subprocess
import sys

import pytest

from tests.conftest import clean_env

pytestmark = pytest.mark.integration

PROBE = r"""
import datetime, json, sys
from lab.errors import LabError
from lab.spark.kafka_source import SCHEMA
from lab.pipelines.shared import kafka_reader as kr
from lab.pipelines.structured import kafka_input as si
from lab.spark.session import spark_session

spark = spark_session("local[1]", sys.argv[1], "probe")
out = {"auto": kr.resolve_reader(spark, "auto"),
       "labkafka": kr.resolve_reader(spark, "labkafka"),
       "connector": kr.connector_on_classpath(spark)}
try:
    kr.resolve_reader(spark, "spark")
    out["spark"] = "no error"
except LabError as e:
    out["spark"] = type(e).__name__ + ": " + str(e)
# The detection answers yes for a class that is there.
kr.KAFKA_CONNECTOR_CLASS = "org.apache.spark.sql.SparkSession"
out["present_class"] = kr.connector_on_classpath(spark)
# Rows shaped as Spark's Kafka source documents them.
kafka_schema = ("key binary, value binary, topic string, partition int, offset long, "
                "timestamp timestamp, timestampType int")
now = datetime.datetime(2026, 1, 1)
rows = [(b"k1", json.dumps({"id": "e-1", "seq": 1, "key": "k1", "event_time_ms": 1795000000123}).encode(),
         "events", 2, 40, now, 0),
        (None, json.dumps({"id": "e-2", "seq": 2, "key": "k2", "extra": 1}).encode(), "events", 0, 7, now, 0)]
events = si.events_from_kafka_rows(spark.createDataFrame(rows, kafka_schema))
out["schema"] = [(f.name, f.dataType.simpleString()) for f in events.schema.fields]
out["lab_schema"] = [(f.name, f.dataType.simpleString()) for f in SCHEMA.fields]
out["rows"] = [list(r) for r in events.collect()]
for name, value in (("not json", b"not json"), ("no id", b'{"seq": 4, "key": "k"}'), ("null", None)):
    bad = spark.createDataFrame([(None, value, "events", 1, 3, now, 0)], kafka_schema)
    try:
        si.events_from_kafka_rows(bad).collect()
        out[name] = "no error"
    except Exception as e:
        out[name] = type(e).__name__ + ": " + str(e)[:400]
spark.stop()
print(json.dumps(out))
"""


def test_reader_choice_and_the_connector_rows_as_lab_events(tmp_path):
    p = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, timeout=240,
                       env=clean_env(LAB_CACHE_DIR=str(tmp_path / "no-jars")))
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["connector"] is False and out["present_class"] is True
    assert out["auto"] == "labkafka" and out["labkafka"] == "labkafka"
    assert out["spark"].startswith("DriverConfigError") and "lab fetch" in out["spark"]
    assert "--kafka-reader labkafka" in out["spark"]
    assert out["schema"] == out["lab_schema"]
    # The event time when the value carries one (a stateful query's column), null when not.
    assert out["rows"] == [["e-1", 1, "k1", 2, 40, 1795000000123], ["e-2", 2, "k2", 0, 7, None]]
    # A record that is not a lab event fails the batch, naming it (partition@offset) where it parsed as JSON.
    assert "MALFORMED_RECORD_IN_PARSING" in out["not json"]
    assert "record 1@3 is not a lab event" in out["no id"] and "record 1@3 is not a lab event" in out["null"]


def test_without_the_connector_spark_fails_before_any_driver_and_auto_reads_with_labkafka(runs_dir, monkeypatch):
    """No connector in the cache and none to fetch: ``spark`` fails at once, ``auto`` falls back and says so."""
    from lab.config import make_config
    from lab.errors import LabError
    from lab.events import read_events
    from lab.run.supervisor import run_scenario

    monkeypatch.setenv("LAB_CACHE_DIR", str(runs_dir.parent / "no-jars"))  # nothing cached
    monkeypatch.setenv("LAB_MAVEN_REPO", (runs_dir.parent / "no-repo").as_uri())  # and nothing to fetch from
    # The empty cache has no class archive either; building one for this jar set took 30-35 s of the test.
    monkeypatch.setenv("LAB_CLASS_ARCHIVE", "off")
    with pytest.raises(LabError) as e:
        run_scenario(make_config(pipeline="structured", events=200, rate=500, kafka_reader="spark", name="spark"))
    assert "\n" not in str(e.value) and "cannot fetch org.apache.spark:spark-sql-kafka" in str(e.value)
    (failed,) = [d for d in runs_dir.iterdir() if d.is_dir()]  # and the session broker's broker.json
    assert not [e for e in read_events(failed) if e["type"] == "driver-start"], "no driver may start"
    result = run_scenario(make_config(pipeline="structured", events=200, rate=500, name="auto"))
    events = read_events(result.run_dir)
    assert [e["type"] for e in events if e["type"] == "kafka-connector-missing"] == ["kafka-connector-missing"]
    assert result.report["settings"]["kafka_reader"] == "labkafka" and result.report["exactly_once"] == 200
