"""The one exception type users see."""


class LabError(Exception):
    """A problem the user can fix, described in one line.

    The message names the bad value and, where there is a fixed set, the valid
    choices. The CLI prints it as ``error: <message>`` and exits with status 2.
    """


class DriverConfigError(LabError):
    """A setting a driver finds unusable once it runs (e.g. a missing jar): restarting it cannot help.

    The driver exits with :data:`DRIVER_CONFIG_EXIT` and the message as its
    last log line; the supervisor then ends the run with this message instead
    of restarting the driver.
    """


#: The driver's exit status for a :class:`DriverConfigError` (EX_CONFIG of sysexits.h).
DRIVER_CONFIG_EXIT = 78


def choices_error(what: str, value: object, valid) -> LabError:
    """Build the standard "unknown X" error naming the value and the valid choices."""
    return LabError(f"unknown {what} {value!r}; valid choices: {', '.join(sorted(valid))}")
