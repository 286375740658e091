"""``make test-stack``: docker-compose.yml brought up with podman-compose, crash scenarios audited inside it.

Steps: the images (:mod:`tests.stack.images`), the lab's image rebuilt once more from a copy of its build
context with one line appended to a file of ``lab/`` (logged: ``image rebuild after a one-line change in
lab/: N s``, and the steps podman's layer cache gave), ``podman-compose up -d`` of the compose file as users
have it, every health check waited for, then in the JupyterLab container ``lab run`` with executor and
driver crashes on the stack's Spark cluster and a Flink crash, ``lab run`` on the host against the
stack's published Kafka and PostgreSQL, JupyterLab's published port with its token, notebook 05 by
papermill; then ``podman-compose down -v`` and a check that no container, network, volume or process
is left. Every outcome is checked as the host's tests check it (``tests/integration/test_cluster.py``,
``flink_checks``, notebook 05's ``check_05``). Exit status 0 only when every step held; each failed
check is one line on stderr.

Podman runs here with runc, cgroupfs and explicit ulimits (a containers.conf of its own, through
``CONTAINERS_CONF``): podman's defaults (crun, systemd, raised ulimits) are refused on these machines.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.integration.executor_checks import check_executor_crash  # noqa: E402
from tests.integration.flink_checks import check_aligned_checkpoints_and_a_transactional_sink_are_exactly_once  # noqa: E402
from tests.notebooks.test_notebooks import SMALL, check_05  # noqa: E402

PROJECT = os.environ.get("LAB_STACK_PROJECT", "labstack")
COMPOSE = ROOT / "docker-compose.yml"
LABEL = f"io.podman.compose.project={PROJECT}"
HEALTH_TIMEOUT_S = 600
JUPYTER = f"{PROJECT}_jupyter_1"
#: The published ports, as docker-compose.yml publishes them on the host's 127.0.0.1.
HOST_KAFKA, HOST_SINK_URL, HOST_JUPYTER = "127.0.0.1:9092", "postgresql://lab:lab@127.0.0.1:5432/lab", "127.0.0.1:8888"

CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
init_path = "/usr/bin/catatonit"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""

COMMON = ["--events", "2000", "--rate", "500", "--max-batch", "300", "--deadline", "240", "--json"]


def _executor_crash_in_a_worker(r: dict, events: list[dict]) -> None:
    check_executor_crash(r, events)
    # The executor was in a worker container: its task named that host, so the supervisor ordered the kill.
    target = [e for e in events if e["type"] == "executor-target"][-1]
    assert target["host"].startswith("spark-worker-"), f"the executor was on {target['host']}, not in a worker"


def _exactly_once_after_a_restart(r: dict, events: list[dict]) -> None:
    assert (r["exactly_once"], r["restarts"]) == (2000, 1), (r["exactly_once"], r["restarts"])


def _duplicates_after_a_restart(r: dict, events: list[dict]) -> None:
    assert r["restarts"] == 1 and r["duplicated"] > 0, (r["restarts"], r["duplicated"])


def _flink_exactly_once_after_a_restart(r: dict, events: list[dict]) -> None:
    assert r["restarts"] == 1, r["restarts"]
    check_aligned_checkpoints_and_a_transactional_sink_are_exactly_once(r)


def _exactly_once_in_postgresql(r: dict, events: list[dict]) -> None:
    _exactly_once_after_a_restart(r, events)
    assert r["settings"]["sink_backend"] == "postgresql", r["settings"]["sink_backend"]


# The scenarios in the JupyterLab container: (name, lab run arguments, a check of the report and the timeline that
# raises AssertionError). Beyond every run's check (drained, 2000 acknowledged, none lost or unseen): what
# tests/integration/test_cluster.py asserts of the same scenario on `lab cluster` (executor_checks for the executor
# crashes, whose append sink's duplicates it predicts exactly), and flink_checks for the Flink run.
SCENARIOS: list[tuple[str, list[str], Callable[[dict, list[dict]], None]]] = [
    ("executor crash, direct, transactional sink",
     ["--pipeline", "direct", "--offsets", "sink", "--sink", "transactional", "--faults", "executor-crash@batch=2"],
     _executor_crash_in_a_worker),
    ("executor crash, direct, append sink",
     ["--pipeline", "direct", "--offsets", "checkpoint", "--sink", "append", "--faults", "executor-crash@batch=1"],
     _executor_crash_in_a_worker),
    ("driver crash, structured, idempotent sink",
     ["--pipeline", "structured", "--sink", "idempotent", "--faults",
      "driver-crash@batch=2:after-output-before-commit"],
     _exactly_once_after_a_restart),
    ("driver crash, receiver with its WAL, mid-output",
     ["--pipeline", "receiver", "--wal", "on", "--ack", "stored", "--faults", "driver-crash@batch=2:mid-output"],
     _duplicates_after_a_restart),
    # 200 events/s: a 10 s stream. At COMMON's 500/s (4 s) a loaded machine's first checkpoint came after the
    # last event, in 4 of 4 stack runs: batch 2 then had no open transaction for the crash to abort.
    ("driver crash, flink, aligned checkpoints, mid-output",
     ["--pipeline", "flink", "--faults", "driver-crash@batch=2:mid-output", "--rate", "200"],
     _flink_exactly_once_after_a_restart),
]
#: On the host, through the published ports: Kafka's HOST listener and PostgreSQL (docs/docker.md).
HOST_SCENARIO = ("driver crash, plain, on the host against the stack's Kafka and PostgreSQL",
                 ["--pipeline", "plain", "--sink", "idempotent", "--faults", "driver-crash@at=3s"],
                 _exactly_once_in_postgresql)

NB05 = "05_exactly_once_production"

failures: list[str] = []


def say(line: str) -> None:
    print(f"[stack {time.strftime('%H:%M:%S')}] {line}", flush=True)


def fail(line: str) -> None:
    failures.append(line)
    print(f"FAILED: {line}", file=sys.stderr, flush=True)


def podman(*args: str, check: bool = True, capture: bool = True, timeout: float | None = None):
    return subprocess.run(["podman", *args], check=check, capture_output=capture, text=True, timeout=timeout)


# podman's complaints, once per container, that it cannot give its health checks systemd timers (wait_healthy
# runs them instead), and that there is no syslog; podman-compose's look for each volume before it makes it.
NOISE = ("unable to get systemd connection", "failed to connect to syslog", "inspecting object: no such volume")

def compose(*args: str, env: dict | None = None) -> None:
    done = subprocess.run(["podman-compose", "-p", PROJECT, "-f", str(COMPOSE), *args], cwd=ROOT,
                          env={**os.environ, **(env or {})},
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in done.stderr.splitlines():
        if not any(n in line for n in NOISE):
            print(line, file=sys.stderr)
    if done.returncode:
        raise SystemExit(f"podman-compose {' '.join(args)} exited {done.returncode}")


def containers() -> list[str]:
    out = podman("ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}").stdout
    return sorted(out.split())


def leftovers() -> list[str]:
    """What of the project is still there: containers, networks, volumes, its processes."""
    left = [f"container {c}" for c in containers()]
    left += [f"network {n}" for n in podman("network", "ls", "--format", "{{.Name}}").stdout.split()
             if n.startswith(PROJECT)]
    left += [f"volume {v}" for v in podman("volume", "ls", "--format", "{{.Name}}").stdout.split()
             if v.startswith(PROJECT)]
    ps = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout.splitlines()
    left += [f"process {line.strip()[:120]}" for line in ps if "conmon" in line and PROJECT in line]
    if not podman("ps", "-aq").stdout.split():  # podman's DNS server outlives no network of containers
        left += [f"process {line.strip()[:120]}" for line in ps if "aardvark-dns" in line]
    return left


def wait_healthy() -> bool:
    """Run every container's health check until all pass (podman 4.3 runs them from systemd timers,
    which these machines do not have, so the check is run here, as a timer would)."""
    names = containers()
    healthy: dict[str, float] = {}
    t0 = time.monotonic()
    last = 0.0
    while time.monotonic() - t0 < HEALTH_TIMEOUT_S:
        for name in names:
            if name in healthy:
                continue
            # `up -d` has started every container when it returns (podman-compose 1.0.3 does not wait for health):
            # one that is not running now failed to start (still `created`) or has exited.
            state = podman("inspect", "--format", "{{.State.Status}}", name).stdout.strip()
            if state != "running":
                logs = podman("logs", "--tail", "20", name, check=False)
                fail(f"{name} is {state} before it was healthy; its log's end:\n{logs.stdout}{logs.stderr}")
                return False
            if podman("healthcheck", "run", name, check=False, timeout=60).returncode == 0:
                healthy[name] = time.monotonic() - t0
                say(f"  {name} healthy after {healthy[name]:.0f} s")
        if len(healthy) == len(names):
            return True
        if time.monotonic() - last > 30:
            last = time.monotonic()
            say(f"  waiting for {sorted(set(names) - set(healthy))}")
        time.sleep(3)
    fail(f"not healthy within {HEALTH_TIMEOUT_S} s: {sorted(set(names) - set(healthy))}")
    return False


def judge(name: str, done: subprocess.CompletedProcess, read_events: Callable[[str], list[dict]],
          check: Callable[[dict, list[dict]], None], t0: float) -> None:
    """A ``lab run --json``'s report, checked; raises AssertionError naming what did not hold."""
    assert done.returncode == 0, f"lab run exited {done.returncode}: {done.stderr.strip()[-800:]}"
    r = json.loads(done.stdout[done.stdout.index("{"):])
    counts = {k: r[k] for k in ("acked", "exactly_once", "duplicated", "lost", "unseen", "restarts", "drained")}
    say(f"  {json.dumps(counts)} in {time.monotonic() - t0:.0f} s; fired: {json.dumps(r['faults_fired'][:1])}")
    assert r["drained"] and (r["acked"], r["lost"], r["unseen"]) == (2000, 0, 0), "not drained, or events lost"
    check(r, read_events(r["run_dir"]))


def events_in_container(run_dir: str) -> list[dict]:
    text = podman("exec", JUPYTER, "cat", f"{run_dir}/events.jsonl").stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def run_in_stack(name: str, args: list[str], check) -> None:
    say(f"lab run: {name}")
    t0 = time.monotonic()
    judge(name, podman("exec", JUPYTER, "lab", "run", *COMMON, *args, check=False, timeout=600), events_in_container,
          check, t0)


def run_on_host(name: str, args: list[str], check, runs: Path) -> None:
    """``lab run`` on this machine against the stack's published Kafka (HOST listener) and PostgreSQL."""
    from lab.events import read_events

    say(f"lab run: {name}")
    env = {**os.environ, "LAB_KAFKA_BOOTSTRAP": HOST_KAFKA, "LAB_SINK_URL": HOST_SINK_URL, "LAB_RUNS_DIR": str(runs)}
    for var in ("LAB_KAFKA_PROXY", "LAB_SPARK_MASTER"):
        env.pop(var, None)
    t0 = time.monotonic()
    done = subprocess.run([str(Path(sys.executable).parent / "lab"), "run", *args, *COMMON], env=env,
                          capture_output=True, text=True, timeout=600)
    judge(name, done, lambda run_dir: read_events(Path(run_dir)), check, t0)


def check_jupyter(token: str) -> None:
    """JupyterLab on the published port: its API answers with the token and refuses without it."""
    say(f"JupyterLab at http://{HOST_JUPYTER}: the token set by LAB_JUPYTER_TOKEN")

    def status(headers: dict) -> int:
        try:
            return urllib.request.urlopen(urllib.request.Request(f"http://{HOST_JUPYTER}/api/status", headers=headers),
                                          timeout=10).status
        except urllib.error.HTTPError as e:
            return e.code

    with_token, without = status({"Authorization": f"token {token}"}), status({})
    say(f"  /api/status: {with_token} with the token, {without} without")
    assert (with_token, without) == (200, 403), f"{with_token} with the token, {without} without (expected 200, 403)"


def run_notebook(copy_to: Path) -> None:
    """Notebook 05 by papermill in the JupyterLab container, its runs checked as the host's notebook test checks
    them."""
    say(f"papermill {NB05} (inside {JUPYTER})")
    runs = f"/opt/lab/runs/{NB05}"
    args = ["exec", "-e", f"LAB_RUNS_DIR={runs}", "-w", "/opt/lab/notebooks", JUPYTER, "papermill", "--no-progress-bar",
            f"{NB05}.ipynb", f"/opt/lab/runs/{NB05}.out.ipynb"]
    for k, v in SMALL[NB05].items():
        args += ["-y", f"{k}: {json.dumps(v)}"]
    t0 = time.monotonic()
    done = podman(*args, check=False, timeout=1800)
    assert done.returncode == 0, f"papermill exited {done.returncode}: {done.stderr.strip()[-1500:]}"
    # The run directories as the host sees them: copied out, the sink named by its published port.
    podman("cp", f"{JUPYTER}:{runs}", str(copy_to))
    reports = []
    for path in sorted((copy_to / NB05).glob("*/report.json")):
        report = json.loads(path.read_text())
        report["run_dir"] = str(path.parent)
        sink = json.loads((path.parent / "sink.json").read_text())
        if sink["backend"] == "postgresql":
            (path.parent / "sink.json").write_text(json.dumps({**sink, "url": HOST_SINK_URL}))
        reports.append(report)
    say(f"  ran in {time.monotonic() - t0:.0f} s; {len(reports)} runs")
    for r in reports:
        say(f"  {r['faults']!s:32} idempotence={r['settings']['idempotence']!s:5} "
            f"isolation={r['settings']['isolation']:16} acked={r['acked']} once={r['exactly_once']} "
            f"dup={r['duplicated']} lost={r['lost']} source_dup={r['source_duplicates']} unexpected={r['unexpected']}")
    fencing = json.loads(next((copy_to / NB05).glob("fencing-*/result.json")).read_text())
    say(f"  fencing on {fencing['broker']}: zombie {fencing['zombie_error']}, read committed "
        f"{fencing['zombie_read_committed']} of {fencing['records']}")
    # The stack's Kafka is Apache Kafka 4.4.0, as the embedded broker: the notebook test's checks hold.
    check_05(reports)


def step(name: str, fn: Callable, *args, **kw) -> None:
    """One step of the checks; whatever it raises is a failed check, and the next step still runs."""
    try:
        fn(*args, **kw)
    except AssertionError as e:
        fail(f"{name}: {str(e).strip()[:800]}")
    except Exception as e:  # a timeout, a report that is not JSON, a file the step expected
        fail(f"{name}: {type(e).__name__}: {str(e).strip()[:800]}")


def build_images() -> None:
    """tests/stack/images.py (with its rebuild probe) in a process group of its own: on a SIGTERM here its
    mmdebstrap or podman build is sent SIGTERM and waited for (a SIGKILL would leave mmdebstrap's mounts and root
    file system behind)."""
    p = subprocess.Popen([sys.executable, str(ROOT / "tests/stack/images.py"), "--rebuild-probe"],
                         start_new_session=True)
    try:
        if p.wait():
            raise SystemExit(f"tests/stack/images.py exited {p.returncode}")
    except BaseException:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(120)
        raise


def tear_down() -> None:
    """``down -v``, the network podman-compose 1.0.3 leaves, then the check that nothing is left; each step runs."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the teardown short
    say(f"podman-compose -p {PROJECT} down -v")
    step("podman-compose down -v", compose, "down", "-v")
    # podman-compose 1.0.3 creates the project's network on `up` but leaves it on `down`.
    podman("network", "rm", f"{PROJECT}_default", check=False)
    left = leftovers()
    if left:
        fail("left behind: " + ", ".join(left))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="leave the stack up at the end (for a look inside)")
    ap.add_argument("--skip-images", action="store_true", help="use the images as they are")
    ap.add_argument("--up-only", action="store_true", help="bring the stack up healthy and run nothing in it")
    args = ap.parse_args()
    # A SIGTERM (a CI timeout, a kill) takes the stack down as an error does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"{PROJECT}: terminated"))
    work = Path(tempfile.mkdtemp(prefix="lab-stack-"))
    (work / "containers.conf").write_text(CONTAINERS_CONF)
    os.environ["CONTAINERS_CONF"] = str(work / "containers.conf")
    # Characters a shell would act on: the compose command must hand the token to Jupyter as it is.
    token = f"{secrets.token_hex(12)} $HOME \"'`x"
    t0 = time.monotonic()
    try:
        if not args.skip_images:
            build_images()
        if containers():
            say(f"an earlier {PROJECT} stack is still there: down first")
            compose("down", "-v")
        t0 = time.monotonic()
        say(f"podman-compose -p {PROJECT} up -d")
        compose("up", "-d", env={"LAB_JUPYTER_TOKEN": token})
        if wait_healthy() and not args.up_only:
            say(f"stack healthy in {time.monotonic() - t0:.0f} s")
            for scenario in SCENARIOS:
                step(scenario[0], run_in_stack, *scenario)
            step(HOST_SCENARIO[0], run_on_host, *HOST_SCENARIO, runs=work / "runs")
            step("JupyterLab's token", check_jupyter, token)
            step(f"notebook {NB05}", run_notebook, work)
    finally:
        if not args.keep:
            tear_down()
        shutil.rmtree(work, ignore_errors=True)
    say(f"passed in {time.monotonic() - t0:.0f} s" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
