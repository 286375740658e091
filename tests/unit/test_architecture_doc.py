"""docs/architecture.md's picture names every folder of lab/, and no folder that is not there."""

import re

from tests.conftest import ROOT


def picture() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## The picture", 1)[1]
    return re.search(r"```\n(.*?)```", section, re.S).group(1)


def level_lines() -> list[tuple[int, str]]:
    """The picture's levels: ``(level, what the line names)``, each line's remark left out."""
    out = []
    for line in picture().split("\n\n", 1)[0].splitlines():
        m = re.match(r"\s*(\d+)\s{2}(.*)$", line)
        if m:  # a remark is set off by five spaces or more; "(lab/templates/ ...)" names a folder of data
            out.append((int(m.group(1)), re.split(r"\s{5,}", m.group(2).strip())[0]))
    return out


def test_the_picture_names_every_folder_of_lab_and_only_those():
    named = {name for _, names in level_lines() for name in re.findall(r"(?<![\w.])(?:lab/)?([a-z_]+)/", names)}
    folders = {p.name for p in (ROOT / "lab").iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders - named == set(), f"folders of lab/ the picture does not name: {sorted(folders - named)}"
    assert named - folders == set(), f"the picture names folders lab/ does not have: {sorted(named - folders)}"


def levels() -> dict[str, int]:
    """Each place of the picture (a folder, or a module of the root) and its level."""
    return {n.strip("/"): level for level, names in level_lines() for n in names.split("(")[0].split()}


def place(module: str) -> str:
    """``lab.audit.window`` is in ``audit``; ``lab.config`` is ``config``."""
    return module.split(".")[1]


def climbs(graph: dict[str, set[str]], level: dict[str, int]) -> list[str]:
    return sorted(f"{src} -> {dst} ({place(src)} {level[place(src)]}, {place(dst)} {level[place(dst)]})"
                  for src, targets in graph.items() if src != "lab"
                  for dst in targets if dst != "lab" and place(dst) != place(src)
                  and level[place(dst)] >= level[place(src)])


def test_no_import_climbs_a_level_or_crosses_to_another_place_of_its_own():
    from tests.unit.test_house import graph

    g = graph()
    level = levels()
    unplaced = sorted({place(m) for m in g if m != "lab"} - set(level))
    assert not unplaced, f"modules of lab/ the picture gives no level: {unplaced}"
    assert climbs(g, level) == []


def test_the_level_check_sees_a_climb_and_a_sideways_import():
    level = {"audit": 4, "registry": 3, "sinks": 5, "kafka": 2, "host": 2}
    g = {"lab.audit.window": {"lab.registry"}, "lab.registry": {"lab.sinks.files"}, "lab.kafka.read": {"lab.host.env"}}
    assert climbs(g, level) == ["lab.kafka.read -> lab.host.env (kafka 2, host 2)",
                                "lab.registry -> lab.sinks.files (registry 3, sinks 5)"]
