"""Whether Spark's socket receiver reaches its feeder: one line within seconds instead of a silent wait.

Spark's ``SocketReceiver`` connects to the feeder from an executor, which in the
compose stack is another container: with the wrong address (the driver's
``127.0.0.1`` there) every connection is refused and Spark restarts the receiver
every 2 s, forever; the run then waited for its deadline (4 min, measured in the
stack). A connection to an address that drops packets is not even refused.

The decision uses two facts the driver sees, never a clock alone: Spark reported
the receiver *started* on its executor (``onReceiverStarted``; its connection is
then a local socket call away), and the feeder has *accepted* no connection since.
:data:`REACH_LIMIT_S` after the first start without an accept, the receiver cannot
reach the feeder; the last error Spark reported says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Seconds from Spark's report that the receiver started to the feeder's first accept, at most. A reachable
#: feeder accepts within milliseconds of the receiver's start, on a loaded machine too; with 6 s the run ends
#: within 10 s of the receiver's start.
REACH_LIMIT_S = 6.0


@dataclass
class Reach:
    """The receiver's start and errors as Spark reports them, for one driver attempt."""

    started_at: float | None = None
    errors: list[str] = field(default_factory=list)

    def receiver_started(self, now: float) -> None:
        if self.started_at is None:
            self.started_at = now

    def receiver_error(self, message: str) -> None:
        self.errors.append(message)

    def unreached(self, accepted: int, now: float) -> str | None:
        """Why the receiver has not reached the feeder, once that is certain; ``None`` while it may still.

        ``accepted``: connections the feeder has accepted in this attempt.
        """
        if accepted or self.started_at is None or now - self.started_at < REACH_LIMIT_S:
            return None
        last = self.errors[-1] if self.errors else "no connection accepted and no error reported"
        return f"{last} ({len(self.errors)} receiver error(s) in {now - self.started_at:.0f} s)"


def unreachable_message(address: str, port: int, why: str) -> str:
    """The driver's one line: the address tried, why, and the setting that decides it."""
    return (f"Spark's receiver cannot reach its feeder at {address}:{port}: {why}; executors reach the driver "
            "by LAB_SPARK_DRIVER_HOST (unset: 127.0.0.1, right only when they run on the same machine)")
