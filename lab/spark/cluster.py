"""A real Spark standalone cluster on 127.0.0.1, from the pyspark wheel's own classes.

``lab cluster start`` runs one master and two workers as JVMs
(``org.apache.spark.deploy.master.Master`` and ``...worker.Worker`` with the
wheel's ``jars/`` on the classpath), each in its own process group, and records
them in ``runs/cluster.json``. Runs then use ``LAB_SPARK_MASTER`` (or
``--master``) ``spark://127.0.0.1:<port>``; executors are children of the
workers, so ``executor-crash`` kills one of them for real. ``lab cluster stop``
ends the JVMs by their recorded PIDs (each worker's group takes its executors).

Every service binds to 127.0.0.1 (``SPARK_LOCAL_IP``, ``--host``) and to port 0
(``--port 0 --webui-port 0``, web UIs included): each JVM gets its ports from the
OS at bind time, and the lab reads them from the JVM's log line ("Starting
Spark master at spark://127.0.0.1:P", "Bound MasterWebUI ... started at
http://...:P") once the OS lists that very PID as listening on them. No port is
chosen here and bound later by a JVM, which would fail whenever another process
took it in between.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from lab.errors import LabError
from lab.host import processes
from lab.host.java import find_java

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


def spark_home() -> Path:
    """The installed pyspark's Spark home (its jars, conf and bin)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def scala_version(home: Path) -> str:
    """The Scala binary version of the wheel's Spark, read from its scala-library jar (e.g. 2.13)."""
    jar = next(iter(sorted((home / "jars").glob("scala-library-*.jar"))), None)
    if jar is None:
        raise LabError(f"no scala-library jar under {home / 'jars'}: is pyspark installed completely?")
    return ".".join(jar.stem.removeprefix("scala-library-").split(".")[:2])


def _jvm(main_class: str, args: list, log: Path, work_dir: Path) -> subprocess.Popen:  # noqa: F821
    java = find_java()
    home = spark_home()
    # A pip-installed Spark home has no RELEASE file and no build directories, so the worker's
    # launcher cannot infer the Scala version it needs to start executors unless told.
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", JAVA_HOME=java.home,
               SPARK_WORKER_DIR=str(work_dir), SPARK_SCALA_VERSION=scala_version(home))
    cmd = [java.executable, "-Xmx512m", "-cp", f"{home / 'conf'}{os.pathsep}{home / 'jars'}/*",
           # no fixed-port REST submission server (6066): every other port here is bound as port 0
           "-Dspark.ui.killEnabled=false", "-Dspark.master.rest.enabled=false", main_class, *map(str, args)]
    return processes.spawn(cmd, log_path=log, env=env, cwd=work_dir, die_with_parent=False)


#: Log lines in which a JVM names a port it has bound; group 1 is the port.
MASTER_PORTS = {
    "rpc": re.compile(r"Starting Spark master at spark://127\.0\.0\.1:(\d+)"),
    "web": re.compile(r"Bound MasterWebUI to .*, and started at https?://[^/\s]+:(\d+)"),
}
WORKER_PORTS = {
    "rpc": re.compile(r"Starting Spark worker 127\.0\.0\.1:(\d+) "),
    "web": re.compile(r"Bound WorkerWebUI to .*, and started at https?://[^/\s]+:(\d+)"),
}


def _log_size(log: Path) -> int:
    return log.stat().st_size if log.exists() else 0


def wait_for_bound_ports(proc, log: Path, offset: int, patterns: dict, timeout_s: float, what: str) -> dict:
    """The ports a JVM logged as bound, once the OS lists ``proc.pid`` as listening on each.

    Parameters
    ----------
    proc : Popen
        The JVM; its exit ends the wait at once.
    log : Path
        Its log; only what was written after byte ``offset`` counts (logs are
        appended across starts, and an old port must never be taken for the new one).
    patterns : dict of str to re.Pattern
        Name to a log line whose group 1 is a port.
    timeout_s : float
    what : str
        Names the JVM in errors.

    Returns
    -------
    dict of str to int
        The same names, each with its port.

    Raises
    ------
    LabError
        When the JVM exits first or does not listen on every port within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    found: dict = {}
    while True:
        if proc.poll() is not None:
            raise LabError(f"{what} exited with status {proc.returncode} before listening; see {log}")
        text = processes.read_log(log, offset)
        found = {name: int(m.group(1)) for name, rx in patterns.items() if (m := rx.search(text))}
        # The log line alone could be read before the socket is listed (or name the wrong
        # process); the OS's table for this PID is what says the port is really ours.
        if len(found) == len(patterns) and set(found.values()) <= set(processes.listening_ports(proc.pid)):
            return found
        if time.monotonic() >= deadline:
            missing = sorted(set(patterns) - set(found)) or sorted(found)
            raise LabError(f"{what} did not report listening on its {', '.join(missing)} port within {timeout_s:g} s; "
                           f"see {log}")
        time.sleep(0.1)


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
    master_log = log_dir / "master.log"
    offset = _log_size(master_log)
    master = _jvm("org.apache.spark.deploy.master.Master",
                  ["--host", "127.0.0.1", "--port", 0, "--webui-port", 0], master_log, log_dir)
    started = [master]
    try:
        ports = wait_for_bound_ports(master, master_log, offset, MASTER_PORTS, 60, "Spark master")
        url = f"spark://127.0.0.1:{ports['rpc']}"
        web_ports = [ports["web"]]
        for i in range(workers):
            wdir = log_dir / f"worker-{i}"
            wdir.mkdir(exist_ok=True)
            wlog = log_dir / f"worker-{i}.log"
            woffset = _log_size(wlog)
            w = _jvm("org.apache.spark.deploy.worker.Worker",
                     [url, "--host", "127.0.0.1", "--port", 0, "--webui-port", 0, "--cores", cores,
                      "--memory", memory, "--work-dir", wdir], wlog, wdir)
            started.append(w)
            web_ports.append(wait_for_bound_ports(w, wlog, woffset, WORKER_PORTS, 60, f"Spark worker {i}")["web"])
        _wait_registered(master_log, offset, workers, master)
    except BaseException:
        for p in reversed(started):
            processes.stop_process(p, 5)
        raise
    info = ClusterInfo(master_url=url, master_pid=master.pid, worker_pids=[p.pid for p in started[1:]],
                       web_ports=web_ports, log_dir=str(log_dir))
    (Path(runs_dir) / STATE_FILE).write_text(json.dumps(asdict(info), indent=2))
    return info


def _wait_registered(master_log: Path, offset: int, workers: int, master, timeout_s: float = 60.0) -> None:
    """Wait until the master logged (after byte ``offset``) that ``workers`` workers registered."""
    deadline = time.monotonic() + timeout_s
    while True:
        if master.poll() is not None:
            raise LabError(f"Spark master exited; see {master_log}")
        registered = processes.read_log(master_log, offset).count("Registering worker")
        if registered >= workers:
            return
        if time.monotonic() >= deadline:
            raise LabError(f"only {registered} of {workers} workers registered within {timeout_s:g} s; see "
                           f"{master_log}")
        time.sleep(0.2)


def _is_ours(pid: int) -> bool:
    # A PID alone could have been reused by an unrelated process since it was recorded.
    if not processes.pid_alive(pid):
        return False
    try:
        return any("org.apache.spark.deploy." in part for part in psutil.Process(pid).cmdline())
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # a process we may not inspect is trusted by its PID


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


def check_master(url: str, timeout_s: float = 5.0) -> None:
    """Raise :class:`LabError` unless every ``host:port`` of a ``spark://`` master accepts a TCP connection.

    Without this check a driver given an unreachable master retries for minutes, silently.
    """
    import socket

    for hostport in url[len("spark://"):].split(","):
        host, _, port = hostport.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
        except OSError as e:
            raise LabError(f"cannot reach Spark master {url!r} ({e.strerror or e}); start one with "
                           "`lab cluster start`, or use --master local[2]") from None
