"""A one-node Kafka data directory formatted once and copied for each new broker.

A new one-node broker's data directory used to be formatted by its own
``StorageTool`` JVM: 0.7 s on a quiet machine, 1.0-1.5 s while a standby
driver starts beside it, CPU taken from that driver each time. The format's
output does not depend on the run: every listener of :func:`lab.broker.apache.properties`
is on port 0, so the voter record of ``__cluster_metadata-0`` names
``CONTROLLER 127.0.0.1:0`` whatever the proxy's port (measured: two formats with
different proxy ports and the same cluster id differ only in ``directory.id``).

Protocol
--------
* The template is ``<cache>/kafka-format/<key>/kafka-data``, ``<cache>`` as in
  :mod:`lab.host.jars`, ``<key>`` hashed from the Kafka version and the node's
  properties (with placeholders for the path and port); it counts as there
  only with every file a format writes (:func:`complete`). It is formatted by
  :func:`lab.broker.apache.format_data_dir` (itself atomic: a staging directory
  renamed into place) under a lock file, so two brokers starting together make
  it once; the format's output goes to ``format.log`` beside it.
* :func:`copy_into` copies it to a staging sibling of the broker's data
  directory, gives the copy a new ``cluster.id`` (each broker stays a cluster of
  its own, as after its own format), and renames it into place: a broker never
  sees half a copy.
* ``LAB_KAFKA_FORMAT=each`` formats every data directory with its own JVM as
  before (the bench's "before"); the default is ``template``.

On failure: a template that cannot be made or read (a read-only cache, a
format that fails) raises nothing here; :func:`copy_into` returns False and
the caller formats the directory itself, which reports its own errors.

Delivery effect: none. The broker starts on the same files its own format
would have written, with the same single-voter quorum.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import uuid
from pathlib import Path

#: ``LAB_KAFKA_FORMAT``'s choices.
FORMAT_MODES = ("template", "each")


def format_mode() -> str:
    """``LAB_KAFKA_FORMAT``: ``template`` (default) or ``each``.

    Raises
    ------
    LabError
        For any other value, naming the choices.
    """
    from lab.errors import choices_error

    mode = os.environ.get("LAB_KAFKA_FORMAT", "").strip() or "template"
    if mode not in FORMAT_MODES:
        raise choices_error("LAB_KAFKA_FORMAT", mode, FORMAT_MODES)
    return mode


def template_dir(version: str, properties_text: str, cache: str | Path | None = None) -> Path:
    """Where the template for this Kafka version and these node properties is (or would be)."""
    from lab.host import jars

    key = hashlib.sha256(f"{version}\n{properties_text}".encode()).hexdigest()[:16]
    return Path(cache if cache is not None else jars.cache_dir()) / "kafka-format" / key / "kafka-data"


def complete(template: Path) -> bool:
    """Whether ``template`` holds every file a format writes (a partly cleaned cache is not a template).

    ``meta.properties`` and the metadata log's first checkpoint. Kafka 4.4.0's format writes no
    ``bootstrap.checkpoint`` (4.1.1's did): its bootstrap records are in that checkpoint.
    """
    return ((template / "meta.properties").is_file()
            and any((template / "__cluster_metadata-0").glob("*.checkpoint")))


def ensure_template(template: Path, format_into) -> bool:
    """Make ``template`` unless it exists: ``format_into(template)`` under a lock; True when it is there.

    ``format_into`` must create its directory atomically (as
    :func:`lab.broker.apache.format_data_dir` does).
    """
    if complete(template):
        return True
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        with open(template.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second broker waits and reuses the first one's template
            if not complete(template):
                if template.exists():  # partly cleaned: made again, never copied
                    shutil.rmtree(template)
                format_into(template)
    except Exception:  # an unwritable cache, a failed format: the caller formats its own directory
        return False
    return complete(template)


def copy_into(template: Path, data_dir: Path, cluster_id: str) -> bool:
    """Copy ``template`` to ``data_dir`` (absent) with ``cluster_id``; False when the template cannot be read."""
    staging = data_dir.with_name(f"{data_dir.name}.copying-{uuid.uuid4().hex[:8]}")
    try:
        shutil.copytree(template, staging)
        meta = staging / "meta.properties"
        text, found = re.subn(r"(?m)^cluster\.id=.*$", f"cluster.id={cluster_id}", meta.read_text())
        if found != 1:
            return False
        meta.write_text(text)
        os.rename(staging, data_dir)
        return True
    except (OSError, ValueError):  # ValueError: a meta.properties that is not text
        return False
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
