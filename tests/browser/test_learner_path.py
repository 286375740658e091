"""A learner's first minutes, in headless Chromium at 1280x800, exactly as the README says.

``make lab``, the link it prints, notebook 00 (a prediction, Start, Crash driver, the verdict), notebook 02 (a
prediction clicked, then Shift-Enter from the keyboard, the verdict counting it), notebook 04 (the measured grid
closed until each of its rows has a click, then the verdicts counting the clicks), then Ctrl-C's SIGTERM. Each
step checks what the learner would see: the lab and not a login page, no pop-up over a verdict, timeline
labels apart and the plot at the cell's width, the locked choice marked, rows on one line, a console free of
errors and version warnings, and ``git status`` as it was. Screenshots of both verdicts go to
``test-artifacts/browser/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from lab.audit.restarts import driver_restarts
from lab.events import read_events
from lab.host import processes, workspace as ws
from lab.matrix.grid import load_grid
from lab.matrix.questions import answers_for, grid_questions
from lab.outcomes import GUARANTEES
from tests.conftest import ROOT

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
LINK = re.compile(r"^    (http://127\.0\.0\.1:\d+/lab\?token=[0-9a-f]+)$", re.M)
#: The learner's own parameters (edited in the copies, as a learner may): short runs, the rest as shipped.
PARAMS = {"00_start_here": {"EVENTS": 9000}, "02_direct_kafka": {"EVENTS": 1500},
          "04_semantics_matrix": {"RESULTS": "docs/reference/matrix.csv"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_parameters(path: Path, params: dict) -> None:
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            src = "".join(cell["source"])
            for key, value in params.items():
                src, n = re.subn(rf"^{key}: (\w+) = .*$",
                                 lambda m, key=key, value=value: f"{key}: {m.group(1)} = {value!r}", src, flags=re.M)
                assert n == 1, f"no parameter {key} in {path.name}"
            cell["source"] = src
    path.write_text(json.dumps(nb, indent=1))


def git_state() -> tuple[str, dict]:
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    return status, ws.originals_of(ROOT / "notebooks")


@pytest.fixture
def make_lab(tmp_path, runs_dir):
    """``make lab`` with a workspace of its own inside the project's ignored ``workspace/``; yields its link.

    Fresh Jupyter user settings (``JUPYTERLAB_SETTINGS_DIR``): what keeps the news pop-up away must be what the lab
    ships, not a setting of whoever runs the tests.
    """
    if not (ROOT / ".git").exists():
        pytest.skip("the walk checks git status: needs the lab's git checkout")
    before = git_state()
    workspace = ROOT / "workspace" / f"browser-test-{secrets.token_hex(4)}"
    ws.sync(ROOT / "notebooks", workspace)
    for name, params in PARAMS.items():
        set_parameters(workspace / f"{name}.ipynb", params)
    env = dict(os.environ, LAB_WORKSPACE=str(workspace), LAB_JUPYTER_PORT=str(free_port()),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jcfg"), JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "jset"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "jws"), JUPYTER_RUNTIME_DIR=str(tmp_path / "jrt"))
    env.pop("LAB_JUPYTER_TOKEN", None)
    env.pop("MAKEFLAGS", None)
    log = tmp_path / "make-lab.log"
    make = processes.spawn(["make", "--no-print-directory", "-C", str(ROOT), "lab"], log_path=log, env=env)
    try:
        deadline = time.monotonic() + 120
        while not LINK.search(log.read_text()):
            assert make.poll() is None, f"make lab exited ({make.returncode}):\n{log.read_text()}"
            assert time.monotonic() < deadline, f"make lab printed no link in 120 s:\n{log.read_text()}"
            time.sleep(0.2)
        printed = log.read_text()
        links = LINK.findall(printed)
        assert len(links) == 1, f"make lab printed {len(links)} links:\n{printed}"
        assert "token=..." not in printed, printed
        yield links[0], make, workspace
    finally:
        # Ctrl-C's way out: SIGTERM to make's group; JupyterLab stops its kernels, the kernels their runs.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(make.pid, signal.SIGTERM)
        make.wait(timeout=60)
        left = [p for p in psutil.process_iter(["cmdline", "cwd"])
                if str(workspace) in " ".join(p.info["cmdline"] or []) + (p.info["cwd"] or "")
                or str(runs_dir) in " ".join(p.info["cmdline"] or [])]
        deadline = time.monotonic() + 30
        while left and time.monotonic() < deadline:
            left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
            time.sleep(0.2)
        shutil.rmtree(workspace, ignore_errors=True)
        assert not left, f"still running after make lab stopped: {[(p.pid, p.info['cmdline']) for p in left]}"
        assert git_state() == before, "the session changed the lab's files (git status or notebooks/)"


@contextlib.contextmanager
def chromium_page(failure_png: str, console: list):
    """Headless Chromium at 1280x800 recording the console; a screenshot to ``failure_png`` when the block fails."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("console", lambda m: console.append((m.type, m.text)))
        try:
            yield page
        except Exception:
            page.screenshot(path=str(ARTIFACTS / failure_png))
            raise
        finally:
            browser.close()


def wait_until(fn, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if fn():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def counter(page, name: str) -> int:
    text = page.locator(f".lab-counter[data-name='{name}']").first.inner_text().strip()
    return int(text) if text.isdigit() else 0


def open_from_browser(page, name: str) -> None:
    """Double-click the notebook in JupyterLab's file browser, as a learner does; wait for its kernel."""
    page.locator(".jp-DirListing-item", has_text=f"{name}.ipynb").first.dblclick()
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=60_000)
    page.get_by_text(re.compile(r"Python 3 \(ipykernel\) \| Idle")).wait_for(timeout=60_000)


def run_menu(page, item: str) -> None:
    """Run an entry of JupyterLab's Run menu, again while the kernel connection is still settling (it ignores it)."""
    for _ in range(5):
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()
        try:
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-InputArea-prompt')].some(p => "
                "/\\[(\\*|\\d+)\\]/.test(p.textContent))",
                timeout=10_000)
            return
        except Exception:
            continue


def box(locator, scroll: bool = True) -> dict:
    """The element's box in the viewport; boxes compared with each other are taken at one scroll position."""
    if scroll:
        locator.scroll_into_view_if_needed()
    return locator.bounding_box()


def intersects(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and \
        a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]


def assert_nothing_covers(page, target) -> None:
    """No pop-up, toast or dialog overlaps ``target``, and the element at its centre is its own."""
    t = box(target)
    overlays = page.locator(".jp-toast-container .Toastify__toast, .jp-Notification-Toast, .jp-Dialog").all()
    covering = [o for o in overlays if o.is_visible() and intersects(box(o, False), t)]
    assert not covering, f"{len(covering)} overlay(s) over the verdict: {[o.inner_text()[:80] for o in covering]}"
    mine = page.evaluate("([x, y, el]) => el.contains(document.elementFromPoint(x, y))",
                         [t["x"] + t["width"] / 2, t["y"] + t["height"] / 2, target.element_handle()])
    assert mine, "something else is drawn over the verdict"


def assert_labels_apart(page, plot) -> None:
    """The timeline's fault and restart labels do not overlap one another, and the plot takes the cell's width."""
    plot.scroll_into_view_if_needed()
    labels = [box(a, False) for a in plot.locator(".annotation-text").all() if (a.text_content() or "").strip()]
    assert labels, "the timeline has no labels"
    clashes = [(i, j) for i, a in enumerate(labels) for j, b in enumerate(labels[i + 1:], i + 1) if intersects(a, b)]
    assert not clashes, f"timeline labels overlap: {clashes} of {labels}"
    lines = [b for b in (box(x, False) for x in plot.locator(".shapelayer path").all()) if b and b["width"] <= 4]
    assert lines, "the timeline draws no fault or restart line"
    struck = [(a, b) for a in labels for b in lines if intersects(a, b)]
    assert not struck, f"a vertical line runs through a label: {struck}"
    area = plot.locator("xpath=ancestor::div[contains(@class, 'jp-OutputArea-output')]").first
    assert box(plot, False)["width"] >= 0.9 * box(area, False)["width"], "the timeline does not take the cell's width"


def assert_one_line(row) -> None:
    """A prediction row: its label and its buttons each on one line (at 1280 px, file browser open)."""
    row.scroll_into_view_if_needed()
    heights = [b["height"] for b in (box(x, False) for x in row.locator("button.lab-choice-button").all())]
    tops = {round(box(x, False)["y"]) for x in row.locator("button.lab-choice-button").all()}
    assert len(tops) == 1, f"the prediction buttons wrap onto {len(tops)} lines"
    assert max(heights) < 40, f"a prediction button wraps its text ({max(heights):.0f} px tall)"
    label = row.locator(".lab-choice-label")
    if label.is_visible():
        assert box(label, False)["height"] < 24, "the row's label wraps"


def assert_locked_choice_stands_out(row, chosen: str) -> None:
    buttons = row.locator("button.lab-choice-button")
    assert (buttons.count() == len(GUARANTEES)
            and row.locator("button.lab-choice-button:disabled").count() == len(GUARANTEES))
    pick = row.locator("button.lab-choice-chosen")
    assert pick.count() == 1 and pick.inner_text().strip() == f"✓ {chosen}"
    style = pick.evaluate("b => [getComputedStyle(b).backgroundColor, getComputedStyle(b).opacity]")
    other = row.locator("button.lab-choice-button:not(.lab-choice-chosen)").first.evaluate(
        "b => [getComputedStyle(b).backgroundColor, getComputedStyle(b).opacity]")
    assert style[0] != other[0] and float(style[1]) == 1.0 and float(other[1]) < 0.6, (style, other)


def test_a_learners_first_minutes(make_lab, runs_dir):
    link, make, workspace = make_lab
    console: list = []
    with chromium_page("learner-failure.png", console) as page:
        # 1. The link as printed opens the lab, not the login page.
        page.goto(link)
        page.locator(".jp-DirListing-item", has_text="00_start_here.ipynb").wait_for(timeout=60_000)
        assert not page.locator("input[name='password'], #password_input").count()

        # 2. Notebook 00: predict, Start, Crash driver, the verdict.
        open_from_browser(page, "00_start_here")
        run_menu(page, "Run All Cells")
        start = page.locator(".jupyter-widgets button", has_text="Start")
        start.wait_for(timeout=90_000)
        prediction = page.locator(".lab-choice").first
        prediction.locator("button", has_text="at-least-once").click()
        assert_one_line(prediction)
        start.click()
        wait_until(lambda: counter(page, "acknowledged") > 500, 60, "events to flow")
        assert_locked_choice_stands_out(prediction, "at-least-once")
        page.locator(".jupyter-widgets button", has_text="Crash driver").click()
        back = page.get_by_text(re.compile(r"^driver #2 back \d+\.\d s after the crash$"))
        back.wait_for(timeout=60_000)
        shown = back.inner_text()
        verdict = page.locator(".lab-verdict", has_text=re.compile("You predicted at-least-once")).first
        verdict.wait_for(timeout=150_000)
        plot = page.locator(".jp-OutputArea-output .js-plotly-plot").first
        page.locator(".js-plotly-plot .annotation-text", has_text="back in").first.wait_for(timeout=30_000)
        assert_labels_apart(page, plot)
        assert_nothing_covers(page, verdict)
        page.screenshot(path=str(ARTIFACTS / "verdict-00.png"))
        run00 = next(d for d in runs_dir.iterdir() if d.is_dir())
        (restart,) = driver_restarts(read_events(run00))
        assert f"driver #2 back {restart.back_s:.1f} s after the crash" in shown
        panel00 = json.loads((run00 / "prediction.json").read_text())  # the panel's prediction, recorded at Start
        assert (panel00["scenario"], panel00["source"], panel00["predicted"]) == (
            "the driver killed mid-stream", "buttons", "at-least-once")
        assert panel00["right"] == (panel00["measured"] == "at-least-once")

        # 3. Notebook 02: Shift-Enter down to the buttons, a click, Shift-Enter: the scenario cell runs.
        open_from_browser(page, "02_direct_kafka")
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").first.click()
        page.keyboard.press("Escape")
        row = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .lab-choice").filter(
            has_text="offsets in checkpoint, append sink").first
        for _ in range(12):  # the learner's Shift-Enter, cell after cell, until the buttons are there
            page.keyboard.press("Shift+Enter")
            with contextlib.suppress(Exception):
                row.wait_for(timeout=3_000)
                break
        # Enter on a focused button chooses it (never clears); a click on another changes the choice.
        row.locator("button", has_text="exactly-once").focus(timeout=90_000)
        page.keyboard.press("Enter")
        assert row.locator("button.lab-choice-chosen").inner_text().strip() == "✓ exactly-once"
        row.locator("button", has_text="at-least-once").click()
        assert row.locator("button.lab-choice-chosen").inner_text().strip() == "✓ at-least-once"
        assert_one_line(row)
        page.keyboard.press("Shift+Enter")  # the click selected the next cell: this runs the scenario
        verdict02 = page.get_by_text("Your predictions: 1 of 1 predictions right")
        verdict02.wait_for(timeout=240_000)
        assert_locked_choice_stands_out(row, "at-least-once")
        table = page.locator(".jp-OutputArea-output", has_text="Your predictions: 1 of 1").last
        assert_nothing_covers(page, table)
        page.screenshot(path=str(ARTIFACTS / "verdict-02.png"))
        (run02,) = [d for d in runs_dir.iterdir() if d != run00 and (d / "prediction.json").exists()]
        recorded = json.loads((run02 / "prediction.json").read_text())
        assert (recorded["source"], recorded["predicted"], recorded["right"]) == ("buttons", "at-least-once", True)
        page.keyboard.press("Control+s")  # the learner saves: into the copy
        saved = workspace / "02_direct_kafka.ipynb"
        wait_until(lambda: "1 of 1 predictions right" in saved.read_text(), 30, "the notebook to be saved")

        # 4. Notebook 04: the grid stays closed until every row is predicted; then the verdicts count the clicks.
        open_from_browser(page, "04_semantics_matrix")
        run_menu(page, "Run All Cells")
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        rows = panel.locator(".lab-choice")
        questions = grid_questions(load_grid(None))
        wait_until(lambda: rows.count() == len(questions), 90, "a row of buttons per row of the grid")
        page.get_by_text(re.compile(rf"^{len(questions)} of {len(questions)} rows have no prediction "
                                    r"yet")).first.wait_for(timeout=60_000)
        assert not panel.locator(".js-plotly-plot").count(), "the measured grid was drawn before any prediction"
        for i, q in enumerate(questions):
            rows.nth(i).locator("button.lab-choice-button",
                                has_text=re.compile(rf"^\s*{re.escape(q.choices[0])}\s*$")).click()
        assert_one_line(rows.nth(0))
        panel.get_by_text("every row predicted").wait_for(timeout=10_000)
        panel.locator(".jp-Cell", has_text="Your grid against the measured one").first.click()
        run_menu(page, "Run Selected Cell and All Below")
        answers = answers_for(questions, ROOT / "docs" / "reference" / "matrix.csv")
        right = sum(q.choices[0] == answers[q.name].measured for q in questions)
        score = panel.get_by_text(f"Your grid: {right} of {len(questions)} predictions right")
        score.wait_for(timeout=60_000)
        panel.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        score.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "grid-04.png"))
        (recorded,) = runs_dir.glob("04-grid-*/predictions.json")
        verdicts = json.loads(recorded.read_text())
        assert [(v["scenario"], v["predicted"], v["source"]) for v in verdicts] == [
            (q.name, q.choices[0], "buttons") for q in questions]

    # 5. The console: no errors, no version warnings (a JupyterLab older than an extension expects).
    errors = [t for kind, t in console if kind == "error"]
    versions = [t for kind, t in console if kind == "warning" and re.search(r"[Vv]ersion", t)]
    assert not errors and not versions, (errors, versions)
    # 6. `git status` and notebooks/ as they were: checked by the fixture once make lab has stopped.
