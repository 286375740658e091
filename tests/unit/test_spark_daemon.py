"""The worker daemon's start: Spark's PySpark zips off the path, the installed package kept."""

import os
import subprocess
import sys

from lab.spark.daemon import import_ahead, is_spark_zip, without_spark_zips


def test_only_sparks_two_zips_are_taken_off_the_path_in_order():
    path = ["", "/s/python/lib/pyspark.zip", "/s/python/lib/py4j-0.10.9.9-src.zip", "/v/site-packages",
            "/x/py4j-notes.zip", "/x/my-pyspark.zip"]
    assert without_spark_zips(path) == ["", "/v/site-packages", "/x/py4j-notes.zip", "/x/my-pyspark.zip"]
    assert is_spark_zip("pyspark.zip") and not is_spark_zip("/s/python/lib/pyspark")


def test_the_daemon_runs_pyspark_from_the_package_even_with_the_zips_first(tmp_path):
    """A Python started as Spark starts the daemon, zips first on PYTHONPATH: PySpark comes from the package."""
    import pyspark

    lib = os.path.join(os.path.dirname(pyspark.__file__), "python", "lib")
    zips = [os.path.join(lib, f) for f in sorted(os.listdir(lib)) if f.endswith(".zip")]
    assert zips, f"pip's pyspark ships Spark's zips in {lib}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(zips + [os.environ.get("PYTHONPATH", "")]))

    def pyspark_file(start: str) -> str:
        probe = (f"import runpy; runpy.run_module = lambda *a, **k: None; {start}; import pyspark; "
                 "print(pyspark.__file__)")
        return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True,
                              cwd=tmp_path).stdout.strip()

    assert "pyspark.zip" in pyspark_file("pass")  # as Spark's own daemon starts
    assert pyspark_file("from lab.spark import daemon as spark_daemon; spark_daemon.main()") == pyspark.__file__


def test_the_daemon_imports_the_named_modules_before_it_forks_and_leaves_a_failure_to_the_worker(tmp_path):
    """With ``LAB_WORKER_IMPORTS`` the modules are loaded when ``pyspark.daemon`` starts; a bad name does not stop
    it."""
    probe = ("import runpy, sys; runpy.run_module = lambda *a, **k: print(sorted(m for m in ('lab.sinks.reader', "
             "'pandas') if m in sys.modules)); from lab.spark import daemon as spark_daemon; spark_daemon.main()")
    env = dict(os.environ, LAB_WORKER_IMPORTS="lab.sinks.reader, pandas,no_such_module_xyz")
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True,
                          cwd=tmp_path)
    assert done.stdout.strip() == "['lab.sinks.reader', 'pandas']"  # stdout carries only the daemon's own output
    assert "not imported ahead: no_such_module_xyz" in done.stderr
    env.pop("LAB_WORKER_IMPORTS")
    bare = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True,
                          cwd=tmp_path)
    assert bare.stdout.strip() == "[]" and not bare.stderr


def test_import_ahead_names_each_failure_and_skips_blanks():
    failed = import_ahead("json,, no_such_module_xyz ,")
    assert len(failed) == 1 and failed[0].startswith("no_such_module_xyz: ModuleNotFoundError")
    assert import_ahead("") == []


def test_the_imports_ahead_leave_the_daemon_with_one_thread_and_its_stdout_clean(tmp_path):
    """What the structured pipeline's daemon imports, under the OMP_NUM_THREADS=1 Spark gives it: no thread at the fork.

    A module that prints while imported must not reach stdout, where the daemon writes its port.
    """
    from lab.spark.session import SQL_WORKER_IMPORTS

    (tmp_path / "noisy_module_xyz.py").write_text("print('hello from an import')\n")
    probe = ("import runpy; from lab.spark import daemon as spark_daemon; "
             "runpy.run_module = lambda *a, **k: print(spark_daemon.other_threads()); spark_daemon.main()")
    env = dict(os.environ, OMP_NUM_THREADS="1", LAB_WORKER_IMPORTS=",".join(SQL_WORKER_IMPORTS + ("noisy_module_xyz",)),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    env.pop("JE_ARROW_MALLOC_CONF", None)
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True,
                          cwd=tmp_path)
    assert done.stdout == "[]\n", done.stdout  # no other thread, and nothing else on stdout
    assert "hello from an import" in done.stderr
    assert "not imported ahead" not in done.stderr and "threads before the fork" not in done.stderr
