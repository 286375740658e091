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


def undated_part(path) -> list[str]:
    """The lines of a user document that must carry no date: all of them but bench/README.md's "Past experiments",
    which names each results file git keeps, with the date and commit of its last version."""
    lines, kept, past = path.read_text().splitlines(), [], False
    for line in lines:
        if line.startswith("## "):
            past = path == ROOT / "bench" / "README.md" and line == "## Past experiments"
        if not past:
            kept.append(line)
    return kept


@pytest.mark.parametrize("path", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_dated_figure_in_a_user_document(path):
    dated = [line for line in undated_part(path) if DATED.search(line)]
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



def notebook_times() -> dict[str, tuple[int, int]]:
    """Each notebook's minutes as its first markdown cell's "Time:" line says: (the notebook, more for exercises)."""
    import json

    times = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        first = next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown")
        line = re.search(r"\*\*Time:\*\*(.*)", "".join(first["source"]))
        assert line, f"{path.name}: its first markdown cell has no **Time:** line"
        minutes, more = re.search(r"about (\d+) minutes", line.group(1)), re.search(r"and (\d+) more", line.group(1))
        times[path.stem] = (int(minutes.group(1)), int(more.group(1)) if more else 0)
    return times


def test_the_learning_paths_times_are_the_notebooks_own():
    """The table's times, the whole path's and the 90-minute path's: each the notebooks' "Time:" lines, added up."""
    text = README.read_text()
    times = notebook_times()
    table = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\d\d_\w+)` \|.*\| (\d+) min \|", text, re.M)}
    assert table == {stem: str(minutes) for stem, (minutes, _) in times.items()}, (
        "README's times against the notebooks'")
    flat = " ".join(text.split())
    whole, more = sum(m for m, _ in times.values()), sum(x for _, x in times.values())
    assert f"takes about {whole} minutes" in flat and f"{whole + more} with" in flat, (whole, whole + more)
    short = re.search(r"\*\*Only 90 minutes\?\*\*(.*?):", flat)
    assert short, "README names a 90-minute path"
    path = re.findall(r"`(\d\d_\w+)`", short.group(1))
    assert sum(times[stem][0] for stem in path) == 90, path
    assert path[0] == "00_start_here", "00 first"
    assert "04_semantics_matrix" not in path[:-1], "04, the measured answers, comes last"


def fenced_bash(text: str) -> list[str]:
    """Each ```bash block of ``text``, a blockquote's ``> `` taken off, as its lines."""
    plain = "\n".join(re.sub(r"^> ?", "", line) for line in text.splitlines())
    return [block.strip("\n") for block in re.findall(r"```bash\n(.*?)```", plain, re.S)]


def test_the_message_to_learners_copies_the_quick_start_and_names_make_targets_that_exist():
    """docs/workshop.md's message sends the README's install commands exactly, and its check is a real target."""
    workshop = (ROOT / "docs" / "workshop.md").read_text()
    message = workshop.split("## The message to send a week before", 1)[1].split("\n## ", 1)[0]
    quick_start = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    sent, check = fenced_bash(message)[:2]
    assert sent == fenced_bash(quick_start)[0], "the message's commands are not the README's quick start"
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    named = set(re.findall(r"\bmake ([\w-]+)", sent + "\n" + check))
    assert "doctor" in named and named <= targets, sorted(named - targets)
