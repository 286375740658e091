"""The Spark session factory starts a real JVM with the lab's settings (in a child process, so its JVM ends with it)."""

import json
import subprocess
import sys

import pytest

from lab.spark.session import session_conf
from tests.conftest import clean_env

pytestmark = pytest.mark.integration

PROBE = """
import json, sys
from lab.spark.session import spark_session
spark = spark_session("local[1]", sys.argv[1], "probe")
sc = spark.sparkContext
out = {k: sc.getConf().get(k) for k in ("spark.ui.enabled", "spark.local.dir", "spark.master",
                                        "spark.sql.streaming.checkpointLocation")}
out["sum"] = sc.parallelize(range(100), 2).sum()
compiled = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
before = compiled.getCount()
counts = spark.range(0, 700).selectExpr("id % 7 AS k", "CAST(id AS STRING) AS s").where("s != ''").groupBy("k").count()
out["groups"] = sorted([r["k"], r["count"]] for r in counts.collect())
out["compiled"] = compiled.getCount() - before
spark.stop()
print(json.dumps(out))
"""


def test_session_runs_with_quiet_settings_inside_the_run_dir(tmp_path):
    p = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, timeout=180,
                       env=clean_env())
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["sum"] == 4950 and out["spark.ui.enabled"] == "false" and out["spark.master"] == "local[1]"
    assert (out["spark.local.dir"].startswith(str(tmp_path))
            and out["spark.sql.streaming.checkpointLocation"].startswith(str(tmp_path)))
    # Spark SQL interpreted (LAB_CODEGEN=off, the default): the query's rows as compiled code gives them, with at
    # most one class compiled where code generation compiles 7 (measured with LAB_CODEGEN=on, pyspark 4.3.0)
    assert out["groups"] == [[k, 100] for k in range(7)]
    assert out["compiled"] <= 1, (
        f"{out['compiled']} classes compiled: Spark no longer honours the lab's NO_CODEGEN_CONF")


def test_conf_for_every_master_form(tmp_path):
    for master in ("local[2]", "local-cluster[2,1,1024]", "spark://127.0.0.1:7077"):
        conf = session_conf(master, tmp_path, "x")
        assert conf["spark.master"] == master and conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert "spark.executorEnv.PYTHONPATH" in session_conf("local-cluster[2,1,1024]", tmp_path, "x")
