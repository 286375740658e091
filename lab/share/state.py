"""A share group's start offsets, lag and end offsets, read by ``LabShareState`` (:mod:`lab.share.build`) in a JVM of
its own.

:func:`state_reader` starts one that says them every interval (the share driver's progress);
:func:`group_state` asks once (the final audit). Delivery effect: none; they only read.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from lab.errors import LabError
from lab.host.bridge import JvmBridge
from lab.share.build import STATE

#: The reader's JVM: a small heap and the client compiler (it makes one request a second).
JVM_FLAGS = ["-Xmx64m", "-XX:TieredStopAtLevel=1"]
#: Seconds a one-shot read may take (measured: about 1 s on 2 cores).
READ_TIMEOUT_S = 30.0


def settled(message: dict) -> dict[int, int]:
    """Per partition, how far the group is done: the end offset less the lag (the start offset without a lag).

    Every record of the partition is acknowledged or archived once this is its end offset. Below it, the count
    is exact but not the place: the lag's records may sit anywhere above the start offset.
    """
    start, lag, end = (message.get(k) or {} for k in ("start", "lag", "end"))
    return {int(p): max(int(o), int(end[p]) - int(lag[p])) if p in lag and p in end else int(o)
            for p, o in start.items()}


def state_reader(bootstrap: str, group: str, log_path: Path, interval_ms: int | None = None) -> JvmBridge:
    """Start ``LabShareState``: one ``state`` message, then one every ``interval_ms`` when given."""
    args = [*JVM_FLAGS, "-cp", STATE.ensure(), STATE.main_class, bootstrap, group]
    if interval_ms:
        args.append(str(interval_ms))
    return JvmBridge("the share group's state reader", args, log_path, cwd=log_path.parent)


def group_state(bootstrap: str, group: str) -> dict[int, int]:
    """How far the share group is done per partition now (:func:`settled`; partitions it never read are absent).

    Raises
    ------
    LabError
        When the reader fails (its log's first error) or says nothing within :data:`READ_TIMEOUT_S`.
    """
    with tempfile.TemporaryDirectory(prefix="lab-share-state-") as tmp:
        bridge = state_reader(bootstrap, group, Path(tmp) / "state.log")
        try:
            deadline = time.monotonic() + READ_TIMEOUT_S
            while time.monotonic() < deadline:
                m = bridge.message(timeout=1.0)
                if m and m.get("op") == "state":
                    return settled(m)
            raise LabError(f"the share group's state reader said nothing within {READ_TIMEOUT_S:g} s ({group})")
        finally:
            bridge.kill()
