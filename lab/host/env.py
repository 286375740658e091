"""The ``LAB_*`` variables' parsers, and where runs go by default: one home for reading the environment.

Two families, each as its callers have always read it: :func:`number` and :func:`one_of` for the run's
settings (:func:`lab.config.make_config`: exact values), :func:`switch`, :func:`choice` and
:func:`milliseconds` for the start-up techniques (:class:`lab.tuning.StartTuning`: trimmed, lower case).
Each takes the environment as a mapping, so a caller can pass ``os.environ`` or a test's dict.
"""

from __future__ import annotations

import os
from pathlib import Path

from lab.errors import LabError, choices_error


def number(env, name: str, default: float) -> float:
    """The number ``name`` of ``env`` holds (``default`` when unset or empty).

    Raises
    ------
    LabError
        A value that is not a number, named.
    """
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise LabError(f"{name}={raw!r} is not a number") from None


def one_of(env, name: str, default: str, valid) -> str:
    """The variable ``name`` of ``env``, exactly one of ``valid`` (``default`` when unset or empty; no case folding).

    Raises
    ------
    LabError
        Any other value, named with the valid choices.
    """
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if raw not in valid:
        raise LabError(f"{name}={raw!r} is not valid; valid choices: {', '.join(sorted(valid))}")
    return raw


_SWITCH = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False, "no": False}


def switch(env, name: str, default: str = "on") -> bool:
    """The on/off variable ``name`` of ``env`` (``on``/``off``, also ``1``/``0``, ``true``/``false``, ``yes``/``no``).

    Raises
    ------
    LabError
        Any other value, named with ``on`` and ``off``.
    """
    value = env.get(name, default).strip().lower()
    if value not in _SWITCH:
        raise choices_error(name, value, ("on", "off"))
    return _SWITCH[value]


def milliseconds(env, name: str, default: int) -> int:
    """The whole number of milliseconds ``name`` of ``env`` holds (``default`` when unset).

    Raises
    ------
    LabError
        A value that is not a whole number from 0 to 60000, named.
    """
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 60_000:
        raise LabError(f"{name}={text!r}: expected a whole number of milliseconds from 0 to 60000")
    return value


def choice(env, name: str, default: str, choices) -> str:
    """The variable ``name`` of ``env``, one of ``choices`` (read as :func:`switch` reads: trimmed, lower case).

    Raises
    ------
    LabError
        Any other value, named with the choices.
    """
    value = env.get(name, default).strip().lower()
    if value not in choices:
        raise choices_error(name, value, choices)
    return value


def project_root() -> Path | None:
    """The checkout the lab runs from (notebooks run in ``notebooks/``), or ``None`` for an installed lab."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def default_runs_dir() -> str:
    """``runs/`` at the project root when the lab runs from its checkout, else ``./runs``."""
    root = project_root()
    return str(root / "runs") if root else "runs"


def env_runs_dir() -> str:
    """``LAB_RUNS_DIR``, else :func:`default_runs_dir`."""
    return os.environ.get("LAB_RUNS_DIR") or default_runs_dir()
