"""A figure the learner reads is the figure its file holds: each quoted measurement names its source, and agrees.

A talk track that says "lost about 300 (`matrix.csv`)" after the matrix was measured again says something the
cited file no longer holds. So a figure quoted from a committed file carries a marker right after it, which
Markdown and Jupyter do not show::

    the reliable one lost 1000 <!-- from: docs/reference/matrix.csv key=f506fd3e29e2 col=lost --> of 3000
    measured 975 duplicated <!-- from: docs/reference/00_start_here.html re="(\\d+) duplicated, \\d+ lost" -->
    about 13 minutes <!-- from: bench/results/matrix_defaults.json path=minutes -->

``key=``/``col=`` reads a CSV row by its ``key``; ``path=`` a JSON value by its dotted path; ``re=`` the first
group of a regular expression over a file's text (a reference page's text as a reader sees it). The number just
before the marker must equal the value; after "about", it must round to it (within 10%). A version (``4.4.0``)
must equal it. Rebuilding a page or the matrix then fails here wherever the prose still quotes the old figure.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.unit.test_reference import REFERENCE, page_text

#: Where learners and facilitators read figures.
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "notebooks").glob("*.ipynb"))]
MARKER = re.compile(r"<!-- from: (?P<file>\S+) (?P<how>key=\S+ col=\S+|path=\S+|re=\"(?P<re>(?:[^\"\\]|\\.)*)\") -->")
NUMBER = re.compile(r"(\d+(?:\.\d+)*)\D*$")


def _text(path: Path) -> str:
    if path.suffix == ".ipynb":
        return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
    return path.read_text()


def resolve(file: str, how: str) -> str:
    """The value a marker names, as text."""
    path = ROOT / file
    assert path.is_file(), f"the marker names {file}, which is not there"
    if how.startswith("key="):
        key, col = re.match(r"key=(\S+) col=(\S+)", how).groups()
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["key"] == key]
        assert len(rows) == 1, f"{file} has {len(rows)} rows with key {key}"
        return rows[0][col]
    if how.startswith("path="):
        value = json.loads(path.read_text())
        for part in how[len("path="):].split("."):
            value = value[int(part)] if isinstance(value, list) else value[part]
        return str(value)
    pattern = re.match(r're="(.*)"$', how).group(1).replace('\\"', '"')
    text = page_text(str(path.relative_to(REFERENCE))) if path.suffix == ".html" else path.read_text()
    found = re.search(pattern, text)
    assert found, f"{file} holds nothing matching {pattern!r}"
    return found.group(1)


def agrees(before: str, value: str) -> tuple[bool, str]:
    """Whether the figure that ends ``before`` is ``value`` (rounded, after "about"); the figure as quoted."""
    found = NUMBER.search(before)
    if not found:
        return False, "(no number before the marker)"
    quoted = found.group(1)
    if quoted.count(".") > 1 or value.count(".") > 1:  # a version
        return quoted == value, quoted
    q, v = float(quoted), float(value)
    if re.search(r"\babout\s+\S*$", before[: found.start()]):
        return abs(q - v) <= max(0.1 * abs(v), 0.5 * 10 ** -len(quoted.partition(".")[2])), quoted
    return q == v, quoted


def markers() -> list[tuple[str, int, str, str, str]]:
    """``(document, line, text before the marker on its line, file, how)`` for every marker."""
    found = []
    for doc in DOCUMENTS:
        for n, line in enumerate(_text(doc).splitlines(), 1):
            for m in MARKER.finditer(line):
                before = MARKER.sub("", line[: m.start()])
                found.append((str(doc.relative_to(ROOT)), n, before, m.group("file"), m.group("how")))
    return found


def test_every_marked_figure_agrees_with_its_file():
    wrong = []
    for doc, line, before, file, how in markers():
        ok, quoted = agrees(before, resolve(file, how))
        if not ok:
            wrong.append(f"{doc}:{line}: {quoted} where {file} ({how}) holds {resolve(file, how)}")
    assert markers(), "no figure is marked"
    assert not wrong, "a quoted figure disagrees with its file:\n" + "\n".join(wrong)


@pytest.mark.parametrize("before, value, ok", [
    ("lost 1000", "1000", True), ("lost 300", "1000", False), ("lost about 640", "682", True),
    ("lost about 300", "1000", False), ("about 13 minutes", "12.62", True), ("Kafka 4.4.0", "4.4.0", True),
    ("Kafka 4.1.1", "4.4.0", False), ("measured 975 duplicated", "975", True),
])
def test_a_figure_agrees_when_it_is_the_value_or_rounds_to_it(before, value, ok):
    assert agrees(before, value)[0] is ok


#: A path in backticks that names a file of the lab.
CITED = re.compile(r"`((?:lab|docs|bench|tests|notebooks)/[\w./-]+\.(?:py|md|json|csv|yaml|ipynb|html|txt|sh))`")


def test_every_cited_file_exists():
    missing = sorted({(str(doc.relative_to(ROOT)), m.group(1)) for doc in DOCUMENTS
                      for m in CITED.finditer(_text(doc)) if not (ROOT / m.group(1)).exists()})
    assert not missing, f"cited files that are not there: {missing}"


def test_each_agenda_of_the_workshop_adds_up_to_its_length():
    """docs/workshop.md's agenda: each column's blocks (minutes) add up to the time its header names."""
    lines = (ROOT / "docs" / "workshop.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| block |"))
    header = [h.strip() for h in lines[start].strip("|").split("|")][1:]
    lengths = {"90 min": 90, "3 hours": 180, "half a day (4 h)": 240, "a full day (2 x 3 h)": 360}
    assert set(header) == set(lengths), header
    sums = dict.fromkeys(header, 0)
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        block, *cols = [c.strip() for c in line.strip("|").split("|")]
        if block.startswith("machine time"):
            continue
        for h, c in zip(header, cols):
            sums[h] += int(c) if c.isdigit() else 0
    assert sums == {h: lengths[h] for h in header}, sums


def test_one_kafka_version_everywhere():
    """The broker the lab runs (``lab/jars.json``) is the one every document and every reference page names."""
    version = json.loads((ROOT / "lab" / "jars.json").read_text())["sets"]["kafka-broker"]["version"]
    named = re.compile(r"(?:Apache Kafka|apache-kafka|Kafka) (\d+\.\d+\.\d+)")
    pages = sorted((ROOT / "docs" / "reference").glob("**/*.html"))
    other = sorted({(str(p.relative_to(ROOT)), m.group(1)) for p in [*DOCUMENTS, *pages]
                    for m in named.finditer(_text(p)) if m.group(1) != version})
    assert not other, f"not the lab's Kafka {version}: {other} (a page: rebuild it, `make reference`)"
