"""PySpark's worker daemon, started with PySpark imported from the installed package rather than Spark's zips.

Spark starts each Python worker daemon with ``PYTHONPATH`` beginning with
``$SPARK_HOME/python/lib/pyspark.zip`` and ``py4j-*-src.zip``
(``PythonWorkerFactory``). Python cannot cache the bytecode of a module it
imports from a zip, so every daemon compiled PySpark's sources again, and every
task's ``importlib.invalidate_caches()`` (``pyspark.worker_util.setup_spark_files``)
re-read the 4 MB zip's directory. The pip-installed PySpark carries the same
files, compiled once into ``__pycache__``.

``spark.python.daemon.module`` names this module (:func:`lab.spark.session.session_conf`,
``LAB_WORKER_DAEMON``, :mod:`lab.host.start_tuning`): it takes the two zips off
``sys.path`` (and out of the importer cache), then runs ``pyspark.daemon`` as
``__main__``, unchanged. The forked workers inherit the path. Where the
remaining path has no PySpark (a Python without the package), the zips stay.
Nothing a task computes or writes changes: the package is the same release as
the zips (``pip install pyspark`` ships both; the lab's image checks that its
package matches its Spark, ``docker/jupyter.Dockerfile``).

Measured (``bench/run_cpu.py``, structured crash scenario, 3 rounds each): the
Python workers' CPU 5.2-5.9 s → 3.7-4.4 s a run; before, 41 % of their samples
were in ``zipimport``.

Imports ahead of the fork
-------------------------
``LAB_WORKER_IMPORTS`` (comma-separated module names, set by
:func:`lab.spark.session.session_conf` as ``spark.executorEnv``, so executors of a
cluster get it too): the daemon imports them before ``pyspark.daemon`` forks
any worker, and each worker inherits them loaded. Without it, every forked
worker imported them again: pandas and pyarrow on PySpark's Arrow path
(about 0.25 s and 0.1 s of CPU per worker, measured with
``PYTHONPROFILEIMPORTTIME``) and the lab's task modules, whose
:mod:`lab.config` brings psutil, asyncio and argparse. A module that fails to
import here is left to the worker, which then fails with the real error as
it would have (:func:`import_ahead`). ``LAB_WORKER_PRELOAD=off`` leaves the
variable unset (:mod:`lab.host.start_tuning`).

No thread before the fork: ``pyspark.daemon`` forks its workers, and a fork
copies only the forking thread (PySpark imports its worker module after the
fork for that reason, naming pandas and pyarrow). Measured here: of the
imports, only pyarrow's bundled jemalloc starts a thread (``jemalloc_bg_thd``;
numpy's OpenBLAS starts none under the ``OMP_NUM_THREADS=1`` Spark gives its
workers). The daemon sets ``JE_ARROW_MALLOC_CONF=background_thread:false``
(unless set) before it imports: that jemalloc is not Arrow's default pool here
(mimalloc), and without its background thread it frees memory in the calls
that allocate. Should any other thread exist after the imports, the daemon
says so on stderr with the threads' names (:func:`other_threads`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import runpy
import sys
import threading
from pathlib import Path


def is_spark_zip(entry: str) -> bool:
    """``pyspark.zip`` or a ``py4j-*-src.zip`` of Spark's ``python/lib`` (pure)."""
    name = os.path.basename(entry)
    return name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith("-src.zip"))


def without_spark_zips(path: list[str]) -> list[str]:
    """``path`` without :func:`is_spark_zip` entries, in order (pure)."""
    return [p for p in path if not is_spark_zip(p)]


#: The variable naming the modules to import before the first fork (see the module docstring).
WORKER_IMPORTS_ENV = "LAB_WORKER_IMPORTS"


def import_ahead(names: str) -> list[str]:
    """Import each module of the comma-separated ``names``; those that failed, each with its error.

    Never raises: a worker that needs a module that failed here imports it
    itself, and reports the error in its task.
    """
    failed = []
    for name in filter(None, (n.strip() for n in names.split(","))):
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - see the docstring
            failed.append(f"{name}: {e!r}"[:200])
    return failed


def other_threads() -> list[str]:
    """The names of this process's threads other than the calling one (``/proc``; empty where it cannot tell)."""
    try:
        tasks = [t for t in os.listdir("/proc/self/task") if int(t) != threading.get_native_id()]
        return [Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in tasks]
    except OSError:
        return []


def main() -> None:
    """Drop the zips from ``sys.path`` and the importer cache, import ``LAB_WORKER_IMPORTS``, run ``pyspark.daemon``.

    ``pyspark.daemon`` runs as ``__main__``; it writes its port to stdout, so this
    module writes nothing there (a failed import ahead goes to stderr, the executor's log).
    """
    full = list(sys.path)
    sys.path[:] = without_spark_zips(full)
    if importlib.util.find_spec("pyspark") is None:
        sys.path[:] = full  # no installed package: Spark's zips are the only PySpark
    else:
        for entry in [p for p in sys.path_importer_cache if is_spark_zip(p)]:
            del sys.path_importer_cache[entry]
    names = os.environ.get(WORKER_IMPORTS_ENV, "")
    if names:
        os.environ.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")  # no thread before the fork
        # The port goes to stdout: whatever a module prints while it is imported goes to stderr instead.
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
        try:
            failed = import_ahead(names)
            sys.stdout.flush()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        for line in failed:
            print(f"lab.spark.daemon: not imported ahead: {line}", file=sys.stderr)
        threads = other_threads()
        if threads:
            print(f"lab.spark.daemon: threads before the fork: {threads}", file=sys.stderr)
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
