"""bench/results/ holds today's benchmarks only: each file cited by bench/README.md's table, each saying how it was
made.

A results file no row of the table cites is an experiment whose conclusion belongs in the README's "Past experiments"
(git keeps the file); a row citing a file that is not there quotes a figure nobody can check. Each kept file records
the command that made it (``command``) and that command's exit status (``exit_status``). Pure: reads files only.
"""

from __future__ import annotations

import json
import re

from tests.conftest import ROOT

BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
HEADER = ["benchmark", "command", "what it measures", "current figure", "results file"]
#: A results file as the table's last column names it: ``name.json`` in backticks ("none" names none).
CITED = re.compile(r"`([\w.-]+\.json)`")


def cells(line: str) -> list[str]:
    """A Markdown table row's cells, stripped (a ``|`` inside backticks stays in its cell)."""
    parts, cell, code = [], "", False
    for ch in line.strip().strip("|"):
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            parts.append(cell.strip())
            cell = ""
        else:
            cell += ch
    return [*parts, cell.strip()]


def table_rows(text: str) -> list[list[str]]:
    """The rows of the README's table of benchmarks (the one whose header is :data:`HEADER`), header and rule left
    out."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|") and cells(line) == HEADER), None)
    assert start is not None, f"bench/README.md has no table headed {' | '.join(HEADER)}"
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(cells(line))
    return rows


def cited_files(text: str) -> dict[str, list[str]]:
    """Each results file the table cites, with the benchmarks (first column) that cite it."""
    cited: dict[str, list[str]] = {}
    for row in table_rows(text):
        assert len(row) == len(HEADER), f"bench/README.md: a row of {len(row)} cells, not {len(HEADER)}: {row}"
        for name in CITED.findall(row[-1]):
            cited.setdefault(name, []).append(row[0])
    return cited


def readme_cited() -> dict[str, list[str]]:
    return cited_files((BENCH / "README.md").read_text())


def test_the_table_is_read_from_its_rows_only():
    text = """Prose naming `other.json`.

| benchmark | command | what it measures | current figure | results file |
|---|---|---|---|---|
| `a.py` | `bench/a.py --x 'a|b'` | one thing | 1 vs 2 s | `a.json` |
| `b.py` | `bench/b.py` | another | not recorded | none |

## Past experiments

- `old.json`: 3 vs 4 s.
"""
    assert cited_files(text) == {"a.json": ["`a.py`"]}


def test_every_results_file_is_cited_by_the_table():
    cited = readme_cited()
    uncited = sorted(p.name for p in RESULTS.iterdir() if p.is_file() and p.name not in cited)
    assert not uncited, (f"bench/results/ files no row of bench/README.md's table cites: {uncited}; cite each in its "
                         "benchmark's row, or put its conclusion under Past experiments and git rm it")


def test_every_cited_results_file_is_there():
    missing = sorted(f"{name} (cited by {', '.join(rows)})" for name, rows in readme_cited().items()
                     if not (RESULTS / name).is_file())
    assert not missing, f"bench/README.md's table cites results files that are not in bench/results/: {missing}"


def test_each_benchmark_cites_one_results_file_at_most():
    per_row = {row[0]: CITED.findall(row[-1]) for row in table_rows((BENCH / "README.md").read_text())}
    several = {bench: names for bench, names in per_row.items() if len(set(names)) > 1}
    assert not several, f"bench/README.md: one results file a benchmark (today's), not {several}"


def test_every_kept_result_records_its_command_and_exit_status():
    lacking = []
    for name in sorted(readme_cited()):
        path = RESULTS / name
        if not path.is_file():
            continue  # reported by test_every_cited_results_file_is_there
        record = json.loads(path.read_text())
        missing = [key for key in ("command", "exit_status")
                   if not isinstance(record, dict) or record.get(key) in (None, "", [])]
        if missing or not isinstance(record.get("exit_status"), int):
            lacking.append(f"{name}: {', '.join(missing) or 'exit_status not an integer'}")
    assert not lacking, f"results files without the command that made them or its exit status: {lacking}"
