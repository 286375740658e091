"""The proxy against a tiny upstream that answers Kafka-framed requests (no broker, no JVM)."""

import json
import socket
import struct
import sys
import threading
import time

import pytest

from lab.broker import proxy
from lab.host import processes


class FakeBroker:
    """Answers every request frame with a response frame carrying its correlation id."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.requests = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            while True:
                head = _recv(conn, 4)
                if head is None:
                    return
                body = _recv(conn, struct.unpack(">i", head)[0])
                self.requests += 1
                corr = body[4:8]
                conn.sendall(struct.pack(">i", 8) + corr + b"okok")


def _recv(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def closed_by_peer(conn) -> bool:
    """A cut shows as EOF or as a reset, depending on timing; both mean the proxy closed it."""
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True


def request(conn, api_key, corr, client_id=b"", payload=b"", version=0):
    body = struct.pack(">hhi", api_key, version, corr) + struct.pack(">h", len(client_id)) + client_id + payload
    conn.sendall(struct.pack(">i", len(body)) + body)


def start_proxy(tmp_path, *args):
    """Start ``python -m lab.broker.proxy`` with ``args`` and a ready file; return the process and the ready file."""
    ready = tmp_path / "ready.json"
    p = processes.spawn([sys.executable, "-m", "lab.broker.proxy", "--ready-file", ready, *args],
                        log_path=tmp_path / "proxy.log")
    return p, ready


def wait_ready(p, ready, timeout_s=10.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while not ready.exists():
        assert p.poll() is None, f"proxy exited with status {p.returncode}"
        assert time.monotonic() < deadline, "proxy wrote no ready file"
        time.sleep(0.02)
    return json.loads(ready.read_text())


@pytest.fixture
def running_proxy(tmp_path):
    upstream = FakeBroker()
    p, ready = start_proxy(tmp_path, "--upstream", f"127.0.0.1:{upstream.port}")
    try:
        info = wait_ready(p, ready)
        assert info["pid"] == p.pid and processes.listening_ports(p.pid) == sorted([info["listen"], info["control"]])
        yield info["listen"], info["control"], upstream
    finally:
        processes.stop_process(p)
        upstream.sock.close()
    assert not processes.group_alive(p.pid)


def test_forwards_and_drops_exactly_n_produce_responses(running_proxy):
    listen, ctl, upstream = running_proxy
    assert proxy.control(ctl, {"cmd": "ack_loss", "count": 2})["ok"]
    with socket.create_connection(("127.0.0.1", listen)) as c:
        c.settimeout(1.0)
        request(c, 3, 1)   # metadata: passes
        request(c, 0, 2)   # produce: dropped
        request(c, 0, 3)   # produce: dropped
        request(c, 0, 4)   # produce: passes
        got = []
        for _ in range(2):
            _recv(c, 4)
            got.append(struct.unpack(">i", _recv(c, 8)[:4])[0])
        with pytest.raises(socket.timeout):
            c.recv(1)
    assert got == [1, 4]
    assert upstream.requests == 4  # the broker did receive both produce requests
    st = proxy.control(ctl, {"cmd": "status"})
    assert st["dropped_responses"] == 2 and st["produce_requests"] == 3


def test_cut_closes_connections_and_refuses_new_ones_then_heals(running_proxy):
    listen, ctl, _ = running_proxy
    c = socket.create_connection(("127.0.0.1", listen))
    request(c, 3, 1)
    assert _recv(c, 12) is not None
    proxy.control(ctl, {"cmd": "cut", "seconds": 1.0})
    c.settimeout(2)
    assert closed_by_peer(c)  # the open connection was cut
    c2 = socket.create_connection(("127.0.0.1", listen))
    c2.settimeout(2)
    request(c2, 3, 2)
    assert closed_by_peer(c2)  # refused while cut
    time.sleep(1.1)
    with socket.create_connection(("127.0.0.1", listen)) as c3:
        request(c3, 3, 3)
        assert _recv(c3, 12) is not None
    assert proxy.control(ctl, {"cmd": "status"})["refused"] >= 1


def test_a_client_cut_closes_only_that_clients_connections_for_its_time(running_proxy):
    listen, ctl, _ = running_proxy
    eos, other = (socket.create_connection(("127.0.0.1", listen)) for _ in range(2))
    for c, name in ((eos, b"lab-r1-eos"), (other, b"kafka-python-1")):
        c.settimeout(2)
        request(c, 3, 1, name)
        assert _recv(c, 12) is not None
    reply = proxy.control(ctl, {"cmd": "cut", "seconds": 1.0, "client_prefix": "lab-r1"})
    assert reply["client_cut_prefix"] == "lab-r1" and reply["client_cut_for_s"] > 0.5 and reply["cut_for_s"] == 0
    assert closed_by_peer(eos)  # the cut client's open connection
    request(other, 3, 2, b"kafka-python-1")
    assert _recv(other, 12) is not None  # another client goes on
    again = socket.create_connection(("127.0.0.1", listen))
    again.settimeout(2)
    request(again, 3, 3, b"lab-r1-eos")
    assert closed_by_peer(again)  # a new connection of the cut client: closed at its first request
    time.sleep(1.1)
    with socket.create_connection(("127.0.0.1", listen)) as back:
        request(back, 3, 4, b"lab-r1-eos")
        assert _recv(back, 12) is not None
    other.close()


def test_hold_keeps_requests_until_it_ends_in_order_and_a_heal_ends_it_early(running_proxy):
    listen, ctl, upstream = running_proxy
    with socket.create_connection(("127.0.0.1", listen)) as c:
        c.settimeout(5.0)
        assert proxy.control(ctl, {"cmd": "hold", "seconds": 1.0})["hold_for_s"] > 0.5
        began = time.monotonic()
        request(c, 1, 7)  # a fetch, as a follower sends it
        request(c, 1, 8)
        _recv(c, 4)
        first = struct.unpack(">i", _recv(c, 8)[:4])[0]
        _recv(c, 4)
        second = struct.unpack(">i", _recv(c, 8)[:4])[0]
        assert (first, second) == (7, 8) and time.monotonic() - began >= 0.9
        # One connection's requests go on one by one: the second was read once the first went on, after the hold.
        assert proxy.control(ctl, {"cmd": "status"})["held_requests"] == 1
        proxy.control(ctl, {"cmd": "hold", "seconds": 30})
        request(c, 1, 9)
        time.sleep(0.3)
        assert upstream.requests == 2  # still held
        proxy.control(ctl, {"cmd": "heal"})
        _recv(c, 4)
        assert struct.unpack(">i", _recv(c, 8)[:4])[0] == 9


def test_hold_produce_keeps_one_matching_request_unanswered_and_release_sends_it_late(running_proxy):
    listen, ctl, upstream = running_proxy
    assert proxy.control(ctl, {"cmd": "hold_produce", "contains": '"late":true'})["held_produce"]["state"] == "armed"
    with socket.create_connection(("127.0.0.1", listen)) as c:
        c.settimeout(0.5)
        request(c, 0, 1, b"lab-txn", b'{"late":false}', version=11)  # produce, not the one: forwarded
        assert struct.unpack(">i", _recv(c, 12)[4:8])[0] == 1
        request(c, 0, 2, b"lab-txn", b'{"late":true}', version=11)   # kept: never forwarded, never answered
        with pytest.raises(socket.timeout):
            c.recv(1)
        assert upstream.requests == 1
    held = proxy.control(ctl, {"cmd": "status"})["held_produce"]
    assert (held["state"], held["version"], held["client_id"]) == ("held", 11, "lab-txn") and held["held_at"]
    assert b'{"late":true}' in bytes.fromhex(held["request"])
    # the client's retry on a new connection, the same bytes: forwarded (only one request is kept)
    with socket.create_connection(("127.0.0.1", listen)) as again:
        again.settimeout(2)
        request(again, 0, 3, b"lab-txn", b'{"late":true}', version=11)
        assert struct.unpack(">i", _recv(again, 12)[4:8])[0] == 3
    assert proxy.control(ctl, {"cmd": "release"})["held_produce"]["state"] == "released"
    deadline = time.monotonic() + 5
    while (held := proxy.control(ctl, {"cmd": "status"})["held_produce"])["state"] == "released":
        assert time.monotonic() < deadline, held
        time.sleep(0.05)
    # the kept request reached the broker after its retry, and the broker's answer is kept: correlation id 2
    assert held["state"] == "answered" and upstream.requests == 3, held
    answer = bytes.fromhex(held["response"])
    assert struct.unpack(">ii", answer[:8]) == (8, 2) and held["answered_at"] >= held["released_at"]
    again = proxy.control(ctl, {"cmd": "release"})
    assert not again["ok"] and "no produce request is kept" in again["error"]
    bad = proxy.control(ctl, {"cmd": "hold_produce", "contains": ""})
    assert not bad["ok"] and "bad contains ''" in bad["error"]


def test_unknown_command_is_an_error_reply(running_proxy):
    _, ctl, _ = running_proxy
    reply = proxy.control(ctl, {"cmd": "explode"})
    assert not reply["ok"] and "explode" in reply["error"] and "cut" in reply["error"]


def test_a_taken_listen_port_is_a_one_line_error_naming_it(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        p, ready = start_proxy(tmp_path, "--listen", port)
        try:
            assert p.wait(timeout=10) == proxy.EXIT_CANNOT_BIND
        finally:
            processes.stop_process(p)
    log = (tmp_path / "proxy.log").read_text().strip().splitlines()
    assert log == [f"lab proxy: cannot listen on 127.0.0.1:{port} (clients): address already in use"]
    assert not ready.exists()


def test_clients_are_refused_until_an_upstream_is_set(tmp_path):
    upstream = FakeBroker()
    p, ready = start_proxy(tmp_path)
    try:
        info = wait_ready(p, ready)
        listen, ctl = info["listen"], info["control"]
        assert proxy.control(ctl, {"cmd": "status"})["upstream"] is None
        c = socket.create_connection(("127.0.0.1", listen))
        c.settimeout(2)
        request(c, 3, 1)
        assert closed_by_peer(c)  # refused: there is no broker to forward to yet
        c.close()
        bad = proxy.control(ctl, {"cmd": "upstream", "port": 0})
        assert not bad["ok"] and "0" in bad["error"]
        reply = proxy.control(ctl, {"cmd": "upstream", "host": "127.0.0.1", "port": upstream.port})
        assert reply["ok"] and reply["upstream"] == f"127.0.0.1:{upstream.port}" and reply["refused"] == 1
        with socket.create_connection(("127.0.0.1", listen)) as c2:
            c2.settimeout(2)
            request(c2, 3, 2)
            assert struct.unpack(">i", _recv(c2, 12)[4:8])[0] == 2
        assert upstream.requests == 1
    finally:
        processes.stop_process(p)
        upstream.sock.close()
    assert not processes.group_alive(p.pid)


def test_host_option():
    assert proxy.parse_args([]).host == "127.0.0.1"  # a developer machine: loopback only
    a = proxy.parse_args(["--host", "0.0.0.0", "--listen", "19092", "--upstream", "kafka:29093", "--control", "19093"])
    assert (a.host, a.listen, a.upstream_addr, a.control) == ("0.0.0.0", 19092, ("kafka", 29093), 19093)
    for bad in ([""], ["a b"]):
        with pytest.raises(SystemExit) as e:
            proxy.parse_args(["--host", *bad])
        assert e.value.code == 2


def test_a_bad_host_is_named(capsys):
    with pytest.raises(SystemExit):
        proxy.parse_args(["--host", " "])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "bad --host ' '" in err and "127.0.0.1" in err


def _listening_addresses(pid: int) -> set[str]:
    import psutil

    return {c.laddr.ip for c in psutil.Process(pid).net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}


def test_host_aware_control_against_a_proxy_started_with_host(tmp_path):
    """``python -m lab.broker.proxy --host 127.0.0.1`` (port 0), driven through ``control(..., host=...)``."""
    upstream = FakeBroker()
    p, ready = start_proxy(tmp_path, "--host", "127.0.0.1", "--listen", 0, "--control", 0,
                           "--upstream", f"127.0.0.1:{upstream.port}")
    try:
        info = wait_ready(p, ready)
        assert _listening_addresses(p.pid) == {"127.0.0.1"}
        st = proxy.control(info["control"], {"cmd": "status"}, host="127.0.0.1")
        assert st["ok"] and st["upstream"] == f"127.0.0.1:{upstream.port}"
        reply = proxy.control(info["control"], {"cmd": "ack_loss", "count": 3}, 2.0, host="127.0.0.1")
        assert reply["ack_loss_left"] == 3
        assert proxy.control(info["control"], {"cmd": "heal"}, host="localhost")["ack_loss_left"] == 0
    finally:
        processes.stop_process(p)
        upstream.sock.close()
    with pytest.raises(OSError):
        proxy.control(info["control"], {"cmd": "status"}, 1.0, host="127.0.0.1")


def test_a_taken_port_names_the_host(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        p, ready = start_proxy(tmp_path, "--host", "127.0.0.1", "--control", port)
        try:
            assert p.wait(timeout=10) == proxy.EXIT_CANNOT_BIND
        finally:
            processes.stop_process(p)
    log = (tmp_path / "proxy.log").read_text().strip().splitlines()
    assert log == [f"lab proxy: cannot listen on 127.0.0.1:{port} (control): address already in use"]
