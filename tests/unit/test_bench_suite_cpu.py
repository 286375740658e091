"""bench/suite_cpu.py's grouping of the processes a test run starts, on command lines as /proc has them."""

from __future__ import annotations

import pytest

from bench.suite_cpu import suite_group

T = "/tmp/pytest-of-root/pytest-1/popen-gw0/test_x0"  # a test's directory, in many command lines


@pytest.mark.parametrize("cmdline, group", [
    ("bash\0/v/pyspark/bin/spark-class\0org.apache.spark.deploy.SparkSubmit\0", "Spark driver JVMs"),
    (f"/usr/bin/java\0-cp\0/v/jars/*\0-Dspark.executorEnv.PYTHONPATH={T}\0org.apache.spark.deploy.SparkSubmit\0",
     "Spark driver JVMs"),
    ("/usr/bin/java\0-cp\0x\0org.apache.spark.executor.CoarseGrainedExecutorBackend\0", "Spark executor JVMs"),
    ("/usr/bin/java\0-cp\0x\0org.apache.spark.deploy.worker.Worker\0", "Spark standalone master and workers"),
    ("/usr/bin/java\0-Xmx256m\0-cp\0/c/kafka-broker/x.jar\0kafka.Kafka\0/r/server.properties\0", "Kafka broker JVMs"),
    ("/usr/bin/java\0-cp\0x\0kafka.tools.StorageTool\0format\0", "Kafka broker JVMs"),
    ("/usr/bin/java\0-cp\0x\0org.apache.flink.client.cli.CliFrontend\0", "Flink JVMs"),
    ("/v/bin/python\0-m\0lab.spark.daemon\0", "Spark Python workers"),
    (f"/v/bin/python\0-m\0lab.pipelines.driver\0{T}/runs/r\0", "driver Python"),
    (f"/v/bin/python\0-m\0ipykernel_launcher\0-f\0{T}/kernel.json\0", "notebook kernels"),
    (f"/v/bin/python\0-m\0lab.broker.proxy\0--log\0{T}/proxy.log\0", "broker proxies"),
    ("/usr/lib/chromium/chromium\0--headless\0", "browser tests (Chromium, Jupyter)"),
    (f"/v/bin/python\0-m\0lab\0matrix\0--grid\0{T}/grid.yaml\0", "lab commands (run, matrix and its papermill rows)"),
    ("/v/bin/python\0-m\0lab.broker.archive\0/w\0/a.jsa\0", "lab commands (run, matrix and its papermill rows)"),
    ("/v/bin/python\0-m\0pytest\0-q\0tests\0", "test processes (pytest and its workers)"),
    ("/v/bin/python\0-u\0-c\0import sys;exec(eval(sys.stdin.readline()))\0", "test processes (pytest and its workers)"),
    ("/usr/bin/make\0test\0", "other"),
])
def test_suite_group(cmdline, group):
    assert suite_group(cmdline) == group

