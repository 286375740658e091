"""Integration fixtures: a real PostgreSQL server, independent counts, leak checks (the shared broker:
tests/conftest.py)."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import random
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from lab.events import read_events
from lab.host import processes
from tests.conftest import SHARED_BROKER_PIDS

pytestmark = pytest.mark.integration


def pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory):
    """A real PostgreSQL server on 127.0.0.1, started for the test session and stopped after it."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.fail("PostgreSQL server binaries not found; .ci/run installs Debian's postgresql package")
    data = tmp_path_factory.mktemp("pg") / "data"
    sock = data.parent
    prefix = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        user = pwd.getpwnam("postgres")
        os.chown(data.parent, user.pw_uid, user.pw_gid)
        os.chmod(data.parent, 0o755)
        # postgres must reach its directory through every parent pytest made private: their number
        # depends on the runner (pytest-xdist adds one per worker, popen-gwN).
        top = Path(tempfile.gettempdir()).resolve()
        base = tmp_path_factory.getbasetemp().resolve()  # and, with --basetemp elsewhere, its two levels
        for p in {*[q for q in data.parent.resolve().parents if top in q.parents], base, base.parent}:
            os.chmod(p, os.stat(p).st_mode | 0o005)
        prefix = ["runuser", "-u", "postgres", "--"]
    subprocess.run(prefix + [initdb, "-D", str(data), "-U", "lab", "--auth=trust", "-E", "UTF8"],
                   check=True, capture_output=True)
    port = _start_postgres(prefix, pg_ctl, data, sock)
    pid = int((data / "postmaster.pid").read_text().split()[0])
    try:
        yield f"postgresql://lab@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(prefix + [pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"], capture_output=True)
        _stop_by_pid(pid)


def _stop_by_pid(pid: int, grace_s: float = 15.0) -> None:
    """Stop the postmaster ``pid`` if ``pg_ctl stop`` left it running: SIGINT (PostgreSQL's fast shutdown), then
    SIGKILL after ``grace_s``.

    ``pg_ctl`` runs as ``postgres`` and must reach the data directory, and pytest takes the others' access to
    ``/tmp/pytest-of-<user>`` away again each time a session or an xdist worker makes its base directory: measured,
    ``pg_ctl: could not access directory ... Permission denied`` after a ``make test-all``, and both workers'
    servers left running. The signal needs no path.
    """
    import signal

    import psutil

    try:
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGINT)
        proc.wait(grace_s)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        proc.kill()


def _start_postgres(prefix: list, pg_ctl: str, data: Path, sock: Path, attempts: int = 10) -> int:
    """Start PostgreSQL on a TCP port of 127.0.0.1 and return that port.

    PostgreSQL cannot bind port 0 and report the port it got (its ``port``
    setting must be 1..65535, and the same number names its socket file), so
    the port has to be named up front. Instead of checking that a port is free
    and binding it later (the gap another process can fill), postgres's own
    bind is the check: a start that fails with "Address already in use" in its
    log is retried on another port. Candidates come from 20000-32767, below
    the ephemeral ranges (Linux 32768-60999, macOS 49152-65535) from which the
    OS hands out port-0 binds and client ports, so the lab's own processes
    rarely collide with them.
    """
    log = data.parent / "pg.log"
    rng = random.Random()
    for _ in range(attempts):
        port = rng.randrange(20000, 32768)
        offset = log.stat().st_size if log.exists() else 0
        p = subprocess.run(prefix + [pg_ctl, "-D", str(data), "-w", "-t", "30", "-l", str(log), "-o",
                                     f"-p {port} -h 127.0.0.1 -k {sock} -c fsync=off", "start"], capture_output=True)
        if p.returncode == 0:
            return port
        with open(log, "rb") as f:
            f.seek(offset)
            new_lines = f.read().decode(errors="replace")
        if "Address already in use" not in new_lines:
            pytest.fail(f"pg_ctl start failed with status {p.returncode}; see {log}")
    pytest.fail(f"PostgreSQL found {attempts} ports of 127.0.0.1 in use in a row; see {log}")


@contextlib.contextmanager
def module_runs_dir(tmp_path_factory, session_broker, name: str):
    """One runs directory for a test module, with the session's broker; no LAB_* setting leaks in from the shell."""
    from lab.broker import shared as shared_broker

    with pytest.MonkeyPatch.context() as mp:
        for var in ("LAB_KAFKA_BOOTSTRAP", "LAB_SINK_URL", "LAB_SPARK_MASTER", "LAB_JAVA_HOME", "LAB_DEADLINE",
                    "LAB_RESTART_DELAY", "LAB_KAFKA_READER", "LAB_STANDBY", "LAB_SPARK_UI"):
            mp.delenv(var, raising=False)
        path = tmp_path_factory.mktemp(f"{name}-runs")
        shared_broker.save_state(path, session_broker)
        mp.setenv("LAB_RUNS_DIR", str(path))
        yield path


@contextlib.contextmanager
def module_cluster(tmp_path_factory):
    """A three-broker cluster of a test module's own (``lab broker start --nodes 3``), its runs directory set.

    Stopped at the end, and every broker, proxy and the controller checked gone; no LAB_* setting of the
    shell decides a run.
    """
    from lab.broker import shared as shared_broker

    with pytest.MonkeyPatch.context() as mp:
        for var in ("LAB_KAFKA_BOOTSTRAP", "LAB_SINK_URL", "LAB_DEADLINE", "LAB_RESTART_DELAY", "LAB_BROKER_NODES"):
            mp.delenv(var, raising=False)
        path = tmp_path_factory.mktemp("cluster-runs")
        mp.setenv("LAB_RUNS_DIR", str(path))
        info = shared_broker.start_detached(path, nodes=3)
        try:
            yield path
        finally:
            shared_broker.stop_detached(path)
            assert_all_gone([info.controller_pid, *(p for n in info.nodes for p in
                                                    (n.broker_pid, n.proxy_pid, n.replication_proxy_pid))])


def independent_counts(run_dir: Path) -> dict:
    """Counts taken straight from the ledger and sink files with plain SQL, not through the auditor."""
    led = sqlite3.connect(run_dir / "ledger.sqlite")
    acked = {eid: (p, o) for eid, p, o in led.execute("SELECT event_id, partition, kafka_offset FROM sends WHERE "
                                                      "status='acked'")}
    sink = sqlite3.connect(run_dir / "sink.sqlite")
    copies = Counter(eid for (eid,) in sink.execute("SELECT event_id FROM sink_events"))
    progress = json.loads((run_dir / "progress.json").read_text())["positions"]
    lost = sum(1 for eid, (p, o) in acked.items() if copies[eid] == 0 and o < progress[str(p)])
    return {
        "acked": len(acked),
        "exactly_once": sum(1 for eid in acked if copies[eid] == 1),
        "duplicated": sum(1 for eid in acked if copies[eid] > 1),
        "extra_copies": sum(copies[eid] - 1 for eid in acked if copies[eid] > 1),
        "lost": lost,
        "unexpected": sum(n for eid, n in copies.items() if eid not in acked),
    }


def resumed_at(run_dir: Path) -> dict[int, int]:
    """Per partition, the offset where the restarted driver's first batch reading it started (its ``batch-start``)."""
    resume: dict[int, int] = {}
    for e in read_events(run_dir):
        if e["type"] == "batch-start" and e["attempt"] >= 2:
            for part, (start, _) in (e.get("ranges") or {}).items():
                resume.setdefault(int(part), start)
    return resume


def written_again(run_dir: Path) -> dict:
    """What a single driver crash must have written twice, from the run's own files, not through the auditor.

    ``written_before_kill``: sink rows written before the supervisor's ``driver-crash`` (its ``fault`` event's
    time) at offsets at or past where the restarted driver resumed (per partition, the start of the first range
    the next attempt's batches read). Those are the rows the restart reads and writes again; an append sink then
    holds exactly them twice; ``resume``: those positions.
    """
    crash = next(e for e in read_events(run_dir) if e["type"] == "fault" and e["kind"] == "driver-crash")
    resume = resumed_at(run_dir)
    sink = sqlite3.connect(run_dir / "sink.sqlite")
    try:
        before = {eid for eid, part, offset, at in sink.execute(
            "SELECT event_id, partition, kafka_offset, written_at FROM sink_events")
            if at < crash["t"] and offset >= resume.get(part, float("inf"))}
    finally:
        sink.close()
    return {"written_before_kill": len(before), "resume": resume}


def run_pids(run_dir: Path) -> list[int]:
    """Every PID a run started: broker, proxy (unless the session's), each driver attempt, its descendants' groups."""
    pids = []
    broker = json.loads((run_dir / "broker.json").read_text())
    pids += [p for p in (broker.get("broker_pid"), broker.get("proxy_pid")) if p and p not in SHARED_BROKER_PIDS]
    # read_events, not json.loads per line: the driver may be mid-write, and a torn last line
    # failed this helper once in CI (JSONDecodeError at the cut).
    for e in read_events(run_dir):
        if e["type"] in ("driver-start", "driver-ready", "driver-child-group", "broker-restart", "standby-start",
                         "zookeeper-start", "consumer-start"):
            pids.append(e["pid"])
    return pids


def child_groups(run_dir: Path, daemons_only: bool = False) -> list[dict]:
    """The ``driver-child-group`` events of a run: the process groups its drivers' descendants led.

    ``daemons_only``: only PySpark's worker daemons (``LAB_WORKER_DAEMON=lab``: ``-m lab.spark.daemon``). A run
    may record others: Hadoop's ``Shell`` starts ``setsid bash -c echo $$`` once to learn whether setsid works,
    and a scan that comes in its few milliseconds records that group too (seen in CI, 1 run of many).
    """
    groups = [e for e in read_events(run_dir) if e["type"] == "driver-child-group"]
    return [g for g in groups if "-m lab.spark.daemon" in g["cmd"]] if daemons_only else groups


def assert_all_gone(pids, within_s: float = 10.0):
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(processes.pid_alive(p) for p in pids):
        time.sleep(0.1)
    alive = [p for p in pids if processes.pid_alive(p)]
    assert not alive, f"processes still running: {alive}"
    for p in pids:  # nor anything in their process groups (JVMs, Python workers)
        assert not processes.group_alive(p), f"process group {p} still has members"


def batch_rows(run_dir: Path, batch: int) -> int:
    """Rows of ``batch`` as the driver logged them when it started that batch (first attempt)."""
    for e in read_events(run_dir):
        if e["type"] == "batch-start" and e["batch"] == batch:
            return e["rows"]
    raise AssertionError(f"batch {batch} never started")


def aborted_then_committed(bootstrap: str, topic: str = "tx") -> dict[str, list[str]]:
    """Write one aborted and one committed transaction of 10 records each; read the topic at both isolation levels.

    The records' ids are ``False-0..9`` (aborted) and ``True-0..9`` (committed). Returns the event ids the lab's
    Kafka source reads with ``read_uncommitted`` and with ``read_committed``, once both transaction markers are in
    the partition (end offset 22: 20 records and two markers). The coordinator answers the producer's commit or
    abort once its own log has the decision, and writes the marker into the partition after that: on a loaded
    machine one of the two markers was not there yet (end offset 21), hence the wait (up to 15 s).
    """
    from kafka import KafkaProducer

    from lab.kafka import tools as kafka_tools
    from lab.spark.kafka_source import read_range

    kafka_tools.create_topic(bootstrap, topic, 1)
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="lab-test-tx", acks="all", enable_idempotence=True)
    p.init_transactions()
    for commit in (False, True):
        p.begin_transaction()
        for i in range(10):
            p.send(topic, json.dumps({"id": f"{commit}-{i}", "seq": i, "key": "k"}).encode(), partition=0)
        p.flush()
        p.commit_transaction() if commit else p.abort_transaction()
    p.close()
    deadline = time.monotonic() + 15
    while (end := kafka_tools.end_offsets(bootstrap, topic, 1)[0]) < 22 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert end == 22, f"{end} records and markers in {topic}: expected 20 records and two transaction markers"
    read = {}
    for level in ("read_uncommitted", "read_committed"):
        batches = read_range(bootstrap, topic, 0, 0, end, timeout_s=10, isolation_level=level)
        read[level] = [i for b in batches for i in b.column("event_id").to_pylist()]
    return read
