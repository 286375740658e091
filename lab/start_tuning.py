"""How a Spark driver starts: the start-up techniques, each one switchable for the bench's before/after pairs.

None of them changes what a run delivers: they decide how fast a driver
JVM comes up, not what it reads, writes or commits. ``bench/startup.py``
measures each one off and on in the same run (``bench/results/startup.json``).

``LAB_CLASS_ARCHIVE``       ``on`` (default) / ``off``: the driver JVM maps its classes
                            from the archive :mod:`lab.class_archive` builds once.
``LAB_DRIVER_JVM_OPTIONS``  the driver JVM's flags (default :data:`DRIVER_JVM_OPTIONS`;
                            empty for the JVM's own defaults).
``LAB_WARM_UP``             ``beside`` (default): Python workers start while the driver
                            plans its first batch; ``before``: the driver waits for them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lab.errors import choices_error

#: Only the client compiler (C1): a driver lives seconds to minutes on 2 cores, and C2's compiling
#: competes with the start for them (measured, bench/startup.py, restarted structured driver to first
#: batch done, medians of 3: 11.0 s → 9.0 s).
DRIVER_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
WARM_UPS = ("beside", "before")
#: The environment that turns every technique off, the restart delay included (``LAB_RESTART_DELAY``,
#: :mod:`lab.config`): how a driver started before them, the benches' "before".
ALL_OFF = {"LAB_CLASS_ARCHIVE": "off", "LAB_DRIVER_JVM_OPTIONS": "", "LAB_WARM_UP": "before", "LAB_RESTART_DELAY": "1"}
_SWITCH = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False, "no": False}


@dataclass(frozen=True)
class StartTuning:
    """The start-up techniques a driver uses (see the module docstring)."""

    class_archive: bool = True
    jvm_options: str = DRIVER_JVM_OPTIONS
    warm_up: str = "beside"

    @classmethod
    def from_env(cls, env=None) -> "StartTuning":
        """Read ``LAB_CLASS_ARCHIVE``, ``LAB_DRIVER_JVM_OPTIONS`` and ``LAB_WARM_UP``.

        Raises
        ------
        LabError
            A value outside its choices, named with them.
        """
        env = os.environ if env is None else env
        archive = env.get("LAB_CLASS_ARCHIVE", "on").strip().lower()
        if archive not in _SWITCH:
            raise choices_error("LAB_CLASS_ARCHIVE", archive, ("on", "off"))
        warm = env.get("LAB_WARM_UP", "beside").strip().lower()
        if warm not in WARM_UPS:
            raise choices_error("LAB_WARM_UP", warm, WARM_UPS)
        return cls(class_archive=_SWITCH[archive], jvm_options=env.get("LAB_DRIVER_JVM_OPTIONS", DRIVER_JVM_OPTIONS),
                   warm_up=warm)
