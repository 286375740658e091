"""The Spark session factory: every pipeline's SparkSession comes from here.

Masters: ``local[N]`` (default ``local[2]``), ``local-cluster[W,C,M]``
(executors in their own JVMs, so one can be killed for real), or a
``spark://`` standalone master. The UI is off unless the run asks for it
(``LAB_SPARK_UI``, ``lab run --spark-ui``: on 127.0.0.1 only, from port
:data:`UI_BASE_PORT`; :data:`UI_TABS` says where each pipeline shows), logs
are quiet, and every directory Spark writes (checkpoints, WAL, scratch,
warehouse) is inside the run directory. The driver binds to 127.0.0.1 unless
``LAB_SPARK_DRIVER_HOST`` names the address executors reach it by
(containers); ``LAB_SPARK_PACKAGES`` adds Maven packages
(``spark.jars.packages``) where Maven is reachable.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import threading
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from lab import events as ev
from lab.host.jar_sets import SPARK_KAFKA_JARS
from lab.host.java import find_java, java_env
from lab.registry import PIPELINES
from lab.spark.daemon import WORKER_IMPORTS_ENV
from lab.spark.trigger import SHUFFLE_PARTITIONS

#: The driver UI's first port. Spark's own bind retries take the next one when it is taken
#: (``spark.port.maxRetries``, 16), so a standby and the driver it replaces, or a few runs at
#: once, each get one of 4040-4056: a range a container can forward (``.devcontainer``).
UI_BASE_PORT = 4040
UI_PORT_RETRIES = 16
#: Where each Spark pipeline's batches show in the driver's UI (its registry entry's ``ui_tab``; :func:`ui_hint`;
#: notebooks use it too).
UI_TABS = {name: spec.ui_tab[0] for name, spec in PIPELINES.items() if spec.ui_tab}
_UI_WATCH = {name: spec.ui_tab[1] for name, spec in PIPELINES.items() if spec.ui_tab}


def driver_java_options(run_dir: Path, archive_at_exit: Path | None = None, tuning=None) -> str:
    """The driver JVM's options: its temporary directory, and the class archive (:mod:`lab.spark.archive`).

    ``archive_at_exit``: write the classes this JVM loads to that archive when it exits
    (the archive's training session only). ``tuning``: the switches already read
    (:class:`lab.host.start_tuning.StartTuning`), else read from the environment.
    """
    from lab.host.start_tuning import StartTuning
    from lab.spark import archive as class_archive

    tuning = tuning or StartTuning.from_env()
    opts = [f"-Djava.io.tmpdir={run_dir / 'spark-tmp'}"] + tuning.jvm_options.split()
    if archive_at_exit is not None:
        opts.append(f"-XX:ArchiveClassesAtExit={archive_at_exit}")
    elif tuning.class_archive:
        opts += class_archive.java_options()
    return " ".join(opts)


def driver_addresses() -> tuple[str, str]:
    """``(bind, advertised)``: where the driver's own servers listen, and the name executors reach them by.

    ``127.0.0.1`` for both unless ``LAB_SPARK_DRIVER_HOST`` names the driver's address for executors in other
    containers or machines (docker-compose's ``jupyter``): then every address of the driver's own host, and that
    name. Spark's RPC (:func:`session_conf`) and the receiver's feeder (:mod:`lab.pipelines.receiver.feed`) follow it.
    """
    host = os.environ.get("LAB_SPARK_DRIVER_HOST")
    return ("0.0.0.0", host) if host else ("127.0.0.1", "127.0.0.1")


def session_conf(master: str, run_dir: Path | str, app_name: str, extra: dict | None = None,
                 kafka_connector: bool = False, archive_at_exit: Path | None = None,
                 ui: bool = False, worker_imports: tuple[str, ...] = ()) -> dict[str, str]:
    """The Spark configuration the lab uses (a plain dict, so it can be inspected and tested).

    ``ui``: the driver's web UI on, from :data:`UI_BASE_PORT` (its address:
    :func:`spark_session` binds it to 127.0.0.1). ``worker_imports``: the modules
    the Python worker daemon imports before it forks workers (:data:`SQL_WORKER_IMPORTS`,
    :data:`RDD_WORKER_IMPORTS`; :mod:`lab.spark.daemon`).
    """
    from lab.host.start_tuning import NO_CODEGEN_CONF, StartTuning

    run_dir = Path(run_dir).resolve()
    tuning = StartTuning.from_env()
    conf = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.local.dir": str(run_dir / "spark-tmp"),
        "spark.sql.warehouse.dir": str(run_dir / "spark-warehouse"),
        "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
        "spark.default.parallelism": "2",
        "spark.sql.streaming.checkpointLocation": str(run_dir / "checkpoint"),
        "spark.python.worker.reuse": "true",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.extraJavaOptions": driver_java_options(run_dir, archive_at_exit, tuning),
        "spark.executor.extraJavaOptions": " ".join([f"-Djava.io.tmpdir={run_dir / 'spark-tmp'}",
                                                     *tuning.executor_jvm_options.split()]),
        "spark.log.level": "ERROR",
    }
    if not tuning.codegen:
        conf.update(NO_CODEGEN_CONF)
    if tuning.worker_daemon == "lab":
        # PySpark from the installed package, not from Spark's zips (lab.spark.daemon, where it is measured).
        conf["spark.python.daemon.module"] = "lab.spark.daemon"
        if tuning.worker_preload and worker_imports:
            conf[f"spark.executorEnv.{WORKER_IMPORTS_ENV}"] = ",".join(worker_imports)
    if ui:
        conf["spark.ui.enabled"] = "true"
        conf["spark.ui.port"] = str(UI_BASE_PORT)
        conf["spark.port.maxRetries"] = str(UI_PORT_RETRIES)
        # A kill link would fail a job or stage outside the fault plan, unrecorded in the timeline.
        conf["spark.ui.killEnabled"] = "false"
    # A driver inside a container with executors in other containers (docker-compose): they
    # reach it by its service name, so it must listen on the container's network too.
    conf["spark.driver.bindAddress"], conf["spark.driver.host"] = driver_addresses()
    from lab.host import jars

    if not jars.missing(SPARK_KAFKA_JARS):
        # Spark's Kafka connector, pinned and cached by `lab fetch` (the 4.2.0 connector: 4.3.0 is not on
        # Maven Central; measured to read and stream in pyspark 4.3.0). A stat per jar, no network.
        directory = jars.set_dir(SPARK_KAFKA_JARS)
        files = [str(directory / j.file) for j in jars.jar_set(SPARK_KAFKA_JARS).jars]
        # On the driver's own classpath in every session, so that the class archive (lab.spark.archive),
        # which needs the same classpath at every start, holds the connector's and Kafka client's classes
        # too (measured: a first Kafka read 1.65 s → 1.15 s).
        conf["spark.driver.extraClassPath"] = os.pathsep.join(files)
        if kafka_connector:
            # Executors in JVMs of their own (local-cluster, standalone) get the jars from the driver.
            conf["spark.jars"] = ",".join(files)
    if os.environ.get("LAB_SPARK_PACKAGES"):
        # e.g. the spark-sql-kafka connector; resolved from Maven when the session starts.
        conf["spark.jars.packages"] = os.environ["LAB_SPARK_PACKAGES"]
    if master.startswith("local-cluster"):
        # Executors are separate JVMs that need the lab importable and the same Python.
        conf["spark.executorEnv.PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    conf.update(extra or {})
    return conf


def ensure_connector(required: bool) -> str | None:
    """Fetch Spark's pinned Kafka connector (set :data:`SPARK_KAFKA_JARS`) into the cache, once ever.

    Called before a driver that may read with it starts. Offline and instant when cached.

    Returns
    -------
    str or None
        None when the jars are there; otherwise, when not ``required``, why not (the caller
        records it and the driver reads with the lab's own reader).

    Raises
    ------
    LabError
        When ``required`` (``--kafka-reader spark``) and the jars cannot be fetched; the
        message names the coordinate, the repository and the cache folder.
    """
    from lab.errors import LabError
    from lab.host import jars

    try:
        jars.ensure(SPARK_KAFKA_JARS)
    except LabError as e:
        if required:
            raise
        return str(e)[:300]
    return None


def spark_session(master: str, run_dir: Path | str, app_name: str = "lab", extra: dict | None = None,
                  kafka_connector: bool = False, phase=None, archive_at_exit: Path | None = None,
                  ui: bool | None = None, worker_imports: tuple[str, ...] = ()):
    """Start (or get) the SparkSession for this process (``kafka_connector``: with Spark's cached Kafka connector).

    ``phase``, when given, is called with ``"jvm"`` once the driver JVM answers
    and ``"session"`` once the SparkSession is ready (the start-up phases
    ``bench/startup.py`` measures; a driver announces its UI at ``"session"``,
    :meth:`lab.pipelines.driver.DriverContext.phase`).

    ``ui``: the driver's web UI on 127.0.0.1; ``None``: as the run in
    ``run_dir`` asks (:func:`run_wants_ui`). ``worker_imports``: see :func:`session_conf`.

    Raises
    ------
    LabError
        When no supported JVM is found (with the install command).
    """
    os.environ.update(java_env(find_java()))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # local-cluster's in-JVM master, workers and executors bind to the host's address
    # unless told otherwise; the lab binds only to loopback.
    if driver_addresses()[0] == "127.0.0.1":
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    ui = run_wants_ui(run_dir) if ui is None else ui
    if ui:
        # Spark binds its web UI to SPARK_LOCAL_IP, else to 0.0.0.0 (WebUI.bind), whatever
        # spark.driver.bindAddress says. The driver's RPC and block manager follow that bind address
        # and spark.driver.host (session_conf), so loopback here holds in a container too.
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    (Path(run_dir) / "spark-tmp").mkdir(parents=True, exist_ok=True)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    conf = session_conf(master, run_dir, app_name, extra, kafka_connector, archive_at_exit, ui=ui,
                        worker_imports=worker_imports)
    if phase is not None:
        # The JVM is launched with the session's configuration (its Java options are fixed at launch);
        # launching it on its own first only splits the timing, the same work is done.
        SparkContext._ensure_initialized(conf=SparkConf(loadDefaults=False).setAll(conf.items()))
        phase("jvm")
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if phase is not None:
        phase("session")
    return spark


def skip_accumulator_wait(sc, tuning=None) -> bool:
    """Let ``sc``'s coming stop skip PySpark's wait for its accumulator server (``LAB_QUICK_STOP``); whether it will.

    For a driver that stops its context and exits, once its query or streaming
    context has no job left to run. PySpark's ``SparkContext.stop`` ends with
    the accumulator server's ``shutdown()``, which waits for the server's one
    request handler to notice: it polls the JVM's connection once a second.
    Measured in a structured driver: 0.69 s of a 0.73 s ``spark.stop()``, the
    JVM's own stop 0.04 s. The server's thread is a daemon that ends with the
    process a moment later, and it still serves any update sent before then:
    nothing is lost, and a run's output and offsets are already committed.
    """
    from lab.host.start_tuning import StartTuning

    if not (tuning or StartTuning.from_env()).quick_stop:
        return False
    # PySpark's stop() shuts the server down only when it holds it (pyspark 4.3.0: ``getattr(self, "_accumulatorServer",
    # None)``).
    sc._accumulatorServer = None
    return True


def run_wants_ui(run_dir: Path | str) -> bool:
    """Whether the run in ``run_dir`` asked for the driver's UI (``spark_ui`` in its ``config.json``).

    False where there is no run configuration (the class archive's training session).
    """
    try:
        return json.loads((Path(run_dir) / "config.json").read_text()).get("spark_ui") is True
    except FileNotFoundError:
        return False


def ui_url() -> str | None:
    """The web UI of this process's SparkContext, as a URL on 127.0.0.1; None without a context or a UI.

    Spark names the UI by the driver's advertised host (``spark.driver.host``:
    a container's name with ``LAB_SPARK_DRIVER_HOST``); :func:`spark_session`
    binds it to 127.0.0.1, so that is the host a browser reaches it on.
    """
    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    url = sc.uiWebUrl if sc is not None else None
    if not url:
        return None
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"127.0.0.1:{parts.port}"))


def ui_hint(pipeline: str) -> str:
    """Which tab of the driver's UI to watch for ``pipeline``, and what it shows there (one line).

    Raises
    ------
    LabError
        For a pipeline that runs no Spark, naming those that do.
    """
    from lab.errors import choices_error

    if pipeline not in UI_TABS:
        raise choices_error("Spark pipeline", pipeline, UI_TABS)
    return f'watch the "{UI_TABS[pipeline]}" tab: {_UI_WATCH[pipeline]}'


#: Task attempts before Spark fails a stage: one injected task failure must be retried.
TASK_ATTEMPTS = 4


def with_task_retries(master: str) -> str:
    """The master to start: ``local[N]`` gains task retries (``local[N,F]``); other masters are unchanged.

    Local mode fails a job on its first task failure unless the master names
    a retry count; cluster masters read ``spark.task.maxFailures``. With
    retries a failed task runs again, which is what makes an append sink show
    duplicates after a ``task-failure``.
    """
    m = re.fullmatch(r"local(?:\[(\d+|\*)\])?", master)
    return f"local[{m.group(1) or 1},{TASK_ATTEMPTS}]" if m else master


def _import_modules(modules, _) -> None:
    for name in modules:
        importlib.import_module(name)


#: What Spark's Python workers import for the lab's tasks: Kafka range reads and rows, the sink, the fault hooks.
TASK_MODULES = ("kafka", "lab.kafka.read", "lab.sinks.reader", "lab.sinks.database", "lab.pipelines.shared.tasks")
#: And those of DataFrame work, whose Python data source is the lab's Kafka reader (:mod:`lab.spark.kafka_source`).
SQL_TASK_MODULES = TASK_MODULES + ("lab.spark.kafka_source",)
#: What unpickling a task's function brings into a worker beside the task modules (measured with
#: PYTHONPROFILEIMPORTTIME in the workers of a structured run).
_UNPICKLED_MODULES = ("lab.spark.session", "lab.config")
#: What the worker daemon imports before it forks workers (``LAB_WORKER_IMPORTS``, :mod:`lab.spark.daemon`),
#: per kind of Python work. RDD work: the task modules and what unpickling brings.
RDD_WORKER_IMPORTS = TASK_MODULES + _UNPICKLED_MODULES
#: ``mapInArrow`` and Python data sources: PySpark's Arrow path imports pandas and pyarrow in each worker
#: (measured: 0.25 s and 0.1 s of CPU a worker), and the worker's own SQL modules.
SQL_WORKER_IMPORTS = SQL_TASK_MODULES + _UNPICKLED_MODULES + (
    "pyarrow", "pandas", "pyspark.sql", "pyspark.sql.pandas.serializers", "pyspark.sql.pandas.types",
    "pyspark.sql.conversion", "pyspark.worker_message", "pyspark.sql.datasource",
    "pyspark.sql.streaming.stateful_processor_util")


def start_python_workers(sc, modules=TASK_MODULES) -> None:
    """Start the executors' Python workers with the task modules imported, as part of the driver's start.

    A Python worker's first task pays for its process and imports (measured:
    about 1.3 s of a 200,000-record first batch on 2 cores); paying it here
    keeps it out of the first batch. Workers are reused
    (``spark.python.worker.reuse``). No delivery effect: nothing is read or written.
    """
    n = max(1, sc.defaultParallelism)
    sc.parallelize(range(n), n).foreach(partial(_import_modules, tuple(modules)))


def warm_up(ctx, start, *args) -> threading.Thread:
    """Run ``start(*args)`` (a worker warm-up) on a thread of its own; ``ctx.phase("workers")`` when it is done.

    Beside the driver's other start-up work rather than before it: the JVM
    plans the query while Python workers start (``LAB_WARM_UP=before``, see
    :mod:`lab.host.start_tuning`: the call returns once they have). A warm-up that fails is
    recorded (``warm-up-error``) and not raised: the batch that needs the
    workers then starts them, and fails itself if they cannot start. The
    caller joins the thread before it stops the session.
    """

    def run():
        try:
            start(*args)
            ctx.phase("workers")
        except Exception as e:  # noqa: BLE001 - see the docstring
            ctx.events.write(ev.WARM_UP_ERROR, error=repr(e)[:300])

    from lab.host.start_tuning import StartTuning

    thread = threading.Thread(target=run, name="lab-warm-up", daemon=True)
    thread.start()
    if StartTuning.from_env().warm_up == "before":
        thread.join()
    return thread


def _import_modules_arrow(modules, batches):
    import pyarrow as pa

    _import_modules(modules, None)
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"ok": [True]})


def start_sql_python_workers(spark, modules=TASK_MODULES) -> None:
    """:func:`start_python_workers` for DataFrame work: Python data sources and ``mapInArrow``.

    Spark SQL runs its Python tasks through a worker daemon of its own, not
    the one RDD jobs use (measured: an RDD warm-up left a first data-source
    read 4.8 s long, 2.3 s after a ``mapInArrow`` warm-up, 0.25 s warm), so
    this warm-up goes through ``mapInArrow``. No delivery effect: nothing is
    read or written.
    """
    n = max(1, spark.sparkContext.defaultParallelism)
    spark.range(0, n, 1, n).mapInArrow(partial(_import_modules_arrow, tuple(modules)), "ok boolean").collect()


def query_ended(query) -> bool:
    """Whether a streaming query has stopped; raises the query's own error when it stopped with one."""
    if query.isActive:
        return False
    error = query.exception()
    if error is not None:
        raise error
    return True
