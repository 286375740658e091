"""A Kafka-protocol-aware TCP proxy between every client and the broker.

The broker advertises the proxy's address, so producers, the pipelines and
Spark tasks all connect through it. The proxy reads Kafka's framing
(4-byte length, then for requests ``api_key, api_version, correlation_id``;
for responses ``correlation_id``) so it can drop exactly the responses to
produce requests.

Faults it carries out for real:

``cut``       close every client connection and refuse new ones for N seconds
              (a broker outage as the clients see it; the broker keeps its data);
              with a client prefix, only the connections of clients whose
              ``client_id`` starts with it (one client cut off from this broker).
``ack-loss``  forward produce requests to the broker, then drop their responses,
              for N seconds or for the next N produce responses; the producer
              times out and retries a record the broker already has.
``hold``      keep every request for N seconds before forwarding it (connections
              stay open). In front of a broker's inter-broker listener this holds
              back its followers' fetches: the ``follower-lag`` fault of a cluster
              (:mod:`lab.broker.cluster`).
``hold_produce``  keep one produce request, the first whose bytes contain a given
              text, unsent: its client times out and sends the batch again on a new
              connection. ``release`` then sends the kept request to the broker on a
              connection of the proxy's own, as a request that arrives late would, and
              keeps the broker's answer (the late write: :mod:`lab.lessons.late_write`).

Start
-----
``python -m lab.broker.proxy [--host H] [--listen P] [--control C] [--upstream HOST:PORT] [--ready-file PATH]``

The proxy binds both of its ports itself on ``--host`` (default 127.0.0.1):
``--listen`` (clients; default 0) and ``--control`` (commands; default 0), where
0 lets the OS choose. No one picks a port for it, so no other process can take
the port between the choice and the bind. The control port takes commands from
anyone who can connect, so the lab binds loopback only; another address (e.g.
``0.0.0.0``) belongs inside a container network whose ports are not published
(``docker-compose.yml``'s ``kafka-proxy``). Once both servers listen it writes ``PATH`` as one JSON
object, atomically (a temporary file in the same directory, then
``os.replace``), so a reader never sees half of it::

    {"pid": 4242, "listen": 40123, "control": 40124}

When a port cannot be bound (an asked-for ``--listen`` port already in use),
it prints one line ``lab proxy: cannot listen on H:P (clients): <reason>``
to stderr, writes no ready file and exits with status :data:`EXIT_CANNOT_BIND`.

``--upstream`` may be left out: the broker is usually started after the proxy,
because it must advertise the proxy's port. Until an upstream is set, every
client connection is refused (aborted at once), as during a ``cut``.

Control protocol
----------------
One JSON object per line on the control port; each gets one JSON line back,
``{"ok": true, <status>}`` or ``{"ok": false, "error": "<one line>"}``:

``{"cmd": "upstream", "host": "127.0.0.1", "port": N}``
    Forward new client connections to ``host:port`` (``host`` defaults to
    127.0.0.1). Connections already open keep their broker.
``{"cmd": "cut", "seconds": 3, "client_prefix": null}``
    Close every client connection and refuse new ones for that long. With
    ``client_prefix``, close those whose requests name a ``client_id`` starting
    with it, and close each new one at its first such request, for that long.
``{"cmd": "ack_loss", "seconds": 2, "count": null}``
    Drop the next ``count`` produce responses, or all for ``seconds`` (default 3).
``{"cmd": "hold", "seconds": 5}``
    Forward no request for that long; held requests go on, in order, when it ends.
``{"cmd": "hold_produce", "contains": "\"late\":true"}``
    Keep the next produce request whose bytes contain that text (records are sent
    uncompressed, so a record value's text is in them): not forwarded, never answered.
``{"cmd": "release"}``
    Send the kept request to the upstream on a new connection; its response frame
    (hex) comes in the status once the broker answers.
``{"cmd": "heal"}``
    End any cut, ack loss or hold now (an armed ``hold_produce`` that kept nothing yet
    included; a kept request waits for ``release``).
``{"cmd": "status"}``
    Nothing changes; the reply carries the status only.

The status fields: ``upstream`` (``"host:port"`` or null), ``cut_for_s``,
``ack_loss_for_s``, ``ack_loss_left``, ``hold_for_s``, ``held_requests``, ``open_connections``, ``accepted``,
``refused``, ``produce_requests``, ``dropped_responses``, ``client_cut_for_s``, ``client_cut_prefix``,
``held_produce`` (null, or ``{"state": "armed" | "held" | "released" | "answered" | "failed", "contains",
"version", "client_id", "held_at", "released_at", "answered_at", "request", "response", "error"}``; times are
wall-clock seconds, ``request`` and ``response`` the hex of each whole frame).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import struct
import sys
import time

PRODUCE_API_KEY = 0
#: Seconds a released request's connection and answer may take before its record says ``failed``.
LATE_ANSWER_S = 30.0

#: Exit status when a port cannot be bound (EX_UNAVAILABLE of sysexits.h), so whoever
#: started the proxy can tell a taken port from a crash (Python's status 1).
EXIT_CANNOT_BIND = 69


class ProxyState:
    """Fault switches and counters; only touched from the event loop thread."""

    def __init__(self, upstream: tuple[str, int] | None = None) -> None:
        self.upstream = upstream
        self.cut_until = 0.0
        self.ack_loss_until = 0.0
        self.ack_loss_left = 0
        self.hold_until = 0.0
        self.held_requests = 0
        self.connections: set[asyncio.StreamWriter] = set()
        self.client_ids: dict[asyncio.StreamWriter, str] = {}  # from each connection's first request
        self.client_cut_until = 0.0
        self.client_cut_prefix = ""
        self.accepted = 0
        self.refused = 0
        self.dropped_responses = 0
        self.produce_requests = 0
        self.held_produce: dict | None = None  # hold_produce's record (see the status fields)
        self.held_frame: bytes | None = None

    def cutting(self) -> bool:
        return time.monotonic() < self.cut_until

    def cuts_client(self, client_id: str | None) -> bool:
        """True if a client cut is on and ``client_id`` falls under it."""
        return (client_id is not None and bool(self.client_cut_prefix) and time.monotonic() < self.client_cut_until
                and client_id.startswith(self.client_cut_prefix))

    def take_ack(self) -> bool:
        """True if this produce response must be dropped."""
        if self.ack_loss_left:
            self.ack_loss_left -= 1
            return True
        return time.monotonic() < self.ack_loss_until

    def status(self) -> dict:
        now = time.monotonic()
        return {
            "upstream": f"{self.upstream[0]}:{self.upstream[1]}" if self.upstream else None,
            "cut_for_s": round(max(0.0, self.cut_until - now), 3),
            "ack_loss_for_s": round(max(0.0, self.ack_loss_until - now), 3),
            "ack_loss_left": self.ack_loss_left,
            "hold_for_s": round(max(0.0, self.hold_until - now), 3),
            "held_requests": self.held_requests,
            "open_connections": len(self.connections),
            "accepted": self.accepted,
            "refused": self.refused,
            "produce_requests": self.produce_requests,
            "dropped_responses": self.dropped_responses,
            "client_cut_for_s": round(max(0.0, self.client_cut_until - now), 3),
            "client_cut_prefix": self.client_cut_prefix or None,
            "held_produce": dict(self.held_produce) if self.held_produce else None,
        }

    def keeps(self, frame: bytes) -> bool:
        """True if this produce request frame is the one an armed ``hold_produce`` keeps (it is then kept)."""
        held = self.held_produce
        if not held or held["state"] != "armed" or held["contains"].encode() not in frame:
            return False
        self.held_frame = frame
        held.update(state="held", held_at=time.time(), version=struct.unpack(">h", frame[6:8])[0],
                    client_id=request_client_id(frame), request=frame.hex())
        return True


def request_client_id(frame: bytes) -> str | None:
    """The ``client_id`` of a request frame (size prefix included): every request header from v1 has it
    right after the correlation id, as a nullable int16-length string; ``None`` when absent or unreadable."""
    if len(frame) < 14:
        return None
    (size,) = struct.unpack(">h", frame[12:14])
    if size < 0 or len(frame) < 14 + size:
        return None
    try:
        return frame[14:14 + size].decode()
    except UnicodeDecodeError:
        return None


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
        (size,) = struct.unpack(">i", head)
        return head + await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


async def _pipe_requests(reader, writer, pending: dict, state: ProxyState, client=None) -> None:
    while True:
        frame = await _read_frame(reader)
        if frame is None:
            return
        if client is not None:
            client_id = state.client_ids.setdefault(client, request_client_id(frame))
            if state.cuts_client(client_id):
                return  # the connection is closed before this request reaches the broker
        if len(frame) >= 12:
            api_key, _version, correlation = struct.unpack(">hhi", frame[4:12])
            pending[correlation] = api_key
            if api_key == PRODUCE_API_KEY:
                state.produce_requests += 1
                if state.keeps(frame):
                    continue  # never forwarded on this connection: its client times out and sends it again
        if time.monotonic() < state.hold_until:
            state.held_requests += 1
            # Re-read each time: a heal ends the hold early, a new hold extends it.
            while (left := state.hold_until - time.monotonic()) > 0:
                await asyncio.sleep(min(left, 0.05))
        writer.write(frame)
        await writer.drain()


async def _pipe_responses(reader, writer, pending: dict, state: ProxyState) -> None:
    while True:
        frame = await _read_frame(reader)
        if frame is None:
            return
        correlation = struct.unpack(">i", frame[4:8])[0] if len(frame) >= 8 else None
        api_key = pending.pop(correlation, None)
        if api_key == PRODUCE_API_KEY and state.take_ack():
            state.dropped_responses += 1
            continue
        writer.write(frame)
        await writer.drain()


async def _send_late(state: ProxyState) -> None:
    """Send the kept produce request on a connection of its own and keep the broker's answer."""
    held, frame = state.held_produce, state.held_frame
    try:
        if state.upstream is None:
            raise ConnectionError("no upstream")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(*state.upstream), LATE_ANSWER_S)
        try:
            writer.write(frame)
            await writer.drain()
            response = await asyncio.wait_for(_read_frame(reader), LATE_ANSWER_S)
        finally:
            writer.transport.abort()
        if response is None:
            raise ConnectionError("the broker closed the connection without an answer")
        held.update(state="answered", answered_at=time.time(), response=response.hex())
    except (TimeoutError, OSError) as e:
        held.update(state="failed", answered_at=time.time(), error=f"{type(e).__name__}: {e}")


async def _serve_client(client_reader, client_writer, state: ProxyState) -> None:
    upstream = state.upstream
    if upstream is None or state.cutting():
        state.refused += 1
        client_writer.transport.abort()
        return
    try:
        up_reader, up_writer = await asyncio.open_connection(*upstream)
    except OSError:
        client_writer.transport.abort()
        return
    state.accepted += 1
    state.connections.add(client_writer)
    pending: dict[int, int] = {}
    tasks = [
        asyncio.ensure_future(_pipe_requests(client_reader, up_writer, pending, state, client_writer)),
        asyncio.ensure_future(_pipe_responses(up_reader, client_writer, pending, state)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        state.connections.discard(client_writer)
        state.client_ids.pop(client_writer, None)
        for w in (client_writer, up_writer):
            w.transport.abort()


async def _serve_control(reader, writer, state: ProxyState) -> None:
    try:
        while line := await reader.readline():
            try:
                msg = json.loads(line)
                cmd = msg.get("cmd")
                if cmd == "upstream":
                    state.upstream = _parse_upstream(msg.get("host") or "127.0.0.1", msg.get("port"))
                elif cmd == "cut" and msg.get("client_prefix"):
                    state.client_cut_prefix = str(msg["client_prefix"])
                    state.client_cut_until = time.monotonic() + float(msg["seconds"])
                    for w in [w for w in state.connections if state.cuts_client(state.client_ids.get(w))]:
                        w.transport.abort()
                elif cmd == "cut":
                    state.cut_until = time.monotonic() + float(msg["seconds"])
                    for w in list(state.connections):
                        w.transport.abort()
                elif cmd == "ack_loss":
                    # A count of responses makes a run reproducible; a window is what a flaky link does.
                    if msg.get("count"):
                        state.ack_loss_left = int(msg["count"])
                        state.ack_loss_until = 0.0
                    else:
                        state.ack_loss_left = 0
                        state.ack_loss_until = time.monotonic() + float(msg.get("seconds") or 3)
                elif cmd == "hold":
                    state.hold_until = time.monotonic() + float(msg["seconds"])
                elif cmd == "hold_produce":
                    contains = msg.get("contains")
                    if not isinstance(contains, str) or not contains:
                        raise ValueError(f"bad contains {contains!r}; valid: a non-empty text the request's bytes hold")
                    if state.held_produce and state.held_produce["state"] in ("held", "released"):
                        raise ValueError("a produce request is kept already; release it first")
                    state.held_produce = {"state": "armed", "contains": contains, "version": None, "client_id": None,
                                          "held_at": None, "released_at": None, "answered_at": None,
                                          "request": None, "response": None, "error": None}
                    state.held_frame = None
                elif cmd == "release":
                    if not state.held_produce or state.held_produce["state"] != "held":
                        now = state.held_produce["state"] if state.held_produce else "nothing armed"
                        raise ValueError(f"no produce request is kept to release ({now}); valid after hold_produce "
                                         "once its request came")
                    state.held_produce.update(state="released", released_at=time.time())
                    asyncio.ensure_future(_send_late(state))
                elif cmd == "heal":
                    state.client_cut_until = 0.0
                    state.hold_until = 0.0
                    state.cut_until = 0.0
                    state.ack_loss_until = 0.0
                    state.ack_loss_left = 0
                    if state.held_produce and state.held_produce["state"] == "armed":
                        state.held_produce = None
                elif cmd != "status":
                    raise ValueError(f"unknown command {cmd!r}; valid: upstream, cut, ack_loss, hold, hold_produce, "
                                     "release, heal, status")
                reply = {"ok": True, **state.status()}
            except (ValueError, KeyError, TypeError) as e:
                reply = {"ok": False, "error": str(e)}
            writer.write((json.dumps(reply) + "\n").encode())
            await writer.drain()
    finally:
        writer.close()


def _parse_upstream(host, port) -> tuple[str, int]:
    """``(host, port)`` of a broker, or ValueError naming the bad value."""
    if not isinstance(host, str) or not host:
        raise ValueError(f"bad upstream host {host!r}; valid: a host name or address such as 127.0.0.1")
    if (isinstance(port, bool) or not isinstance(port, (int, str)) or not str(port).isdigit()
        or not 0 < int(port) < 65536):
        raise ValueError(f"bad upstream port {port!r}; valid: 1..65535")
    return host, int(port)


class CannotBind(Exception):
    """A listening port could not be bound; the message is the one line the proxy prints."""


async def _listen(handler, host: str, port: int, what: str) -> asyncio.Server:
    try:
        return await asyncio.start_server(handler, host, port)
    except OSError as e:
        # asyncio's message repeats the address; the plain reason reads better in a one-line error.
        reason = os.strerror(e.errno).lower() if e.errno else str(e)
        raise CannotBind(f"lab proxy: cannot listen on {host}:{port} ({what}): {reason}") from None


def write_ready(path: str, info: dict) -> None:
    """Write ``info`` to ``path`` as JSON so a reader sees either nothing or all of it."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, path)


async def serve(listen_port: int = 0, upstream: tuple[str, int] | None = None, control_port: int = 0,
                ready_file: str | None = None, host: str = "127.0.0.1") -> None:
    """Run the proxy until SIGTERM or SIGINT, both ports bound on ``host``.

    Raises
    ------
    CannotBind
        When ``listen_port`` or ``control_port`` cannot be bound on ``host``.
    """
    state = ProxyState(upstream)
    data = await _listen(lambda r, w: _serve_client(r, w, state), host, listen_port, "clients")
    try:
        control_server = await _listen(lambda r, w: _serve_control(r, w, state), host, control_port, "control")
    except CannotBind:
        data.close()
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with data, control_server:
        if ready_file:
            write_ready(ready_file, {"pid": os.getpid(), "listen": data.sockets[0].getsockname()[1],
                                     "control": control_server.sockets[0].getsockname()[1]})
        await stop.wait()


def control(port: int, message: dict, timeout_s: float = 5.0, *, host: str = "127.0.0.1") -> dict:
    """Send one command to the proxy whose control port is ``host:port`` and return its reply.

    ``host`` is 127.0.0.1 for the proxy the lab starts; another host for a proxy
    in front of ``LAB_KAFKA_BOOTSTRAP`` (``LAB_KAFKA_PROXY``, e.g. ``kafka-proxy``).

    Raises
    ------
    OSError
        When the proxy does not answer within ``timeout_s`` (``ConnectionError``
        when it closes the connection without a reply).
    """
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.sendall((json.dumps(message) + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("proxy closed the control connection")
            buf += chunk
    return json.loads(buf)


def parse_args(argv=None) -> argparse.Namespace:
    """The command line of ``python -m lab.broker.proxy``; argparse's usage error (exit 2) names a bad value."""
    p = argparse.ArgumentParser(prog="python -m lab.broker.proxy")
    p.add_argument("--host", default="127.0.0.1",
                   help="address both ports bind (default 127.0.0.1; 0.0.0.0 only inside a container network)")
    p.add_argument("--listen", type=int, default=0, help="client port (0: the OS chooses)")
    p.add_argument("--upstream", help="HOST:PORT of the broker; or set later with the upstream command")
    p.add_argument("--control", type=int, default=0, help="control port (0: the OS chooses)")
    p.add_argument("--ready-file", help="write the bound ports there as JSON once both servers listen")
    a = p.parse_args(argv)
    if not a.host.strip() or any(c.isspace() for c in a.host):
        p.error(f"bad --host {a.host!r}; valid: an address to bind, e.g. 127.0.0.1 (the default) or 0.0.0.0")
    a.upstream_addr = None
    if a.upstream:
        host, _, port = a.upstream.rpartition(":")
        try:
            a.upstream_addr = _parse_upstream(host, port)
        except ValueError as e:
            p.error(str(e))
    return a


def main(argv=None) -> None:
    a = parse_args(argv)
    try:
        asyncio.run(serve(a.listen, a.upstream_addr, a.control, a.ready_file, host=a.host))
    except CannotBind as e:
        print(e, file=sys.stderr, flush=True)
        sys.exit(EXIT_CANNOT_BIND)


if __name__ == "__main__":
    main()
