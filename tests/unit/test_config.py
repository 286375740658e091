import pytest

from lab.config import RunConfig, make_config
from lab.errors import LabError


def test_defaults_are_explicit_and_valid(runs_dir):
    c = make_config()
    assert c.pipeline == "plain" and c.producer.acks == "all" and c.producer.idempotence is True
    assert c.name == "plain-append"
    assert RunConfig.from_json(c.to_json()) == c


def test_environment_is_read(runs_dir, monkeypatch):
    monkeypatch.setenv("LAB_SINK_URL", "postgresql://lab@127.0.0.1:5999/lab")
    monkeypatch.setenv("LAB_SPARK_MASTER", "local-cluster[2,1,1024]")
    monkeypatch.setenv("LAB_DEADLINE", "30")
    c = make_config()
    assert (c.sink_url.startswith("postgresql://") and c.option("spark_master") == "local-cluster[2,1,1024]"
            and c.deadline_s == 30)
    assert make_config(spark_master="local[1]").option("spark_master") == "local[1]"  # a parameter wins


@pytest.mark.parametrize(
    "params, words",
    [
        (dict(pipeline="spark"), ["'spark'", "plain", "flink"]),
        (dict(pipeline="flink", checkpointing="exactly"), ["'exactly'", "aligned", "unaligned", "at-least-once"]),
        (dict(pipeline="flink", flink_delivery="twice"), ["'twice'", "exactly-once", "at-least-once"]),
        (dict(pipeline="flink", sink="append"), ["'append'", "topic"]),
        (dict(pipeline="flink", query="window-count"), ["window-count", "'flink'"]),
        (dict(pipeline="flink", batch_interval_s=0.05), ["0.05", "0.2 s or more"]),
        (dict(pipeline="flink", faults="driver-crash@batch=2:after-output-before-commit"),
         ["after-output-before-commit", "mid-output"]),
        (dict(pipeline="structured", checkpointing="unaligned"), ["--checkpointing", "flink", "'structured'"]),
        (dict(sink="upsert"), ["'upsert'", "append", "idempotent", "transactional"]),
        (dict(faults="driver-crash@batch=1:after-wal-before-ack"), ["after-wal-before-ack", "mid-output"]),
        (dict(faults="executor-crash@at=1s"), ["executor-crash", "plain", "driver-crash"]),
        (dict(commit="sometimes"), ["sometimes", "after-output"]),
        (dict(acks="2"), ["'2'", "all"]),
        (dict(acks="1"), ["idempotence needs acks=all"]),
        (dict(spark_master="yarn"), ["yarn", "local[N]"]),
        (dict(spark_master="local[0]"), ["local[0]", "N >= 1"]),
        (dict(spark_master="local-cluster[0,1,1024]"), ["local-cluster[0,1,1024]", "each >= 1"]),
        (dict(events=0), ["events must be >= 1"]),
        (dict(pipeline="structured", batch_interval_s=0), ["--batch-interval", " 0 s", "0.2 s or more"]),
        (dict(pipeline="receiver", batch_interval_s=float("nan")), ["nan s", "0.2 s or more"]),
        (dict(colour="red"), ["'colour'", "pipeline"]),
        (dict(pipeline="structured", kafka_reader="connector"), ["'connector'", "auto", "labkafka", "spark"]),
        (dict(pipeline="structured", query="sum"), ["'sum'", "passthrough", "window-count", "dedupe"]),
        (dict(pipeline="direct", query="window-count"), ["window-count", "structured", "'direct'"]),
        (dict(pipeline="structured", query="window-count", sink="files"), ["window-count", "append", "files"]),
        (dict(pipeline="structured", state_store="leveldb"), ["'leveldb'", "hdfs", "rocksdb"]),
        (dict(late_fraction=1.5), ["late_fraction", "1.5"]),
        (dict(window_s=0), ["window must be"]),
    ],
)
def test_bad_values_are_named_with_the_valid_choices(runs_dir, params, words):
    with pytest.raises(LabError) as e:
        make_config(**params)
    for w in words:
        assert w in str(e.value)


def test_bad_sink_url(runs_dir, monkeypatch):
    monkeypatch.setenv("LAB_SINK_URL", "mysql://x")
    with pytest.raises(LabError, match="mysql://x"):
        make_config()


def test_settings_name_everything_that_changes_semantics(runs_dir):
    s = make_config(acks="1", idempotence=False, sink="idempotent").settings
    assert s["acks"] == "1" and s["idempotence"] is False and s["sink"] == "idempotent" and s["broker"] == "embedded"


def test_kafka_reader_from_the_environment(runs_dir, monkeypatch):
    monkeypatch.setenv("LAB_KAFKA_READER", "labkafka")
    c = make_config(pipeline="structured")
    assert c.option("kafka_reader") == "labkafka" and c.settings["kafka_reader"] == "labkafka"
    assert make_config(pipeline="structured", kafka_reader="auto").option("kafka_reader") == "auto"  # a parameter wins
    # Spark's connector with a Kafka of one's own is a valid choice; other pipelines ignore the setting.
    monkeypatch.setenv("LAB_KAFKA_READER", "spark")
    assert make_config(pipeline="structured", kafka_bootstrap="127.0.0.1:9092").option("kafka_reader") == "spark"
    assert "kafka_reader" not in make_config(pipeline="plain").settings
    monkeypatch.setenv("LAB_KAFKA_READER", "Spark")
    with pytest.raises(LabError) as e:
        make_config(pipeline="plain")
    assert "LAB_KAFKA_READER='Spark'" in str(e.value) and "labkafka" in str(e.value)


@pytest.mark.parametrize("value", ["kafka-proxy:19093", "127.0.0.1:1", "[::1]:65535", "proxy.lab.internal:8080"])
def test_kafka_proxy_from_the_environment(runs_dir, monkeypatch, value):
    monkeypatch.setenv("LAB_KAFKA_BOOTSTRAP", "kafka-proxy:19092")
    monkeypatch.setenv("LAB_KAFKA_PROXY", value)
    c = make_config()
    assert c.option("kafka_proxy") == value and RunConfig.from_json(c.to_json()).option("kafka_proxy") == value


@pytest.mark.parametrize("value", ["kafka-proxy", "kafka-proxy:", ":19093", "kafka-proxy:abc", "kafka-proxy:0",
                                   "kafka-proxy:70000", "a b:1", "http://kafka-proxy:19093", "-x:1"])
def test_a_bad_kafka_proxy_is_one_line_naming_it(runs_dir, monkeypatch, value):
    monkeypatch.setenv("LAB_KAFKA_BOOTSTRAP", "kafka-proxy:19092")
    monkeypatch.setenv("LAB_KAFKA_PROXY", value)
    with pytest.raises(LabError) as e:
        make_config()
    msg = str(e.value)
    assert f"LAB_KAFKA_PROXY {value!r}" in msg and "host:port" in msg and "\n" not in msg


def test_kafka_proxy_without_a_bootstrap_is_dropped_but_still_checked(runs_dir, monkeypatch):
    monkeypatch.setenv("LAB_KAFKA_PROXY", "kafka-proxy:19093")
    assert make_config().option("kafka_proxy") is None  # the embedded broker has its own proxy
    assert make_config(kafka_bootstrap="k:1").option("kafka_proxy") == "kafka-proxy:19093"
    monkeypatch.setenv("LAB_KAFKA_PROXY", "kafka-proxy")
    with pytest.raises(LabError, match="LAB_KAFKA_PROXY 'kafka-proxy'"):
        make_config()


@pytest.mark.parametrize("pipeline, interval", [("structured", 0.5), ("direct", 0.5), ("receiver", 0.5),
                                                ("plain", 0.5), ("flink", 1.0)])
def test_batch_interval_default_per_pipeline_and_a_given_one_wins(runs_dir, pipeline, interval):
    assert make_config(pipeline=pipeline).batch_interval_s == interval
    assert make_config(pipeline=pipeline, batch_interval_s=2.0).batch_interval_s == 2.0


def test_elr_is_set_only_on_the_labs_own_apache_kafka(monkeypatch):
    from lab.config import make_config
    from lab.errors import LabError

    assert make_config(pipeline="plain", elr="off").settings["elr"] == "off"
    assert "elr" not in make_config(pipeline="plain").settings  # left as the broker has it
    with pytest.raises(LabError, match="elr 'maybe'; valid choices: broker, off, on"):
        make_config(pipeline="plain", elr="maybe")
    monkeypatch.setenv("LAB_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
    with pytest.raises(LabError, match="--elr on finalizes a feature of the lab's own Apache "
                                       "Kafka.*LAB_KAFKA_BOOTSTRAP"):
        make_config(pipeline="plain", elr="on")


def test_trust_commit_and_delivery_timeout_are_the_kafka_eos_pipelines_and_bounded():
    cfg = make_config(pipeline="kafka-eos", trust_commit=True, delivery_timeout_s=11)
    assert cfg.settings["trust_commit"] is True and cfg.settings["delivery_timeout_s"] == 11
    assert "trust_commit" not in make_config(pipeline="kafka-eos").settings  # stated only when changed
    with pytest.raises(LabError, match=r"--trust-commit is the kafka-eos pipeline's .* pipeline is 'plain'; valid "
                                       r"pipelines: kafka-eos"):
        make_config(pipeline="plain", trust_commit=True)
    with pytest.raises(LabError, match=r"--delivery-timeout 5 s: valid 11 to 45 s"):
        make_config(pipeline="kafka-eos", delivery_timeout_s=5)
    with pytest.raises(LabError, match=r"--delivery-timeout is the kafka-eos"):
        make_config(pipeline="structured", delivery_timeout_s=20)


def test_the_transactional_client_is_kafka_eos_s_and_one_of_two():
    assert make_config(pipeline="kafka-eos", txn_client="java").settings["txn_client"] == "java"
    assert "txn_client" not in make_config(pipeline="kafka-eos").settings  # python, stated only when changed
    with pytest.raises(LabError, match=r"unknown transactional client \(--txn-client\) 'go'; valid choices: java, "
                                       r"python"):
        make_config(pipeline="kafka-eos", txn_client="go")
    with pytest.raises(LabError, match=r"--txn-client is the kafka-eos pipeline's .* pipeline is 'plain'"):
        make_config(pipeline="plain", txn_client="java")


def test_the_java_client_s_jvm_is_looked_for_before_any_driver_starts(monkeypatch):
    from lab.engines import kafka as kafka_engine
    from lab.host import java
    from lab.registry import PIPELINES

    def no_java():
        raise LabError("no Java 17 or newer found; install one")

    monkeypatch.setattr(java, "find_java", no_java)
    spec = PIPELINES["kafka-eos"]
    with pytest.raises(LabError, match="no Java 17"):
        kafka_engine.prepare(make_config(pipeline="kafka-eos", txn_client="java"), spec, lambda *a, **k: None)
    kafka_engine.prepare(make_config(pipeline="kafka-eos"), spec, lambda *a, **k: None)  # the Python client: none
