"""Pipeline drivers. Each runs in its own OS process, started by the supervisor."""
