"""Is this interpreter one the lab supports? Run by the Makefile before a venv is made, with whatever ``$(PYTHON)`` is.

It must run on any Python 3 a user may have (Apple's 3.9, a 3.14), so it imports nothing of the lab, only the
standard library of old interpreters, and reads the range from ``pyproject.toml``'s ``requires-python``, the one
place it is written. Exit status 0 and no output when supported; else one line on stderr naming the interpreter
found, the range, and how to pick another, and exit status 1.

Usage: ``python3 lab/host/python_check.py [pyproject.toml]``.
"""

import re
import sys


def supported_range(pyproject_text):
    """``(low, high)`` as ``(major, minor)`` tuples from ``requires-python = ">=3.11,<3.14"`` (high exclusive).

    The two specifiers may come in either order (installed metadata writes ``<3.14,>=3.11``).
    """
    m = re.search(r'^requires-python\s*=\s*"([^"]*)"', pyproject_text, re.M)
    low = re.search(r">=\s*(\d+)\.(\d+)", m.group(1)) if m else None
    high = re.search(r"<\s*(\d+)\.(\d+)", m.group(1)) if m else None
    if low is None or high is None:
        raise ValueError('pyproject.toml: requires-python must read ">=X.Y,<X.Z"')
    return (int(low.group(1)), int(low.group(2))), (int(high.group(1)), int(high.group(2)))


def verdict(version, executable, low, high):
    """``None`` when ``version`` (``(major, minor, micro)``) is in ``[low, high)``, else the one line to print."""
    if low <= tuple(version[:2]) < high:
        return None
    last = (high[0], high[1] - 1)
    return (f"Python {version[0]}.{version[1]}.{version[2]} at {executable} is not supported: the lab needs "
            f"{low[0]}.{low[1]}-{last[0]}.{last[1]}; pick another with `make demo PYTHON=python{low[0]}.{low[1]}` (and "
            "`rm -rf .venv` if one was made with this one)")


def main(argv):
    path = argv[1] if len(argv) > 1 else "pyproject.toml"
    with open(path, encoding="utf-8") as f:
        low, high = supported_range(f.read())
    line = verdict(tuple(sys.version_info[:3]), sys.executable, low, high)
    if line is None:
        return 0
    sys.stderr.write(line + "\n")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
