"""A Kafka of one's own (``LAB_KAFKA_BOOTSTRAP``) and the lab proxy in front of it (``LAB_KAFKA_PROXY``).

The lab starts and stops neither; these checks run before a run starts, so an
unreachable address is one line naming it rather than a hang.
"""

from __future__ import annotations

import json
import socket

from lab.broker import proxy as proxy_mod
from lab.errors import LabError


def check_reachable(bootstrap: str, timeout_s: float = 5.0, source: str = "LAB_KAFKA_BOOTSTRAP") -> None:
    """Raise :class:`LabError` unless a TCP connection to every ``host:port`` in ``bootstrap`` succeeds."""
    for hostport in bootstrap.split(","):
        host, sep, port = hostport.strip().rpartition(":")
        if not sep or not port.isdigit():
            raise LabError(f"bad {source} {bootstrap!r}; valid form: host:port[,host:port...]")
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
        except OSError as e:
            raise LabError(
                f"cannot reach Kafka at {source}={bootstrap!r} ({e.strerror or e}); "
                "start it, or unset LAB_KAFKA_BOOTSTRAP to use the embedded broker"
            ) from None


def check_proxy(address: str, timeout_s: float = 5.0) -> tuple[str, int]:
    """``(host, port)`` of the lab proxy whose control port is ``address`` (``LAB_KAFKA_PROXY``), checked live.

    The proxy must answer ``{"cmd": "status"}`` (:mod:`lab.broker.proxy`'s control
    protocol) within ``timeout_s`` with ``ok`` and an ``upstream``: a proxy
    without one refuses every client. Whether ``LAB_KAFKA_BOOTSTRAP`` really goes
    through it is up to the broker's advertised address, which only its
    deployment knows (``docker-compose.yml``'s ``PROXIED`` listener).

    Raises
    ------
    LabError
        One line naming ``LAB_KAFKA_PROXY`` and its value: a malformed address, no
        answer, an answer that is not a lab proxy's status, or a proxy with no upstream.
    """
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise LabError(f"bad LAB_KAFKA_PROXY {address!r}; valid form: host:port (a lab proxy's control port)")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        reply = proxy_mod.control(int(port), {"cmd": "status"}, timeout_s=timeout_s, host=host)
    except (OSError, ValueError) as e:
        reason = (e.strerror if isinstance(e, OSError) else None) or str(e) or type(e).__name__
        raise LabError(f"the lab proxy at LAB_KAFKA_PROXY={address!r} does not answer on its control port ({reason}); "
                       "start it (python -m lab.broker.proxy; in docker compose the kafka-proxy service), "
                       "or unset LAB_KAFKA_PROXY to run without ack-loss and broker-outage") from None
    if not isinstance(reply, dict) or not reply.get("ok") or "upstream" not in reply:
        raise LabError(f"LAB_KAFKA_PROXY={address!r} answered {json.dumps(reply)[:120]}, not a lab proxy's status; "
                       "point it at the --control port of python -m lab.broker.proxy")
    if not reply["upstream"]:
        raise LabError(f"the lab proxy at LAB_KAFKA_PROXY={address!r} has no upstream broker, so it refuses every "
                       "client; start it with --upstream HOST:PORT")
    return host, int(port)
