"""JupyterLab in headless Chromium: run a notebook, press "Crash driver", see it happen."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from lab import processes
from tests.conftest import ROOT
from tests.integration.conftest import assert_all_gone, run_pids

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture
def jupyterlab(tmp_path, runs_dir):
    """JupyterLab on 127.0.0.1 with a token, serving a copy of 00_start_here with a shorter scenario."""
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    nb = json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text())
    for cell in nb["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            src = "".join(cell["source"])
            src = re.sub(r"^EVENTS: int = \d+", "EVENTS: int = 9000", src, flags=re.M)
            cell["source"] = src
    (nb_dir / "00_start_here.ipynb").write_text(json.dumps(nb))
    news = tmp_path / "jset" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    token = secrets.token_hex(16)
    port = processes.free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "jcfg"), JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "jset"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "jws"), JUPYTER_RUNTIME_DIR=str(tmp_path / "jrt"))
    server = processes.spawn(
        [sys.executable, "-m", "jupyterlab", "--ip=127.0.0.1", f"--port={port}", "--no-browser",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={nb_dir}",
         "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.extension_manager=readonly", *(["--allow-root"] if os.geteuid() == 0 else [])],
        log_path=tmp_path / "jupyter.log", env=env,
    )
    processes.wait_for_port("127.0.0.1", port, 60, server, "JupyterLab")
    yield f"http://127.0.0.1:{port}", token, server
    processes.stop_process(server, grace_s=15)


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


def test_crash_driver_from_the_panel(jupyterlab, runs_dir):
    from playwright.sync_api import sync_playwright

    url, token, server = jupyterlab
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        try:
            page.goto(f"{url}/lab/tree/00_start_here.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook", timeout=60_000)
            page.get_by_text(re.compile(r"Python 3 \(ipykernel\) \| Idle")).wait_for(timeout=60_000)
            prompts = page.locator(".jp-InputArea-prompt")
            for _ in range(5):  # "Run All" is ignored while the kernel connection is still settling
                page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
                page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).click()
                try:
                    page.wait_for_function(
                        "() => [...document.querySelectorAll('.jp-InputArea-prompt')].some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))",
                        timeout=10_000)
                    break
                except Exception:
                    continue
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
            assert not page.locator(".jupyter-widgets-output-area .jp-OutputArea-output[data-mime-type*='stderr']").count()
            panel = page.locator(".jp-OutputArea-output").filter(has=page.locator(".lab-counters")).first
            panel.scroll_into_view_if_needed()
            panel.screenshot(path=str(ARTIFACTS / "panel-after-crash.png"))
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "failure.png"), full_page=True)
            raise
        finally:
            browser.close()  # the tab goes away; the kernel and its run go on until the run ends
    run_dir = next(d for d in runs_dir.iterdir() if d.is_dir())
    faults = [json.loads(l) for l in (run_dir / "events.jsonl").read_text().splitlines() if '"fault"' in l]
    assert [f["by"] for f in faults if f["type"] == "fault"] == ["ui"]
    # The tab is closed but the kernel lives on: the run must still end by itself and leave nothing.
    wait_until(lambda: '"run-end"' in (run_dir / "events.jsonl").read_text(), 120, "the run to end after the tab closed")
    assert server.poll() is None
    assert_all_gone(run_pids(run_dir), within_s=30)
    pids = run_pids(run_dir)
    processes.stop_process(server, grace_s=15)  # server shutdown ends the kernel
    assert_all_gone(pids, within_s=30)
