"""The learner's workspace (lab.host.workspace) and make lab's JupyterLab (lab.host.jupyter), without a server."""

from __future__ import annotations

import json
import os

import pytest

from lab.errors import LabError
from lab.host import jupyter, workspace as ws


def test_the_plan_never_overwrites_what_the_learner_changed():
    originals = {"a.ipynb": "A2", "b.ipynb": "B2", "c.ipynb": "C1", "d.ipynb": "D1", "e.ipynb": "E2"}
    copies = {"a.ipynb": "A1", "b.ipynb": "mine", "c.ipynb": "mine too", "e.ipynb": "E2"}
    copied_from = {"a.ipynb": "A1", "b.ipynb": "B1", "c.ipynb": "C1", "d.ipynb": "D1", "e.ipynb": "E1"}
    p = ws.plan(originals, copies, copied_from)
    assert p.updated == ["a.ipynb"]  # untouched copy of an old original: replaced
    assert p.kept == ["b.ipynb"]  # the learner's work on an old original: kept, and said
    assert p.new == ["d.ipynb"]  # deleted by the learner: copied again
    assert p.unchanged == ["c.ipynb", "e.ipynb"]  # the learner's work on today's original; a copy equal to it


def test_sync_copies_then_keeps_the_learners_work(tmp_path):
    notebooks, workspace = tmp_path / "notebooks", tmp_path / "workspace"
    (notebooks / "solutions").mkdir(parents=True)
    (notebooks / "00.ipynb").write_text("v1")
    (notebooks / "solutions" / "00.ipynb").write_text("s1")
    (notebooks / ".ipynb_checkpoints").mkdir()
    (notebooks / ".ipynb_checkpoints" / "00-checkpoint.ipynb").write_text("old")
    first = ws.sync(notebooks, workspace)
    assert first.new == ["00.ipynb", "solutions/00.ipynb"]
    assert (workspace / "solutions" / "00.ipynb").read_text() == "s1"
    assert not (workspace / ".ipynb_checkpoints").exists()
    (workspace / "00.ipynb").write_text("my outputs")
    (workspace / "notes.ipynb").write_text("mine alone")
    (notebooks / "00.ipynb").write_text("v2")
    (notebooks / "solutions" / "00.ipynb").write_text("s2")
    second = ws.sync(notebooks, workspace)
    assert (second.kept, second.updated) == (["00.ipynb"], ["solutions/00.ipynb"])
    assert ((workspace / "00.ipynb").read_text() == "my outputs"
            and (workspace / "notes.ipynb").read_text() == "mine alone")
    assert (workspace / "solutions" / "00.ipynb").read_text() == "s2"
    [line] = [x for x in ws.describe(second, workspace) if "kept" in x]
    assert str(workspace / "00.ipynb") in line and "rename yours" in line
    assert ws.describe(ws.sync(notebooks, workspace), workspace) == [f"{workspace / '00.ipynb'}: the lab's version "
                                                                      "changed since you copied it; yours is kept as "
                                                                      "it is. For the new one, rename yours and start "
                                                                      "again"]


def test_settings_merge_into_the_environments_overrides(tmp_path):
    overrides = jupyter.overrides_path(tmp_path)
    overrides.parent.mkdir(parents=True)
    overrides.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
                                     "@jupyterlab/apputils-extension:notification": {"doNotDisturbMode": True}}))
    written = jupyter.install_settings(tmp_path)
    assert written == [overrides, jupyter.server_config_path(tmp_path)]
    got = json.loads(overrides.read_text())
    assert got["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}  # a learner's own, kept
    assert got["@jupyterlab/apputils-extension:notification"] == {
        "doNotDisturbMode": True, "fetchNews": "false", "checkForUpdates": False}
    assert json.loads(jupyter.server_config_path(tmp_path).read_text()) == jupyter.SERVER_CONFIG
    assert jupyter.install_settings(tmp_path) == []  # already so: nothing written
    overrides.write_text("{not json")
    with pytest.raises(LabError, match=r"overrides.json is not JSON .*fix or remove it"):
        jupyter.install_settings(tmp_path)


def test_the_shipped_settings_are_jupyterlabs_own_keys():
    """The keys exist in the pinned JupyterLab's schema, with the types it declares (a typo would be ignored)."""
    from pathlib import Path

    import jupyterlab
    schemas = Path(jupyterlab.__file__).parent / "schemas"
    for plugin, values in jupyter.LAB_SETTINGS.items():
        package, name = plugin.rsplit(":", 1)
        schema = json.loads((schemas / package / f"{name}.json").read_text())
        for key, value in values.items():
            declared = schema["properties"][key]
            assert declared.get("type") in ({"boolean"} if isinstance(value, bool) else {"string"}) or \
                value in declared.get("enum", []), (key, declared)


def test_running_servers_come_from_their_runtime_files(tmp_path):
    me = {"pid": os.getpid(), "port": 8891, "token": "abc", "root_dir": str(tmp_path / "workspace")}
    (tmp_path / f"jpserver-{os.getpid()}.json").write_text(json.dumps(me))
    (tmp_path / "jpserver-1.json").write_text("{")  # being written
    (tmp_path / "jpserver-999999.json").write_text(json.dumps({**me, "pid": 999_999}))  # gone
    [server] = jupyter.running(tmp_path / "workspace", runtime_dir=tmp_path)
    assert server.link == "http://127.0.0.1:8891/lab?token=abc"
    assert jupyter.running(tmp_path / "elsewhere", runtime_dir=tmp_path) == []


def test_jupyter_listens_on_127_0_0_1_only_and_serves_the_workspace(tmp_path):
    args = jupyter.jupyter_args(tmp_path, 8888)
    assert "--ip=127.0.0.1" in args and f"--ServerApp.root_dir={tmp_path}" in args
    assert not [a for a in args if "token" in a.lower()]  # the token goes in JUPYTER_TOKEN, not on a command line


def test_only_the_server_with_the_token_counts_as_answering():
    import http.server
    import threading

    class Api(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            ok = self.headers.get("Authorization") == "token right"
            self.send_response(200 if ok else 403)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        assert jupyter.answers(port, "right") and not jupyter.answers(port, "wrong")
    finally:
        server.shutdown()
        server.server_close()
    assert not jupyter.answers(port, "right")  # nobody there any more
