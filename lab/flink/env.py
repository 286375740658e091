"""The Flink environment: PyFlink in a virtual environment of its own, and Flink's Kafka connector.

Why its own
-----------
``apache-flink`` 2.2.0 pins ``pandas<2.3``, ``pyarrow<21`` and ``py4j==0.10.9.7``;
the lab pins pandas 2.3.3, pyarrow 21.0.0 and PySpark's py4j. One environment
cannot hold both, so the ``flink`` pipeline's job (:mod:`lab.flink.job`, PyFlink
and the standard library only) runs on this environment's Python, started by the
driver in the lab's environment (:mod:`lab.pipelines.flink`). Flink 2.2, not 2.3:
Flink's Kafka connector has no release for 2.3 (``flink-connector-kafka``
5.0.0-2.2 is for Flink 2.1 and 2.2).

Where
-----
``LAB_FLINK_ENV`` when set, else ``<cache>/flink/<version>-py<major.minor>``
(``<cache>``: :func:`lab.host.jars.cache_dir`), outside git, like the jars. Its
packages are pinned by ``lab/flink-requirements.txt`` (apache-flink 2.2.0 and the
closure pip resolved for it: 50 packages, 312 MB of wheels, of which
``apache-flink-libraries`` is the runtime's jars). ``.installed`` records the
requirements' digest and the Python version the environment was built for; any
change rebuilds it.

The connector is the jar set ``flink-kafka`` of :mod:`lab.host.jars`
(``flink-sql-connector-kafka`` 5.0.0-2.2: one jar with Kafka's client shaded in).

Building it
-----------
``make flink`` (or ``python -m lab.flink.env``): creates the environment and
fetches the connector; both are reused offline afterwards. A run of the ``flink``
pipeline builds neither: its supervisor checks both before any process starts
(:func:`check_ready`) and names ``make flink`` when something is missing.
Measured: 55 s for the environment from PyPI on this machine (wheels downloaded
at about 45 MB/s), 15 s from pip's cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lab.errors import LabError

FLINK_VERSION = "2.2.0"
REQUIREMENTS = Path(__file__).resolve().parent.parent / "flink-requirements.txt"
JAR_SET = "flink-kafka"
_PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def env_dir() -> Path:
    """Where the Flink environment lives (see the module docstring)."""
    override = os.environ.get("LAB_FLINK_ENV")
    if override:
        return Path(override).expanduser()
    from lab.host.jars import cache_dir

    return cache_dir() / "flink" / f"{FLINK_VERSION}-py{_PY}"


def python_path() -> Path:
    """The Flink environment's Python."""
    return env_dir() / "bin" / "python"


def _stamp_text() -> str:
    # The pins only: a comment changed in the requirements file does not rebuild the environment (35-55 s, online).
    pins = "\n".join(line.split("#")[0].strip() for line in REQUIREMENTS.read_text().splitlines() if line.split("#")[0].strip())
    return json.dumps({"requirements": hashlib.sha1(pins.encode()).hexdigest(), "python": _PY,
                       "flink": FLINK_VERSION}, sort_keys=True)


def env_problem() -> str | None:
    """Why the Flink environment cannot be used as it is (``None``: it can)."""
    stamp = env_dir() / ".installed"
    if not python_path().exists():
        return f"no Flink environment at {env_dir()}"
    if not stamp.exists() or stamp.read_text() != _stamp_text():
        return f"the Flink environment at {env_dir()} was built for other pins (lab/flink-requirements.txt changed)"
    return None


def problems() -> list[str]:
    """What keeps the flink pipeline from starting: the environment's and the connector's problems (none: ready).

    Never uses the network and builds nothing.
    """
    from lab.host import jars

    found = []
    why = env_problem()
    if why:
        found.append(why)
    missing = jars.missing(JAR_SET)
    if missing:
        found.append(f"Flink's Kafka connector is not in the jar cache ({missing[0].coord})")
    return found


def check_ready() -> None:
    """Raise :class:`LabError` unless the environment and the connector are both ready (no network, no build).

    The message names what is missing and the command that makes it.
    """
    found = problems()
    if found:
        raise LabError("the flink pipeline needs PyFlink and its Kafka connector: " + "; ".join(found)
                       + ". Make them once, online: make flink (or python -m lab.flink.env)")


def ensure(progress=lambda line: print(line, file=sys.stderr, flush=True)) -> Path:
    """Create or update the environment, then fetch the connector; return the environment's Python.

    Idempotent: a ready environment costs one file read. A failed install leaves
    no ``.installed``, so the next call starts again.

    Raises
    ------
    LabError
        When pip fails (the last lines of its output, and what to check), or the
        connector cannot be fetched (:func:`lab.host.jars.ensure`).
    """
    from lab.host import jars

    target = env_dir()
    if env_problem():
        began = time.monotonic()
        progress(f"flink: creating {target} (apache-flink {FLINK_VERSION}, about 310 MB of wheels; once)")
        (target / ".installed").unlink(missing_ok=True)
        if not python_path().exists():
            _run([sys.executable, "-m", "venv", str(target)], "create the virtual environment")
        _run([str(python_path()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              "-r", str(REQUIREMENTS), "-c", str(REQUIREMENTS)], "install lab/flink-requirements.txt")
        (target / ".installed").write_text(_stamp_text())
        progress(f"flink: environment ready in {time.monotonic() - began:.0f} s")
    jars.ensure(JAR_SET)
    return python_path()


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise LabError(f"flink: could not {what} ({' '.join(cmd[:4])} ... exited {done.returncode}): {tail}. "
                       "It needs PyPI (or PIP_INDEX_URL / PIP_FIND_LINKS with the pinned wheels)")


def main() -> int:
    try:
        python = ensure()
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"flink: {python} and the connector ({JAR_SET}) are ready")
    return 0


if __name__ == "__main__":
    sys.exit(main())
