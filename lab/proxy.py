"""A Kafka-protocol-aware TCP proxy between every client and the broker.

The broker advertises the proxy's address, so producers, the pipelines and
Spark tasks all connect through it. The proxy reads Kafka's framing
(4-byte length, then for requests ``api_key, api_version, correlation_id``;
for responses ``correlation_id``) so it can drop exactly the responses to
produce requests.

Faults it carries out for real:

``cut``       close every client connection and refuse new ones for N seconds
              (a broker outage as the clients see it; the broker keeps its data).
``ack-loss``  forward produce requests to the broker, then drop their responses,
              for N seconds or for the next N produce responses; the producer
              times out and retries a record the broker already has.

Run as ``python -m lab.proxy --listen P --upstream HOST:PORT --control C``;
commands are JSON lines on the control port: ``{"cmd": "cut", "seconds": 3}``,
``{"cmd": "ack_loss", "seconds": 2, "count": null}``, ``{"cmd": "heal"}``,
``{"cmd": "status"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import struct
import time

PRODUCE_API_KEY = 0


class ProxyState:
    """Fault switches and counters; only touched from the event loop thread."""

    def __init__(self) -> None:
        self.cut_until = 0.0
        self.ack_loss_until = 0.0
        self.ack_loss_left = 0
        self.connections: set[asyncio.StreamWriter] = set()
        self.accepted = 0
        self.refused = 0
        self.dropped_responses = 0
        self.produce_requests = 0

    def cutting(self) -> bool:
        return time.monotonic() < self.cut_until

    def take_ack(self) -> bool:
        """True if this produce response must be dropped."""
        if self.ack_loss_left:
            self.ack_loss_left -= 1
            return True
        return time.monotonic() < self.ack_loss_until

    def status(self) -> dict:
        now = time.monotonic()
        return {
            "cut_for_s": round(max(0.0, self.cut_until - now), 3),
            "ack_loss_for_s": round(max(0.0, self.ack_loss_until - now), 3),
            "ack_loss_left": self.ack_loss_left,
            "open_connections": len(self.connections),
            "accepted": self.accepted,
            "refused": self.refused,
            "produce_requests": self.produce_requests,
            "dropped_responses": self.dropped_responses,
        }


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
        (size,) = struct.unpack(">i", head)
        return head + await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


async def _pipe_requests(reader, writer, pending: dict, state: ProxyState) -> None:
    while True:
        frame = await _read_frame(reader)
        if frame is None:
            return
        if len(frame) >= 12:
            api_key, _version, correlation = struct.unpack(">hhi", frame[4:12])
            pending[correlation] = api_key
            if api_key == PRODUCE_API_KEY:
                state.produce_requests += 1
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


async def _serve_client(client_reader, client_writer, upstream: tuple[str, int], state: ProxyState) -> None:
    if state.cutting():
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
        asyncio.ensure_future(_pipe_requests(client_reader, up_writer, pending, state)),
        asyncio.ensure_future(_pipe_responses(up_reader, client_writer, pending, state)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        state.connections.discard(client_writer)
        for w in (client_writer, up_writer):
            w.transport.abort()


async def _serve_control(reader, writer, state: ProxyState) -> None:
    try:
        while line := await reader.readline():
            try:
                msg = json.loads(line)
                cmd = msg.get("cmd")
                if cmd == "cut":
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
                elif cmd == "heal":
                    state.cut_until = 0.0
                    state.ack_loss_until = 0.0
                    state.ack_loss_left = 0
                elif cmd != "status":
                    raise ValueError(f"unknown command {cmd!r}; valid: cut, ack_loss, heal, status")
                reply = {"ok": True, **state.status()}
            except (ValueError, KeyError, TypeError) as e:
                reply = {"ok": False, "error": str(e)}
            writer.write((json.dumps(reply) + "\n").encode())
            await writer.drain()
    finally:
        writer.close()


async def serve(listen_port: int, upstream: tuple[str, int], control_port: int) -> None:
    state = ProxyState()
    data = await asyncio.start_server(lambda r, w: _serve_client(r, w, upstream, state), "127.0.0.1", listen_port)
    control = await asyncio.start_server(lambda r, w: _serve_control(r, w, state), "127.0.0.1", control_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with data, control:
        await stop.wait()


def control(port: int, message: dict, timeout_s: float = 5.0) -> dict:
    """Send one command to a running proxy and return its reply.

    Raises
    ------
    ConnectionError
        When the proxy does not answer.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall((json.dumps(message) + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("proxy closed the control connection")
            buf += chunk
    return json.loads(buf)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m lab.proxy")
    p.add_argument("--listen", type=int, required=True)
    p.add_argument("--upstream", required=True, help="HOST:PORT of the broker")
    p.add_argument("--control", type=int, required=True)
    a = p.parse_args(argv)
    host, _, port = a.upstream.rpartition(":")
    asyncio.run(serve(a.listen, (host, int(port)), a.control))


if __name__ == "__main__":
    main()
