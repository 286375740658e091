"""The machine a bench's figures were measured on, recorded beside them in ``bench/results``."""

from __future__ import annotations

import os
import platform


def machine() -> dict:
    """Cores, Python, platform and the load average when the figures were taken (a loaded machine explains slow ones)."""
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "load_average": [round(x, 2) for x in os.getloadavg()]}
