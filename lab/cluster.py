"""A real Spark standalone cluster on 127.0.0.1, from the pyspark wheel's own classes.

``lab cluster start`` runs one master and two workers as JVMs
(``org.apache.spark.deploy.master.Master`` and ``...worker.Worker`` with the
wheel's ``jars/`` on the classpath), each in its own process group, and records
them in ``runs/cluster.json``. Runs then use ``LAB_SPARK_MASTER`` (or
``--master``) ``spark://127.0.0.1:<port>``; executors are children of the
workers, so ``executor-crash`` kills one of them for real. ``lab cluster stop``
ends the JVMs by their recorded PIDs (each worker's group takes its executors).

Every service binds to 127.0.0.1 (``SPARK_LOCAL_IP``, ``--host``) and every
port, web UIs included, is a free loopback port chosen here.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab import processes
from lab.errors import LabError
from lab.java import find_java

STATE_FILE = "cluster.json"


@dataclass(frozen=True)
class ClusterInfo:
    """A running standalone cluster: its master URL and the JVMs the lab started."""

    master_url: str
    master_pid: int
    worker_pids: list = field(default_factory=list)
    web_ports: list = field(default_factory=list)
    log_dir: str = ""

    @property
    def pids(self) -> list[int]:
        return [self.master_pid, *self.worker_pids]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _scala_version(home: Path) -> str:
    """The Scala binary version of the wheel's Spark, read from its scala-library jar (e.g. 2.13)."""
    jar = next(iter(sorted((home / "jars").glob("scala-library-*.jar"))), None)
    if jar is None:
        raise LabError(f"no scala-library jar under {home / 'jars'}: is pyspark installed completely?")
    return ".".join(jar.stem.removeprefix("scala-library-").split(".")[:2])


def _jvm(main_class: str, args: list, log: Path, work_dir: Path) -> "subprocess.Popen":  # noqa: F821
    java = find_java()
    home = _spark_home()
    # A pip-installed Spark home has no RELEASE file and no build directories, so the worker's
    # launcher cannot infer the Scala version it needs to start executors unless told.
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", JAVA_HOME=java.home,
               SPARK_WORKER_DIR=str(work_dir), SPARK_SCALA_VERSION=_scala_version(home))
    cmd = [java.executable, "-Xmx512m", "-cp", f"{home / 'conf'}{os.pathsep}{home / 'jars'}/*",
           # no fixed-port REST submission server (6066): every port here is chosen free
           "-Dspark.ui.killEnabled=false", "-Dspark.master.rest.enabled=false", main_class, *map(str, args)]
    return processes.spawn(cmd, log_path=log, env=env, cwd=work_dir, die_with_parent=False)


def start(runs_dir: str | Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> ClusterInfo:
    """Start a master and ``workers`` workers; return at once if one is already running.

    Raises
    ------
    LabError
        When Java is missing, or a JVM exits before listening (its log is named).
    """
    running = load_running(runs_dir)
    if running:
        return running
    log_dir = Path(runs_dir).resolve() / "cluster"
    log_dir.mkdir(parents=True, exist_ok=True)
    port, web = processes.free_port(), processes.free_port()
    master = _jvm("org.apache.spark.deploy.master.Master",
                  ["--host", "127.0.0.1", "--port", port, "--webui-port", web], log_dir / "master.log", log_dir)
    started = [master]
    try:
        processes.wait_for_port("127.0.0.1", port, 60, master, f"Spark master (log: {log_dir / 'master.log'})")
        url = f"spark://127.0.0.1:{port}"
        web_ports = [web]
        for i in range(workers):
            wdir = log_dir / f"worker-{i}"
            wdir.mkdir(exist_ok=True)
            wport, wweb = processes.free_port(), processes.free_port()
            w = _jvm("org.apache.spark.deploy.worker.Worker",
                     [url, "--host", "127.0.0.1", "--port", wport, "--webui-port", wweb, "--cores", cores,
                      "--memory", memory, "--work-dir", wdir], log_dir / f"worker-{i}.log", wdir)
            started.append(w)
            processes.wait_for_port("127.0.0.1", wport, 60, w, f"Spark worker {i} (log: {log_dir / f'worker-{i}.log'})")
            web_ports.append(wweb)
        _wait_registered(log_dir / "master.log", workers, master)
    except BaseException:
        for p in reversed(started):
            processes.stop_process(p, 5)
        raise
    info = ClusterInfo(master_url=url, master_pid=master.pid, worker_pids=[p.pid for p in started[1:]],
                       web_ports=web_ports, log_dir=str(log_dir))
    (Path(runs_dir) / STATE_FILE).write_text(json.dumps(asdict(info), indent=2))
    return info


def _wait_registered(master_log: Path, workers: int, master, timeout_s: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if master.poll() is not None:
            raise LabError(f"Spark master exited; see {master_log}")
        text = master_log.read_text(errors="replace") if master_log.exists() else ""
        if text.count("Registering worker") >= workers:
            return
        time.sleep(0.2)
    raise LabError(f"only {text.count('Registering worker')} of {workers} workers registered within {timeout_s:g} s; see {master_log}")


def _is_ours(pid: int) -> bool:
    if not processes.pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"org.apache.spark.deploy." in f.read()
    except OSError:
        return True


def load_running(runs_dir: str | Path) -> ClusterInfo | None:
    """The cluster ``lab cluster start`` left running, if its JVMs are still ours."""
    try:
        info = ClusterInfo(**json.loads((Path(runs_dir) / STATE_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return info if all(_is_ours(p) for p in info.pids) else None


def stop(runs_dir: str | Path) -> bool:
    """Stop the recorded cluster (workers, their executors, the master). False when none ran."""
    path = Path(runs_dir) / STATE_FILE
    try:
        info = ClusterInfo(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return False
    path.unlink(missing_ok=True)
    stopped = False
    for pid in reversed(info.pids):
        if _is_ours(pid):
            processes.kill_group(pid, signal.SIGTERM, 10)
            stopped = True
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    return stopped


def executor_pids(runs_dir: str | Path) -> list[int]:
    """PIDs of executor JVMs running under the recorded cluster's workers."""
    import psutil

    info = load_running(runs_dir)
    if info is None:
        return []
    found = []
    for pid in info.worker_pids:
        try:
            for child in psutil.Process(pid).children(recursive=True):
                if any("CoarseGrainedExecutorBackend" in part for part in child.cmdline()):
                    found.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found
