"""The one exception type users see."""


class LabError(Exception):
    """A problem the user can fix, described in one line.

    The message names the bad value and, where there is a fixed set, the valid
    choices. The CLI prints it as ``error: <message>`` and exits with status 2.
    """


def choices_error(what: str, value: object, valid) -> LabError:
    """Build the standard "unknown X" error naming the value and the valid choices."""
    return LabError(f"unknown {what} {value!r}; valid choices: {', '.join(sorted(valid))}")
