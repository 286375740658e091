"""The README and the user docs as a learner reads them: short, every notebook on the path, links that resolve."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from tests.unit.test_notebook_text import anchors

README = ROOT / "README.md"
USER_DOCS = [README, ROOT / "CONTRIBUTING.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: A dated figure: an ISO date, or a clock time after "at" ("measured at 04:54").
DATED = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b|\bat [0-2]?\d:[0-5]\d\b")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_read_in_five_minutes():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; at most 150 (reference material goes to docs/)"
    long = [i + 1 for i, line in enumerate(lines) if len(line) > 200]
    assert not long, f"README.md lines over 200 characters: {long}"


def test_the_learning_path_lists_every_notebook_with_time_and_needs():
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\d\d_\w+)` \|(.*)\|$", README.read_text(), re.M)}
    notebooks = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert set(rows) == notebooks
    for stem, cells in rows.items():
        question, time, needs = (c.strip() for c in cells.split("|"))
        assert question.endswith("?") and re.fullmatch(r"\d+ min", time) and needs, (stem, cells)


@pytest.mark.parametrize("path", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_dated_figure_in_a_user_document(path):
    dated = [line for line in path.read_text().splitlines() if DATED.search(line)]
    assert not dated, f"{path.relative_to(ROOT)}: dated figures belong in bench/results/ and git: {dated[:3]}"


@pytest.mark.parametrize("path", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    broken = []
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve()
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            broken.append(target)
    assert not broken, f"{path.relative_to(ROOT)}: links to nothing: {broken}"

