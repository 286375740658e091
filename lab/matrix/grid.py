"""A matrix's grid: the scenarios a grid file lists, each a run's parameters, a seed and an expectation.

Grid format: see :mod:`lab.matrix.runner`. Reading a grid validates every
scenario with :func:`lab.config.make_config`, so a bad row is one line before
any run starts.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from lab.audit.expectations import EXPECTATIONS
from lab.config import make_config
from lab.errors import LabError, choices_error

#: The package's templates: the scenario notebook and the grids that ship with the lab.
TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@dataclass(frozen=True)
class Scenario:
    """One cell of the matrix: parameters for :func:`lab.config.make_config`, a seed, an expectation."""

    name: str
    params: dict
    seed: int
    expect: str
    notebook: str = ""  # the notebook where the scenario runs ("01"), for notebook 04's questions

    @property
    def key(self) -> str:
        blob = json.dumps({"params": self.params, "seed": self.seed}, sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()[:12]


@dataclass
class Grid:
    scenarios: list[Scenario] = field(default_factory=list)


def load_grid(path: str | Path | None) -> Grid:
    """Read a grid file (``None``: the default grid that covers the expected-outcomes table).

    Raises
    ------
    LabError
        On an unreadable file, an unknown expectation or a bad scenario (each
        scenario is validated with :func:`lab.config.make_config` before anything runs).
    """
    if path is None:
        path = TEMPLATES / "default_grid.yaml"
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise LabError(f"cannot read grid {str(path)!r}: {e.strerror}") from None
    try:
        import yaml

        data = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
    except Exception as e:
        raise LabError(f"grid {str(path)!r} is not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'}: "
                       f"{e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list):
        raise LabError(f"grid {str(path)!r} needs a 'scenarios' list")
    defaults = data.get("defaults") or {}
    seeds = data.get("seeds") or [1]
    grid = Grid()
    for i, row in enumerate(data["scenarios"]):
        params = {**defaults, **(row.get("params") or {})}
        expect = row.get("expect")
        if expect not in EXPECTATIONS:
            raise choices_error(f"expectation in scenario {i + 1} ({row.get('name', '?')}):", expect, EXPECTATIONS)
        try:
            make_config(**{**params, "seed": seeds[0]})
        except LabError as e:
            raise LabError(f"scenario {i + 1} ({row.get('name', '?')}): {e}") from None
        for seed in row.get("seeds") or seeds:
            grid.scenarios.append(Scenario(name=row.get("name") or f"scenario {i + 1}", params=params,
                                           seed=int(seed), expect=expect, notebook=str(row.get("notebook") or "")))
    return grid
