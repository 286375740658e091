"""docs/architecture.md's picture names every folder of lab/, and no folder that is not there."""

import re

from tests.conftest import ROOT


def picture() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## The picture", 1)[1]
    return re.search(r"```\n(.*?)```", section, re.S).group(1)


def test_the_picture_names_every_folder_of_lab_and_only_those():
    levels = picture().split("\n\n", 1)[0]  # the levels, before the run's own drawing
    named = set(re.findall(r"(?<![\w.])(?:lab/)?([a-z_]+)/", levels))
    folders = {p.name for p in (ROOT / "lab").iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders - named == set(), f"folders of lab/ the picture does not name: {sorted(folders - named)}"
    assert named - folders == set(), f"the picture names folders lab/ does not have: {sorted(named - folders)}"
