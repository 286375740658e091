"""Every Spark pipeline against a real standalone cluster (`lab cluster`), executor kill included."""

import pytest

from lab.broker import shared as shared_broker
from lab.config import make_config
from lab.events import read_events
from lab.run.supervisor import run_scenario
from lab.spark import cluster
from tests.integration.conftest import assert_all_gone
from tests.integration.executor_checks import check_executor_crash

# Its module-scoped runs are made once: its tests stay on one xdist worker.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_cluster")]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory, session_broker):
    runs = tmp_path_factory.mktemp("cluster-runs")
    shared_broker.save_state(runs, session_broker)  # the session's broker, as for every runs directory
    info = cluster.start(runs)
    yield info, runs
    assert cluster.stop(runs)
    assert_all_gone(info.pids, within_s=30)


@pytest.mark.parametrize("pipeline, params", [
    ("structured", dict(sink="idempotent", faults="driver-crash@batch=2:after-output-before-commit")),
    ("direct", dict(offsets="sink", sink="transactional", faults="executor-crash@batch=2")),
    ("receiver", dict(wal="on", ack="stored", faults="driver-crash@batch=2:mid-output")),
])
def test_pipeline_on_the_cluster(standalone, pipeline, params, monkeypatch):
    info, runs = standalone
    monkeypatch.setenv("LAB_RUNS_DIR", str(runs))
    for var in ("LAB_KAFKA_BOOTSTRAP", "LAB_SINK_URL", "LAB_SPARK_MASTER"):
        monkeypatch.delenv(var, raising=False)
    r = run_scenario(make_config(pipeline=pipeline, spark_master=info.master_url, events=2000, rate=500,
                                 max_batch_records=300, deadline_s=240, **params))
    a = r.audit
    assert r.drained and a.acked == 2000 and a.lost == 0 and a.unseen == 0
    fired = r.faults_fired[0]
    if fired["kind"] == "executor-crash":
        # a real executor JVM under one of the cluster's workers was killed, and the run went on
        assert fired["pid"] is not None and fired["pid"] not in info.pids
        check_executor_crash(r.report, read_events(r.run_dir))
    else:
        assert r.restarts == 1
    assert r.config.settings["spark_master"] == info.master_url
    assert any(e["type"] == "batch-done" for e in read_events(r.run_dir))
