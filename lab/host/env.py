"""The ``LAB_*`` variables: their catalogue, their parsers, and where runs go by default.

Two families, each as its callers have always read it: :func:`number` and :func:`one_of` for the run's
settings (:func:`lab.config.make_config`: exact values), :func:`switch`, :func:`choice` and
:func:`milliseconds` for the start-up techniques (:class:`lab.host.start_tuning.StartTuning`: trimmed, lower case).
Each takes the environment as a mapping, so a caller can pass ``os.environ`` or a test's dict.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError, choices_error


@dataclass(frozen=True)
class Variable:
    """One ``LAB_*`` variable: what it does, its default (empty: unset), whether only the lab sets it."""

    meaning: str
    default: str = ""
    internal: bool = False


#: Every ``LAB_*`` variable the lab reads, in the order docs/reference-tables.md lists them; that page's table gives
#: each one's meaning as written here (a unit test checks both ways, and that the code reads no other).
VARIABLES = {
    'LAB_KAFKA_BOOTSTRAP': Variable('use this Kafka instead of the embedded broker (unset)'),
    'LAB_KAFKA_PROXY': Variable('`host:port` of the control port of a lab proxy in front of `LAB_KAFKA_BOOTSTRAP`, so '
                                '`ack-loss` and `broker-outage` work there; ignored without it'),
    'LAB_BROKER_NODES': Variable('`1` (default) or `3`: a three-broker Apache Kafka cluster', default='1'),
    'LAB_KAFKA_FORMAT': Variable("how a new embedded Kafka's data directory is made: `template` (default: a copy of "
                                 "one formatted once per Kafka version, in `<cache>/kafka-format/`) or `each` (Kafka's "
                                 "`StorageTool` for each broker)", default='template'),
    'LAB_SINK_URL': Variable('`postgresql://user@host:port/db`: a PostgreSQL sink, one schema per run (default: SQLite '
                             'in the run directory)'),
    'LAB_SPARK_MASTER': Variable('the Spark master (`local[2]`)', default='local[2]'),
    'LAB_SPARK_UI': Variable("`1`/`on`: the Spark driver's web UI, as `--spark-ui` (`0`/`off`, the default); ignored "
                             "for pipelines without Spark", default='0'),
    'LAB_FLINK_ENV': Variable("where the flink pipeline's PyFlink environment lives (`<cache>/flink/2.2.1-py<X.Y>`; "
                              "made by `make flink`)", default='<cache>/flink/2.2.1-py<X.Y>'),
    'LAB_FLINK_PYTHON': Variable('the Python `make flink` builds the PyFlink environment on (3.11 or 3.12; default: '
                                 'the lab\'s own when it is one of them, else the first `python3.12`, `python3.11` '
                                 'found on `PATH`, in pyenv or uv)'),
    'LAB_KAFKA_READER': Variable('`--kafka-reader` when not given (`auto`)', default='auto'),
    'LAB_RUNS_DIR': Variable('where run directories, `broker.json` and `cluster.json` go (`runs/` at the project root)',
                             default='runs/ at the project root'),
    'LAB_WORKSPACE': Variable("where `make lab` keeps the learner's copies of the notebooks, and serves them from "
                              "(`workspace/` at the project root, which git ignores)",
                              default='workspace/ at the project root'),
    'LAB_JUPYTER_PORT': Variable('the port `make lab` tries first (8888; Jupyter moves on to the next free one)',
                                 default='8888'),
    'LAB_JUPYTER_TOKEN': Variable("the token of `make lab`'s JupyterLab, e.g. one short word for a whole room (unset: "
                                  "a new random one at each start)"),
    'LAB_RESTART_DELAY': Variable('seconds between a driver crash and its restart (0.2)', default='0.2'),
    'LAB_DEADLINE': Variable('seconds without progress before a run stops undrained (120)', default='120'),
    'LAB_JAVA_HOME': Variable('the JVM to use; when set, the only one considered (else `JAVA_HOME`, `PATH`, '
                              '`/usr/lib/jvm`)'),
    'LAB_CACHE_DIR': Variable('where `lab fetch` keeps the pinned jars and the class archives (`$XDG_CACHE_HOME/lab`, '
                              'else `~/.cache/lab`)', default='$XDG_CACHE_HOME/lab, else ~/.cache/lab'),
    'LAB_MAVEN_REPO': Variable('the repository the HTTPS route downloads from (Maven Central)',
                               default='Maven Central'),
    'LAB_CLASS_ARCHIVE': Variable('`on` (default) or `off`: the driver JVM maps its classes from the class archive',
                                  default='on'),
    'LAB_BROKER_ARCHIVE': Variable("`on` (default) or `off`: every Kafka broker JVM maps its classes from the broker's "
                                   "class archive (built once by `lab fetch` or the first broker start)", default='on'),
    'LAB_DRIVER_JVM_OPTIONS': Variable("the driver JVM's flags (`-XX:TieredStopAtLevel=1`; empty: the JVM's own "
                                       "defaults)", default='-XX:TieredStopAtLevel=1'),
    'LAB_EXECUTOR_JVM_OPTIONS': Variable("the flags of a driver's executor JVMs on `local-cluster` and standalone "
                                         "masters (`-XX:TieredStopAtLevel=1`; empty: the JVM's own defaults)",
                                         default='-XX:TieredStopAtLevel=1'),
    'LAB_FLINK_JVM_OPTIONS': Variable("the flink pipeline's job JVM's flags (`-XX:TieredStopAtLevel=1`, after any "
                                      "`JVM_ARGS` of yours; empty: the JVM's own defaults)",
                                      default='-XX:TieredStopAtLevel=1'),
    'LAB_WARM_UP': Variable('`beside` (default): Python workers start while the query is planned; `before`: first',
                            default='beside'),
    'LAB_WORKER_DAEMON': Variable("`lab` (default): Spark's Python worker daemon imports PySpark from the installed "
                                  "package (`lab/spark/daemon.py`); `pyspark`: from Spark's zips, as Spark starts it",
                                  default='lab'),
    'LAB_WORKER_PRELOAD': Variable("`on` (default): with `LAB_WORKER_DAEMON=lab`, the worker daemon imports the "
                                   "workers' modules (pandas, pyarrow, the lab's task modules) once, before it forks "
                                   "them; `off`: each worker imports them", default='on'),
    'LAB_QUICK_STOP': Variable("`on` (default): a Spark driver's clean stop skips PySpark's wait for its accumulator "
                               "server (0.4-0.7 s), and a receiver's stops its streaming context without Spark's "
                               "graceful wait once every batch holding what it was handed has completed (1.77 → 0.87 "
                               "s); `off`: PySpark's and Spark's own stops", default='on'),
    'LAB_TASK_FETCH_WAIT_MS': Variable("`fetch.max.wait.ms` of the consumers in the tasks of Spark's own Kafka source "
                                       "(the structured pipeline's reader `spark`): `20` (default) instead of Kafka's "
                                       "`500`, which made each task's offset look-ups wait behind a held fetch",
                                       default='20'),
    'LAB_CODEGEN': Variable("`off` (default): Spark SQL evaluates the drivers' queries interpreted (no whole-stage "
                            "code, no compiled projections), which spares each new driver JVM compiling them; `on`: "
                            "Spark's own code generation", default='off'),
    'LAB_STANDBY': Variable('`planned` (default): the next driver is started ahead while a driver crash is planned; '
                            '`always`; `off`', default='planned'),
    'LAB_CLUSTER_BESIDE': Variable("`on` (default): `lab matrix --jobs 1` runs the shared cluster's rows on a lane of "
                                   "their own, beside the other rows once those are past their receiver rows; `off`: "
                                   "in grid order, one at a time", default='on'),
    'LAB_ROW_AHEAD': Variable("`on` (default): `lab matrix --jobs 1` starts the next row's notebook and its first "
                              "driver while a row runs, and lets its run read the broker once that row's is over; "
                              "`off`: each row's notebook when the one before has ended", default='on'),
    'LAB_SPARK_DRIVER_HOST': Variable('the address executors reach the driver by (containers); the driver then binds '
                                      '0.0.0.0 (unset: 127.0.0.1)'),
    'LAB_SPARK_PACKAGES': Variable('`spark.jars.packages` for every session, resolved from Maven (unset)'),
    'LAB_DRIVER_ATTEMPT': Variable('set by the lab for each driver process: its attempt number; not for users',
                                   internal=True),
    'LAB_DRIVER_STANDBY': Variable('set by the lab for a standby driver: the file whose creation gives it its turn; '
                                   'not for users', internal=True),
    'LAB_WORKER_IMPORTS': Variable("set by the lab (`spark.executorEnv`) for Spark's Python worker daemon: the modules "
                                   "it imports before it forks workers; not for users", internal=True),
}


def number(env, name: str, default: float) -> float:
    """The number ``name`` of ``env`` holds (``default`` when unset or empty).

    Raises
    ------
    LabError
        A value that is not a number, named.
    """
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise LabError(f"{name}={raw!r} is not a number") from None


def one_of(env, name: str, default: str, valid) -> str:
    """The variable ``name`` of ``env``, exactly one of ``valid`` (``default`` when unset or empty; no case folding).

    Raises
    ------
    LabError
        Any other value, named with the valid choices.
    """
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if raw not in valid:
        raise LabError(f"{name}={raw!r} is not valid; valid choices: {', '.join(sorted(valid))}")
    return raw


_SWITCH = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False, "no": False}


def switch(env, name: str, default: str = "on") -> bool:
    """The on/off variable ``name`` of ``env`` (``on``/``off``, also ``1``/``0``, ``true``/``false``, ``yes``/``no``).

    Raises
    ------
    LabError
        Any other value, named with ``on`` and ``off``.
    """
    value = env.get(name, default).strip().lower()
    if value not in _SWITCH:
        raise choices_error(name, value, ("on", "off"))
    return _SWITCH[value]


def milliseconds(env, name: str, default: int) -> int:
    """The whole number of milliseconds ``name`` of ``env`` holds (``default`` when unset).

    Raises
    ------
    LabError
        A value that is not a whole number from 0 to 60000, named.
    """
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 60_000:
        raise LabError(f"{name}={text!r}: expected a whole number of milliseconds from 0 to 60000")
    return value


def choice(env, name: str, default: str, choices) -> str:
    """The variable ``name`` of ``env``, one of ``choices`` (read as :func:`switch` reads: trimmed, lower case).

    Raises
    ------
    LabError
        Any other value, named with the choices.
    """
    value = env.get(name, default).strip().lower()
    if value not in choices:
        raise choices_error(name, value, choices)
    return value


def project_root() -> Path | None:
    """The checkout the lab runs from (notebooks run in ``notebooks/``), or ``None`` for an installed lab."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def default_runs_dir() -> str:
    """``runs/`` at the project root when the lab runs from its checkout, else ``./runs``."""
    root = project_root()
    return str(root / "runs") if root else "runs"


def default_workspace() -> Path:
    """``LAB_WORKSPACE``, else ``workspace/`` at the project root (``./workspace`` for an installed lab)."""
    if os.environ.get("LAB_WORKSPACE"):
        return Path(os.environ["LAB_WORKSPACE"]).resolve()
    root = project_root()
    return (root / "workspace") if root else Path("workspace").resolve()


def env_runs_dir() -> str:
    """``LAB_RUNS_DIR``, else :func:`default_runs_dir`."""
    return os.environ.get("LAB_RUNS_DIR") or default_runs_dir()
