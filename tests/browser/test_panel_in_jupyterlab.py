"""JupyterLab in headless Chromium: run a notebook, press "Crash driver", see it happen."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import sys
import time
from pathlib import Path

import pytest

from lab.host import processes
from lab.events import read_events
from lab.audit.restarts import driver_restarts
from lab.outcomes import GUARANTEES
from tests.conftest import ROOT
from tests.integration.conftest import assert_all_gone, run_pids

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def serve(tmp_path, name: str, params: dict):
    """JupyterLab on 127.0.0.1 with a token, serving a copy of notebook ``name`` with ``params`` in its parameters cell.

    Yields ``(url, token, server)``; the server is stopped afterwards.
    """
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    for cell in nb["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            src = "".join(cell["source"])
            for key, value in params.items():
                src, n = re.subn(rf"^{key}: (\w+) = .*$", lambda m: f"{key}: {m.group(1)} = {value!r}", src, flags=re.M)
                assert n == 1, f"no parameter {key} in {name}"
            cell["source"] = src
    (nb_dir / f"{name}.ipynb").write_text(json.dumps(nb))
    news = tmp_path / "jset" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    token = secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "jcfg"), JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "jset"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "jws"), JUPYTER_RUNTIME_DIR=str(tmp_path / "jrt"))
    server, port = start_jupyterlab(nb_dir, token, env, tmp_path / "jupyter.log")
    yield f"http://127.0.0.1:{port}", token, server
    processes.stop_process(server, grace_s=15)


@pytest.fixture
def jupyterlab(tmp_path, runs_dir):
    """00_start_here with a shorter scenario."""
    yield from serve(tmp_path, "00_start_here", {"EVENTS": 9000})


@pytest.fixture
def jupyterlab_01(tmp_path, runs_dir):
    """01_receiver_wal with one combination of section 1 and no worker failure."""
    yield from serve(tmp_path, "01_receiver_wal", {"EVENTS": 2500, "COMBOS": ["reliable, WAL"], "WORKER_FAILURE": False})


def start_jupyterlab(nb_dir: Path, token: str, env: dict, log: Path, timeout_s: float = 60, attempts: int = 3):
    """Start JupyterLab on 127.0.0.1 port 0 and return ``(process, port)`` once that process listens on the port.

    The port comes from the server's runtime file
    (``$JUPYTER_RUNTIME_DIR/jpserver-<pid>.json``, field ``port``), and counts
    only once the OS lists the server's own PID as listening on it: the file is
    written before the HTTP server binds. Even with ``--port=0``, jupyter_server
    2.21 binds port 0 to learn a number, closes that socket and listens on the
    number later (``_find_http_port``, then an io-loop callback), so another
    process can take it in between; the server then logs "The port N is already
    in use" and exits. Only that failure starts a new server, up to ``attempts`` times.
    """
    runtime = Path(env["JUPYTER_RUNTIME_DIR"])
    for _ in range(attempts):
        offset = log.stat().st_size if log.exists() else 0
        server = processes.spawn(
            [sys.executable, "-m", "jupyterlab", "--ip=127.0.0.1", "--port=0", "--ServerApp.port_retries=0",
             "--no-browser", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={nb_dir}",
             "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             "--LabApp.extension_manager=readonly", *(["--allow-root"] if os.geteuid() == 0 else [])],
            log_path=log, env=env,
        )
        info, port = runtime / f"jpserver-{server.pid}.json", None
        deadline = time.monotonic() + timeout_s
        try:
            while server.poll() is None and time.monotonic() < deadline:
                if port is None and info.exists():
                    try:
                        port = int(json.loads(info.read_text())["port"])
                    except (ValueError, KeyError, OSError):
                        pass  # written in place (truncate, then write): read again
                if port and port in processes.listening_ports(server.pid):
                    return server, port
                time.sleep(0.1)
        except BaseException:
            processes.stop_process(server, grace_s=15)
            raise
        processes.stop_process(server, grace_s=15)
        with open(log, "rb") as f:
            f.seek(offset)
            lost_port = "is already in use" in f.read().decode(errors="replace")
        if not lost_port:
            pytest.fail(f"JupyterLab did not listen on 127.0.0.1 within {timeout_s:g} s "
                        f"(exit status {server.returncode}); see {log}")
    pytest.fail(f"JupyterLab lost its port to another process {attempts} times in a row; see {log}")


def counter(page, name: str) -> int:
    text = page.locator(f".lab-counter[data-name='{name}']").first.inner_text().strip()
    return int(text) if text.isdigit() else 0


def wait_until(fn, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if fn():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def open_notebook(page, url: str, token: str, name: str) -> None:
    page.goto(f"{url}/lab/tree/{name}.ipynb?token={token}")
    page.wait_for_selector(".jp-Notebook", timeout=60_000)
    page.get_by_text(re.compile(r"Python 3 \(ipykernel\) \| Idle")).wait_for(timeout=60_000)


def run_menu(page, item: str) -> None:
    """Run an entry of JupyterLab's Run menu, again while the kernel connection is still settling (it ignores it)."""
    for _ in range(5):
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()
        try:
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-InputArea-prompt')].some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))",
                timeout=10_000)
            return
        except Exception:
            continue


@contextlib.contextmanager
def chromium_page(failure_png: str):
    """A page of headless Chromium; a full-page screenshot to ``failure_png`` when the block fails; closed after."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        try:
            yield page
        except Exception:
            page.screenshot(path=str(ARTIFACTS / failure_png), full_page=True)
            raise
        finally:
            browser.close()  # the tab goes away; the kernel and its runs go on until they end


def test_crash_driver_from_the_panel(jupyterlab, runs_dir):
    url, token, server = jupyterlab
    with chromium_page("failure.png") as page:
        open_notebook(page, url, token, "00_start_here")
        run_menu(page, "Run All Cells")
        start = page.locator(".jupyter-widgets button", has_text="Start")
        start.wait_for(timeout=90_000)
        page.locator(".jupyter-widgets button", has_text="at-least-once").click()  # the prediction
        start.click()
        wait_until(lambda: counter(page, "acknowledged") > 500, 60, "events to flow")
        before = counter(page, "in sink (rows)")
        page.locator(".jupyter-widgets button", has_text="Crash driver").click()
        page.get_by_text(re.compile(r"driver-crash · by ui")).wait_for(timeout=30_000)
        page.locator(".js-plotly-plot .annotation-text", has_text="driver-crash").first.wait_for(timeout=30_000)
        wait_until(lambda: counter(page, "in sink (rows)") > before + 200, 60, "the restarted driver to write")
        # how long the restart took: in the progress line, and written at the restart on the timeline
        back = page.get_by_text(re.compile(r"^driver #2 back \d+\.\d s after the crash$"))
        back.wait_for(timeout=30_000)
        shown = back.inner_text()
        page.locator(".js-plotly-plot .annotation-text", has_text="back in").first.wait_for(timeout=30_000)
        assert not page.locator(".jupyter-widgets-output-area .jp-OutputArea-output[data-mime-type*='stderr']").count()
        panel = page.locator(".jp-OutputArea-output").filter(has=page.locator(".lab-counters")).first
        panel.scroll_into_view_if_needed()
        panel.screenshot(path=str(ARTIFACTS / "panel-after-crash.png"))
    run_dir = next(d for d in runs_dir.iterdir() if d.is_dir())
    assert [e["by"] for e in read_events(run_dir) if e["type"] == "fault"] == ["ui"]
    (restart,) = driver_restarts(read_events(run_dir))
    assert f"driver #2 back {restart.back_s:.1f} s after the crash" in shown
    # The tab is closed but the kernel lives on: the run must still end by itself and leave nothing.
    wait_until(lambda: '"run-end"' in (run_dir / "events.jsonl").read_text(), 120, "the run to end after the tab closed")
    assert server.poll() is None
    assert_all_gone(run_pids(run_dir), within_s=30)
    pids = run_pids(run_dir)
    processes.stop_process(server, grace_s=15)  # server shutdown ends the kernel
    assert_all_gone(pids, within_s=30)


def test_predict_then_see_the_verdict(jupyterlab_01, runs_dir):
    """Notebook 01: run up to the scenario cell, click a prediction, run the rest, read the verdict."""
    url, token, server = jupyterlab_01
    with chromium_page("failure-prediction.png") as page:
        open_notebook(page, url, token, "01_receiver_wal")
        scenario = page.locator(".jp-CodeCell").filter(has_text="frozen = guess.freeze()").first
        scenario.locator(".jp-InputPrompt").click()  # select the cell that freezes the predictions and runs
        run_menu(page, "Run All Above Selected Cell")
        row = page.locator(".jupyter-widgets.widget-hbox").filter(has_text="reliable, WAL").first
        row.locator("button", has_text="at-least-once").click(timeout=90_000)  # the prediction
        scenario.locator(".jp-InputPrompt").click()
        run_menu(page, "Run Selected Cell and All Below")
        verdict = page.get_by_text("Your predictions: 1 of 1 predictions right")
        verdict.wait_for(timeout=150_000)
        # the row's buttons were locked when the runs started, with the choice still pressed
        assert row.locator("button:disabled").count() == len(GUARANTEES)
        assert "mod-active" in row.locator("button", has_text="at-least-once").get_attribute("class")
        verdict.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "prediction-verdict.png"))
    (run_dir,) = [d for d in runs_dir.iterdir() if d.is_dir() and (d / "prediction.json").exists()]
    recorded = json.loads((run_dir / "prediction.json").read_text())
    assert (recorded["source"], recorded["predicted"], recorded["right"]) == ("buttons", "at-least-once", True)
    pids = run_pids(run_dir)
    processes.stop_process(server, grace_s=15)  # server shutdown ends the kernel
    assert_all_gone(pids, within_s=30)
