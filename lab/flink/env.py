"""The Flink environment: PyFlink in a virtual environment of its own, and Flink's Kafka connector.

Why its own
-----------
``apache-flink`` 2.2.1 pins ``pandas<2.3``, ``pyarrow<21`` and ``py4j==0.10.9.7``;
the lab pins pandas 2.3.3, pyarrow 26.0.1 and PySpark's py4j. One environment
cannot hold both, so the ``flink`` pipeline's job (:mod:`lab.flink.job`, PyFlink
and the standard library only) runs on this environment's Python, started by the
driver in the lab's environment (:mod:`lab.pipelines.flink`). Flink 2.2, not 2.3:
Flink's Kafka connector has no release for 2.3 (``flink-connector-kafka``
5.0.0-2.2 is for Flink 2.1 and 2.2).

Where
-----
``LAB_FLINK_ENV`` when set, else ``<cache>/flink/<version>-py<major.minor>``
(``<cache>``: :func:`lab.host.jars.cache_dir`), outside git, like the jars. Its
packages are pinned by ``lab/flink-requirements.txt`` (apache-flink 2.2.1 and the
closure pip resolved for it: 50 packages, 312 MB of wheels, of which
``apache-flink-libraries`` is the runtime's jars). ``.installed`` records the
requirements' digest and the Python version the environment was built for; any
change rebuilds it.

On which Python
---------------
apache-flink 2.2.1 has wheels for CPython 3.9-3.12 only (so do the apache-beam, pemja
and grpcio it pins), and the pins were resolved and tested on 3.11 and 3.12
(:data:`FLINK_PYTHONS`). The lab itself also runs on 3.13, so the environment is
built on the first of: ``LAB_FLINK_PYTHON``; the lab's own interpreter when it is
one of those; ``python3.12`` or ``python3.11`` on ``PATH``; pyenv's and uv's
interpreters of those versions (:func:`find_interpreter`). None found: one line
names what to install. A run uses an environment already built: the one for the
lab's own version, else the first one found for a version of ``FLINK_PYTHONS``.

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
import shutil
import subprocess
import sys
import time
from pathlib import Path

from lab.errors import LabError

FLINK_VERSION = "2.2.1"
#: The Pythons the Flink environment is built on: apache-flink 2.2.1's wheels stop at cp312 (PyPI, 2026-12).
FLINK_PYTHONS = ("3.11", "3.12")
REQUIREMENTS = Path(__file__).resolve().parent.parent / "flink-requirements.txt"
JAR_SET = "flink-kafka"
_PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _preferred() -> list[str]:
    """The versions of :data:`FLINK_PYTHONS`, the lab's own first when it is one of them."""
    return sorted(FLINK_PYTHONS, key=lambda v: (v != _PY, -FLINK_PYTHONS.index(v)))


def env_dir(py: str | None = None) -> Path:
    """Where the Flink environment for Python ``py`` lives (see the module docstring).

    ``py=None``: the one a run uses, the first already built in :func:`_preferred`'s order, else the first there.
    """
    override = os.environ.get("LAB_FLINK_ENV")
    if override:
        return Path(override).expanduser()
    from lab.host.jars import cache_dir

    base = cache_dir() / "flink"
    if py is None:
        built = [v for v in _preferred() if (base / f"{FLINK_VERSION}-py{v}" / "bin" / "python").exists()]
        py = (built or _preferred())[0]
    return base / f"{FLINK_VERSION}-py{py}"


def _version_of(python: str) -> str | None:
    """``"3.12"`` for the interpreter at ``python``, ``None`` when it does not run."""
    try:
        done = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _candidates() -> list[str]:
    """Interpreters to try, in order (see the module docstring); names on ``PATH`` or paths."""
    found = [sys.executable, *(f"python{v}" for v in reversed(FLINK_PYTHONS))]
    pyenv = Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser() / "versions"
    uv = Path(os.environ.get("UV_PYTHON_INSTALL_DIR", "~/.local/share/uv/python")).expanduser()
    for v in reversed(FLINK_PYTHONS):
        found += [str(p) for p in sorted(pyenv.glob(f"{v}.*/bin/python{v}"), reverse=True)]
        found += [str(p) for p in sorted(uv.glob(f"cpython-{v}.*/bin/python{v}"), reverse=True)]
    return found


def find_interpreter() -> tuple[str, str]:
    """``(path, "3.X")``: the Python to build the Flink environment on (see the module docstring).

    Raises
    ------
    LabError
        ``LAB_FLINK_PYTHON`` names no interpreter of :data:`FLINK_PYTHONS`, or none was found: one line naming what
        to install.
    """
    wanted = " or ".join(FLINK_PYTHONS)
    override = os.environ.get("LAB_FLINK_PYTHON")
    if override:
        found = _version_of(override)
        if found in FLINK_PYTHONS:
            return override, found
        raise LabError(f"LAB_FLINK_PYTHON={override} is {'Python ' + found if found else 'not a Python that runs'}: "
                       f"PyFlink {FLINK_VERSION} needs Python {wanted}")
    for name in _candidates():
        path = shutil.which(name) or (name if Path(name).exists() else None)
        found = _version_of(path) if path else None
        if found in FLINK_PYTHONS:
            return path, found
    raise LabError(f"PyFlink {FLINK_VERSION} needs Python {wanted} (apache-flink has no wheel for {_PY}), and none "
                   f"was found on PATH, in pyenv or in uv: install python3.12 (or 3.11), or name one: "
                   f"LAB_FLINK_PYTHON=/path/to/python3.12 make flink")


def python_path(py: str | None = None) -> Path:
    """The Flink environment's Python (``py``: as :func:`env_dir`)."""
    return env_dir(py) / "bin" / "python"


def _stamp(py: str) -> dict:
    # The pins only: a comment changed in the requirements file does not rebuild the environment (35-55 s, online).
    pins = "\n".join(line.split("#")[0].strip() for line in REQUIREMENTS.read_text().splitlines()
                     if line.split("#")[0].strip())
    return {"requirements": hashlib.sha1(pins.encode()).hexdigest(), "python": py, "flink": FLINK_VERSION}


def _stamp_text(py: str) -> str:
    return json.dumps(_stamp(py), sort_keys=True)


def env_problem(py: str | None = None) -> str | None:
    """Why the Flink environment (``py``: as :func:`env_dir`) cannot be used as it is (``None``: it can)."""
    where, stamp = env_dir(py), env_dir(py) / ".installed"
    if not python_path(py).exists():
        return f"no Flink environment at {where}"
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):
        recorded = {}
    if {k: v for k, v in recorded.items() if k != "python"} != {k: v for k, v in _stamp("").items() if k != "python"}:
        return f"the Flink environment at {where} was built for other pins (lab/flink-requirements.txt changed)"
    if recorded.get("python") not in FLINK_PYTHONS:
        return (f"the Flink environment at {where} was built on Python {recorded.get('python')}, not "
                f"{' or '.join(FLINK_PYTHONS)}")
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

    if env_problem():
        interpreter, py = find_interpreter()
        target = env_dir(py)
        began = time.monotonic()
        progress(f"flink: creating {target} on {interpreter} (Python {py}; apache-flink {FLINK_VERSION}, about 310 MB "
                 "of wheels; once)")
        (target / ".installed").unlink(missing_ok=True)
        if not python_path(py).exists():
            _run([interpreter, "-m", "venv", str(target)], "create the virtual environment")
        _run([str(python_path(py)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              "-r", str(REQUIREMENTS), "-c", str(REQUIREMENTS)], "install lab/flink-requirements.txt")
        (target / ".installed").write_text(_stamp_text(py))
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
