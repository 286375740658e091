"""The driver's Spark UI on request, for real: on 127.0.0.1, served by the driver, announced once per attempt.

One structured run with the UI on and a driver crash, so two drivers live at
once (the second as a standby). Each ``spark-ui`` event is checked from the
outside while its driver runs: the check runs in the run's monitor thread
(``Run(on_event=...)``), which stops the driver only after it, so the driver
cannot end under it.
"""

from __future__ import annotations

import time
import urllib.request
from urllib.parse import urlsplit

import psutil
import pytest

from lab import events as ev
from lab.config import make_config
from lab.events import read_events
from lab.host.processes import LOOPBACK
from lab.run.supervisor import Run
from lab.spark.session import UI_TABS
from tests.integration.conftest import assert_all_gone, run_pids

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

#: Small: two batches of 500, a crash in the second after its output, its replay.
RUN = dict(pipeline="structured", events=1000, rate=500, spark_ui=True, deadline_s=120,
           faults="driver-crash@batch=1:after-output-before-commit")
#: How long the structured query's tab may take to appear after the session is up (the query starts later).
TAB_WAIT_S = 20.0


def get(url: str) -> tuple[int, str]:
    # No proxy from the environment: the request must stay on 127.0.0.1.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        return response.status, response.read().decode(errors="replace")


def probe(event: dict) -> dict:
    """The announced UI seen from outside: HTTP status, whether the streaming tab shows, who listens where."""
    port = urlsplit(event["url"]).port
    driver = psutil.Process(event["pid"])
    tree = {driver.pid} | {p.pid for p in driver.children(recursive=True)}
    listening = [(c.laddr.ip, c.pid) for c in psutil.net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
    tab = UI_TABS["structured"]
    deadline = time.monotonic() + TAB_WAIT_S
    status, page = get(event["url"])
    while tab not in page and time.monotonic() < deadline:
        time.sleep(0.5)
        status, page = get(event["url"])
    return {"status": status, "tab_shown": tab in page, "listening": listening, "tree": tree, "port": port}


def test_the_ui_of_each_driver_is_on_loopback_served_by_it_and_announced_at_its_turn(runs_dir):
    probes: dict[int, dict] = {}
    errors: list[str] = []

    def on_event(e: dict) -> None:
        if e["type"] == ev.SPARK_UI:
            try:
                probes[e["attempt"]] = probe(e)
            except Exception as x:  # noqa: BLE001 - the monitor swallows it; the test reports it
                errors.append(f"attempt {e['attempt']}: {x!r}")

    began = time.monotonic()
    with Run(make_config(**RUN), on_event=on_event) as run:
        result = run.wait()
    took = time.monotonic() - began
    assert result.drained and result.restarts == 1, f"run {result.run_dir} did not drain after one restart"
    assert not errors, errors

    timeline = read_events(result.run_dir)
    said = [e for e in timeline if e["type"] == ev.SPARK_UI]
    assert [e["attempt"] for e in said] == [1, 2], f"one spark-ui per driver attempt: {said}"
    for e in said:
        ready = [i for i, r in enumerate(timeline) if r["type"] == ev.DRIVER_READY and r["attempt"] == e["attempt"]]
        assert len(ready) == 1 and ready[0] < timeline.index(e), (
            f"attempt {e['attempt']}'s UI was announced before it had its turn")
        assert e["pid"] == timeline[ready[0]]["pid"], "the event names another process than the ready driver"
        assert urlsplit(e["url"]).hostname == "127.0.0.1", e["url"]
        assert e["tab"] == UI_TABS["structured"]

        seen = probes[e["attempt"]]
        assert seen["status"] == 200 and seen["tab_shown"], f"attempt {e['attempt']}: {seen}"
        assert seen["listening"], f"attempt {e['attempt']}: nothing listens on port {seen['port']}"
        for ip, pid in seen["listening"]:
            # The JVM binds 127.0.0.1 through an IPv6 socket, listed in its v4-mapped form (lab.host.processes).
            assert ip in LOOPBACK, f"attempt {e['attempt']}: the UI's port {seen['port']} is bound on {ip}"
            assert pid in seen["tree"], (
                f"attempt {e['attempt']}: port {seen['port']} belongs to PID {pid}, not to driver {e['pid']} "
                f"or its JVM ({sorted(seen['tree'])})")
    # The standby's UI came up while the first driver still held its own.
    assert probes[1]["port"] != probes[2]["port"]
    assert_all_gone(run_pids(result.run_dir))
    print(f"spark-ui run: {took:.1f} s, ports {probes[1]['port']} and {probes[2]['port']}")
