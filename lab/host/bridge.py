"""A JVM the driver runs and talks to over its standard streams: the storm topology's and the samza job's bridge.

Protocol: the JVM writes ``@lab {json}`` lines on its standard output, and nothing
else (it logs to standard error, the attempt's log file); the driver answers on the
JVM's standard input, one line per question, as the pipeline's protocol says. The
JVM is started in the driver's process group, so a driver crash (one ``killpg``)
ends it too, and it dies with the driver when the driver dies alone
(``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import json
import re
import selectors
import subprocess
from pathlib import Path

from lab.errors import LabError
from lab.host import processes
from lab.host.java import find_java

PREFIX = "@lab "
#: A log4j line's start (``18:30:32.341 ERROR ...``, the lab's pattern): where one message ends and the next begins.
_STAMPED = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} ")


def first_error(log_path: Path) -> str:
    """What a JVM's log says went wrong first: its first ERROR message and the deepest cause in the trace under it.

    Storm's halt on a dead executor (``Utils.exitProcess``) logs its own trace last, so the log's last line
    names only the halt; the first ERROR names the executor's exception. Falls back to the last line.
    """
    try:
        lines = Path(log_path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    for i, line in enumerate(lines):
        if " ERROR " not in line:
            continue
        trace = []
        for below in lines[i + 1:]:
            if _STAMPED.match(below):
                break
            trace.append(below.strip())
        causes = [t for t in trace if t.startswith("Caused by: ")]
        head = [t for t in trace if t and not t.startswith("at ") and not t.startswith("...")]
        cause = causes[-1] if causes else (head[0] if head else "")
        return (line.strip() + (f"; {cause}" if cause else ""))[:400]
    return processes.last_log_line(log_path)


class JvmBridge:
    """One JVM and its two streams.

    Parameters
    ----------
    what : str
        What the JVM is, for messages (``the Storm topology``).
    args : list of str
        JVM flags, ``-cp CLASSPATH``, the main class and its arguments (``java`` is found here).
    log_path : Path
        Where its standard error goes (appended).
    cwd : Path
    """

    def __init__(self, what: str, args: list[str], log_path: Path, cwd: Path) -> None:
        self.what, self.log_path = what, log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([find_java().executable, *map(str, args)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, cwd=cwd,
                                         preexec_fn=processes.kill_when_parent_exits)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)
        self._buffer = b""

    def message(self, timeout: float) -> dict | None:
        """The JVM's next ``@lab`` message, or None when none came within ``timeout`` seconds.

        Raises
        ------
        LabError
            When the JVM has ended (its log's last line).
        """
        while True:
            line, sep, rest = self._buffer.partition(b"\n")
            if sep:
                self._buffer = rest
                text = line.decode(errors="replace")
                if text.startswith(PREFIX):
                    return json.loads(text[len(PREFIX):])
                continue  # nothing else is printed there; a stray line is not the protocol
            if not self._selector.select(timeout):
                return None
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                raise LabError(f"{self.what}'s JVM exited with status {self.proc.wait()}: {first_error(self.log_path)}")
            self._buffer += chunk

    def answer(self, reply: dict | str) -> None:
        """One line to the JVM: ``reply`` as JSON, or as it is when it is text."""
        text = reply if isinstance(reply, str) else json.dumps(reply)
        self.proc.stdin.write((text + "\n").encode())
        self.proc.stdin.flush()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the JVM (its state that matters is in Kafka, ZooKeeper and the sink) and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
