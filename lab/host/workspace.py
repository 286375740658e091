"""The learner's workspace: copies of the lab's notebooks, so that a session never changes the lab's own files.

``make lab`` serves ``workspace/`` (git ignores it), not ``notebooks/``: outputs,
widget state, edits and ``.ipynb_checkpoints/`` land in the copies, and a
``git pull`` that updates ``notebooks/`` never meets a conflict.

Protocol (:func:`plan`, pure; :func:`sync`, its I/O): the manifest
``workspace/.lab-copies.json`` holds, for each copy, the SHA-256 of the original
it was copied from. At each start:

* an original without a copy is copied (``new``);
* a copy still byte-identical to what was copied, whose original has changed
  since, is replaced by the new original (``updated``): nothing of the learner's is in it;
* a copy the learner changed, whose original has changed since, is kept as it
  is (``kept``), and the start says so with the way to take the new one;
* a copy the learner deleted is copied again; a file the learner made is never touched.

Nothing a learner wrote is ever overwritten or deleted.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from lab.host.atomic_file import write_atomic

MANIFEST = ".lab-copies.json"


@dataclass(frozen=True)
class Plan:
    """What :func:`sync` does, by relative path (``00_start_here.ipynb``, ``solutions/02_direct_kafka.ipynb``)."""

    new: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def plan(originals: dict[str, str], copies: dict[str, str], copied_from: dict[str, str]) -> Plan:
    """Decide each original's fate from digests alone.

    Parameters
    ----------
    originals : dict
        ``{relative path: sha256}`` of the lab's notebooks now.
    copies : dict
        ``{relative path: sha256}`` of the workspace's files of the same names now.
    copied_from : dict
        The manifest: ``{relative path: sha256 of the original when it was copied}``.
    """
    p = Plan()
    for rel, digest in sorted(originals.items()):
        if rel not in copies:
            p.new.append(rel)
        elif copied_from.get(rel) == digest or copies[rel] == digest:
            p.unchanged.append(rel)
        elif copies[rel] == copied_from.get(rel):
            p.updated.append(rel)
        else:
            p.kept.append(rel)
    return p


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def originals_of(notebooks: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every notebook under ``notebooks`` (its ``solutions/`` included)."""
    return {p.relative_to(notebooks).as_posix(): _digest(p) for p in sorted(notebooks.rglob("*.ipynb"))
            if ".ipynb_checkpoints" not in p.parts}


def sync(notebooks: Path, workspace: Path) -> Plan:
    """Bring ``workspace`` up to the lab's ``notebooks`` as :func:`plan` decides; return the plan carried out."""
    workspace.mkdir(parents=True, exist_ok=True)
    originals = originals_of(notebooks)
    copies = {rel: _digest(workspace / rel) for rel in originals if (workspace / rel).is_file()}
    manifest_path = workspace / MANIFEST
    try:
        copied_from = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        copied_from = {}
    todo = plan(originals, copies, copied_from)
    for rel in todo.new + todo.updated:
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(notebooks / rel, workspace / rel)
        copied_from[rel] = originals[rel]
    for rel in todo.unchanged:
        if copies[rel] == originals[rel]:
            copied_from[rel] = originals[rel]
    write_atomic(manifest_path, json.dumps(copied_from, indent=1, sort_keys=True) + "\n")
    return todo


def describe(p: Plan, workspace: Path) -> list[str]:
    """One line per thing the learner should know about a sync (nothing when nothing changed)."""
    lines = []
    if p.new:
        lines.append(f"copied {len(p.new)} notebook(s) of the lab into {workspace}")
    if p.updated:
        lines.append(f"updated {len(p.updated)} unchanged copies to the lab's new version: {', '.join(p.updated)}")
    for rel in p.kept:
        lines.append(f"{workspace / rel}: the lab's version changed since you copied it; yours is kept as it is. "
                     f"For the new one, rename yours and start again")
    return lines
