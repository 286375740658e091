"""JupyterLab for learners (``make lab``, ``lab jupyter``): the lab's settings, the workspace, and one link that works.

Protocol of :func:`serve`:

1. the lab's JupyterLab settings are written into the environment JupyterLab runs from
   (:func:`install_settings`): no "Jupyter news?" pop-up, no update check;
2. ``workspace/`` is brought up to ``notebooks/`` (:mod:`lab.host.workspace`): the learner works on copies;
3. JupyterLab starts on 127.0.0.1 only, serving the workspace, with a token from ``LAB_JUPYTER_TOKEN`` or a new
   random one, handed over in the ``JUPYTER_TOKEN`` variable (not on a command line other users can read);
4. once its own PID listens on the port it reports, the link with the token is printed, once. Jupyter prints
   its own link with the token masked when it did not make the token itself (jupyter_server 2.21,
   ``ServerApp.display_url``): that link led to the login page, so Jupyter's start-up lines are turned down
   to warnings and the lab prints the link instead;
5. Ctrl-C and SIGTERM go to JupyterLab, which stops its kernels; :func:`serve` returns its exit status.

:func:`running` finds the lab's running servers again (``lab doctor`` prints their links).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.host import processes

#: The lab's JupyterLab settings, merged into ``<prefix>/share/jupyter/lab/settings/overrides.json``: JupyterLab's
#: defaults for every learner (a learner's own setting still wins). The news pop-up covered the end of
#: notebook 00's and 02's verdicts at 1440x900.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}
#: The server's side of the same: no request to PyPI for a newer JupyterLab.
SERVER_CONFIG = {"LabServerApp": {"check_for_updates_class": "jupyterlab.NeverCheckForUpdate"}}
DEFAULT_PORT = 8888


def overrides_path(prefix: str | Path = sys.prefix) -> Path:
    return Path(prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def server_config_path(prefix: str | Path = sys.prefix) -> Path:
    return Path(prefix) / "etc" / "jupyter" / "jupyter_server_config.d" / "lab_jupyter.json"


def install_settings(prefix: str | Path = sys.prefix) -> list[Path]:
    """Merge :data:`LAB_SETTINGS` into the environment's overrides and write :data:`SERVER_CONFIG`.

    Other keys of an existing ``overrides.json`` are kept. Returns the files written (none when already so).
    """
    written = []
    path = overrides_path(prefix)
    try:
        current = json.loads(path.read_text())
    except FileNotFoundError:
        current = {}
    except ValueError as exc:
        raise LabError(f"{path} is not JSON ({exc}); fix or remove it, then start again") from None
    merged = {**current, **{k: {**current.get(k, {}), **v} for k, v in LAB_SETTINGS.items()}}
    if merged != current:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(merged, indent=2) + "\n")
        written.append(path)
    path = server_config_path(prefix)
    if not path.is_file() or json.loads(path.read_text() or "{}") != SERVER_CONFIG:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(SERVER_CONFIG, indent=2) + "\n")
        written.append(path)
    return written


def link(port: int, token: str) -> str:
    """The one link a learner opens: JupyterLab with the token, on 127.0.0.1."""
    return f"http://127.0.0.1:{port}/lab?token={token}"


@dataclass(frozen=True)
class Server:
    """A running JupyterLab, from its runtime file."""

    pid: int
    port: int
    token: str
    root_dir: str

    @property
    def link(self) -> str:
        return link(self.port, self.token)


def _runtime_dir() -> Path:
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir())


def running(root_dir: str | Path | None = None, runtime_dir: Path | None = None) -> list[Server]:
    """The JupyterLab servers alive now (their runtime files ``jpserver-<pid>.json``), serving ``root_dir`` if given."""
    found = []
    for info in sorted((runtime_dir or _runtime_dir()).glob("jpserver-*.json")):
        try:
            d = json.loads(info.read_text())
            server = Server(int(d["pid"]), int(d["port"]), str(d.get("token", "")), str(d.get("root_dir", "")))
        except (OSError, ValueError, KeyError):
            continue  # being written, or another program's
        if not processes.pid_alive(server.pid):
            continue
        if root_dir is not None and Path(server.root_dir).resolve() != Path(root_dir).resolve():
            continue
        found.append(server)
    return found


def _die_with_parent() -> None:
    """SIGTERM (Jupyter then stops its kernels) when the launcher dies, even by SIGKILL (Linux)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def jupyter_args(root_dir: Path, port: int) -> list[str]:
    """JupyterLab's command line: 127.0.0.1 only, the workspace as its root, quiet until something goes wrong."""
    return [sys.executable, "-m", "jupyterlab", "--ip=127.0.0.1", f"--port={port}", "--no-browser",
            f"--ServerApp.root_dir={root_dir}", "--ServerApp.log_level=WARN", "--LabApp.log_level=WARN",
            "--LabApp.extension_manager=readonly", *(["--allow-root"] if os.geteuid() == 0 else [])]


def start(root_dir: Path, token: str, *, port: int = DEFAULT_PORT, env: dict | None = None,
          timeout_s: float = 90) -> tuple[subprocess.Popen, Server]:
    """Start JupyterLab in the foreground's process group (Ctrl-C reaches it) and return it once it listens.

    The port is the one its runtime file reports (Jupyter moves on from a taken ``port`` to the next free one),
    counted once the OS lists the server's own PID as listening on it, or (where sockets cannot be listed) once
    the server answers with this token (:func:`answers`): the file is written before the server binds.

    Raises
    ------
    LabError
        JupyterLab exited, or did not listen within ``timeout_s``.
    """
    env = dict(os.environ if env is None else env, JUPYTER_TOKEN=token)
    proc = subprocess.Popen(jupyter_args(root_dir, port), env=env, preexec_fn=_die_with_parent)
    runtime = Path(env["JUPYTER_RUNTIME_DIR"]) if env.get("JUPYTER_RUNTIME_DIR") else _runtime_dir()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LabError(f"JupyterLab exited with status {proc.returncode} before it listened; "
                               "its messages are above")
            server = next(iter(s for s in running(runtime_dir=runtime) if s.pid == proc.pid), None)
            if server and (server.port in processes.listening_ports(proc.pid) or answers(server.port, token)):
                return proc, server
            time.sleep(0.1)
        raise LabError(f"JupyterLab did not listen on 127.0.0.1 within {timeout_s:g} s")
    except BaseException:
        stop(proc)
        raise


def answers(port: int, token: str, timeout_s: float = 1.0) -> bool:
    """Whether the JupyterLab with ``token`` answers on 127.0.0.1:``port`` (its API accepts the token).

    For systems where a process's sockets cannot be listed (psutil's AccessDenied, e.g. macOS): only the server
    holding this token answers 200, so another process on the port is not taken for it.
    """
    import urllib.request

    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/status", headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as r:
            return r.status == 200
    except OSError:
        return False


def stop(proc: subprocess.Popen, grace_s: float = 20) -> int | None:
    """SIGTERM (Jupyter stops its kernels first), SIGKILL after ``grace_s``; the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def serve(workspace: Path, notebooks: Path, *, port: int = DEFAULT_PORT, token: str | None = None,
          out=print) -> int:
    """``make lab``: settings, workspace, JupyterLab, the link; wait until JupyterLab ends; its exit status."""
    from lab.host import workspace as ws

    install_settings()
    for line in ws.describe(ws.sync(notebooks, workspace), workspace):
        out(line)
    token = token or secrets.token_hex(16)
    proc, server = start(workspace, token, port=port)
    # Ctrl-C in the terminal reaches JupyterLab too (same process group); it stops its kernels and exits.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
    try:
        out("")
        out("JupyterLab is ready. Open this link (it carries the token):")
        out("")
        out(f"    {server.link}")
        out("")
        out(f"Your notebooks: {workspace} (copies; git ignores them). Start with 00_start_here.ipynb.")
        out("The link again: `make doctor`. Stop: Ctrl-C twice.")
        sys.stdout.flush()
        return proc.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
        stop(proc)
