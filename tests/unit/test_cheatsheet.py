"""docs/cheatsheet.md, the learner's one page: short, and every call, setting and value it names is the lab's.

The contributor's tables (report keys, fault kinds, flags, ``LAB_*`` variables) are docs/reference-tables.md's,
checked by test_reference_tables.py.
"""

from __future__ import annotations

import dataclasses
import re

from lab.config import GROUP_OF, RunConfig
from lab.engines.kafka import COMMIT_MODES
from lab.engines.spark import OFFSET_STORES, RECEIVER_ACKS
from lab.flink.settings import CHECKPOINTING
from lab.kafka.producer_settings import ProducerSettings
from lab.queries import QUERIES
from lab.registry import PIPELINES
from lab.sinks.spec import SINK_MODES
from tests.conftest import ROOT

CHEATSHEET = ROOT / "docs" / "cheatsheet.md"
TEXT = CHEATSHEET.read_text()
#: One printed page, as ``wc -w`` counts (a table's ``|`` included).
WORDS_AT_MOST = 600
#: The values a setting's row may name: the lab's own choices for it.
VALUES = {"pipeline": set(PIPELINES), "sink": set(SINK_MODES), "commit": set(COMMIT_MODES),
          "offsets": set(OFFSET_STORES), "ack": set(RECEIVER_ACKS), "wal": {"on", "off"}, "query": set(QUERIES),
          "checkpointing": set(CHECKPOINTING)}


def setting_rows() -> dict[str, str]:
    """Each row of the settings table: the ``name=`` of its first cell (each of them) -> its second cell."""
    rows = {}
    for line in TEXT.splitlines():
        if line.startswith("| `") and "=`" in line.split("|")[1]:
            first, second = line.split("|")[1:3]
            for name in re.findall(r"`(\w+)=`", first):
                rows[name] = second
    return rows


def test_the_learner_sheet_is_one_page():
    n = len(TEXT.split())
    assert n <= WORDS_AT_MOST, (
        f"docs/cheatsheet.md has {n} words, over {WORDS_AT_MOST}: move the detail to reference-tables.md")


def test_every_setting_it_names_is_a_parameter_of_nb_config():
    known = set(RunConfig.core_fields()) | set(GROUP_OF) | {f.name for f in dataclasses.fields(ProducerSettings)}
    rows = setting_rows()
    assert {"pipeline", "sink", "faults"} <= set(rows), sorted(rows)
    assert not set(rows) - known, f"not parameters of nb.config: {sorted(set(rows) - known)}"


def test_every_value_it_lists_is_one_the_lab_accepts():
    for name, cell in setting_rows().items():
        if name in VALUES:
            listed = set(re.findall(r"`([\w-]+)`", cell))
            assert listed <= VALUES[name], (
                f"{name}=: {sorted(listed - VALUES[name])} are not among {sorted(VALUES[name])}")
    assert set(re.findall(r"`([\w-]+)`", setting_rows()["pipeline"])) == set(PIPELINES), "every pipeline"


def test_every_call_it_shows_is_the_notebooks():
    import lab.notebook as nb

    calls = set(re.findall(r"\bnb\.(\w+)\(", TEXT))
    assert {"run", "config", "show"} <= calls
    missing = sorted(c for c in calls if not callable(getattr(nb, c, None)))
    assert not missing, f"docs/cheatsheet.md shows nb calls lab.notebook does not have: {missing}"


def test_the_command_it_names_exists():
    from lab.cli import _parser

    sub = next(a for a in _parser()._actions if a.choices and isinstance(a.choices, dict))
    named = set(re.findall(r"`\.venv/bin/lab (\w+)", TEXT))
    assert named and named <= set(sub.choices), sorted(named - set(sub.choices))
