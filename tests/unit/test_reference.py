"""docs/reference: an executed HTML per notebook, made from the notebook as it is now."""

import re
from pathlib import Path

import pytest

from lab.lessons.reference import (
    INDEX,
    PLOTLY_JS,
    key,
    machine_path,
    notebooks,
    remove_unused_css,
    share_css,
    share_plotly,
    source_digest,
    stale,
)
from tests.conftest import ROOT

REFERENCE = ROOT / "docs" / "reference"


def test_every_notebook_has_a_current_reference():
    changed = stale(ROOT, REFERENCE)
    assert not changed, f"changed since docs/reference was made: {', '.join(changed)}; run `make reference`"
    assert (REFERENCE / PLOTLY_JS).is_file() and (REFERENCE / INDEX).is_file()


def test_a_changed_cell_makes_a_reference_stale(tmp_path):
    import json
    import shutil

    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    shutil.copy(ROOT / "notebooks" / "00_start_here.ipynb", nb_dir)
    out = tmp_path / "ref"
    out.mkdir()
    (out / "00_start_here.html").write_text("<html></html>")
    path = nb_dir / "00_start_here.ipynb"
    (out / INDEX).write_text(json.dumps({"notebooks": {key(path): {"html": "00_start_here.html",
                                                                    "source_sha256": source_digest(path)}}}))
    assert stale(tmp_path, out) == []
    nb = json.loads(path.read_text())
    nb["cells"][0]["id"] = "another-id"  # ids and outputs do not count
    path.write_text(json.dumps(nb))
    assert stale(tmp_path, out) == []
    injected = {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "source": ["EVENTS = 1500\n"],
                "outputs": [], "execution_count": None}
    executed = tmp_path / "executed.ipynb"  # papermill's copy: the injected parameters do not count
    executed.write_text(json.dumps(dict(nb, cells=[*nb["cells"][:4], injected, *nb["cells"][4:]])))
    assert source_digest(executed) == source_digest(path)
    nb["cells"][-1]["source"].append("\n# a learner's note")
    path.write_text(json.dumps(nb))
    assert stale(tmp_path, out) == ["00_start_here"]
    assert [key(p) for p in notebooks(ROOT)][-1].startswith("solutions/")


def test_plotly_is_shared_not_copied_per_page():
    html = ("<p>x</p><script>/**\n* plotly.js v3.3.1\n* "
            "Copyright\n*/\n(function(){})</script><script>Plotly.newPlot()</script>")
    out, shared = share_plotly(html)
    assert shared and out == f'<p>x</p><script src="{PLOTLY_JS}"></script><script>Plotly.newPlot()</script>'
    assert share_plotly("<p>no plots</p>") == ("<p>no plots</p>", False)


def test_the_template_css_is_shared_in_order_and_an_output_s_own_style_stays():
    page = ("<html><head><meta charset='utf-8'><style type='text/css'>a{color:red}</style><script>x()</script>"
            "<style>b{margin:0}</style></head><body><style>table{border:1px}</style><p>x</p></body></html>")
    out, name, css = share_css(page)
    assert css == "a{color:red}\nb{margin:0}" and name.startswith("jupyter-") and name.endswith(".css")
    assert out == (f"<html><head><meta charset='utf-8'><link rel=\"stylesheet\" href=\"{name}\"><script>x()</script>"
                   "</head><body><style>table{border:1px}</style><p>x</p></body></html>")
    assert share_css(page.replace("a{color:red}", "a{color:blue}"))[1] != name  # named by its content
    assert share_css("<p>no head</p>") == ("<p>no head</p>", None, "")


def test_a_style_in_a_comment_or_a_script_string_is_never_moved():
    commented = "<head><!-- <style>a{}</style> --><style>b{}</style></head><body></body>"
    out, name, css = share_css(commented)
    assert css == "b{}" and out.startswith("<head><!-- <style>a{}</style> --><link")
    scripted = "<head><script>var s='<style>p{}</style></head>'</script><style>b{}</style></head><body></body>"
    out, name, css = share_css(scripted)
    assert css == "b{}" and "var s='<style>p{}</style></head>'" in out
    media = "<head><style media='print'>a{}</style></head>"  # a shared file would drop the media query
    assert share_css(media) == (media, None, "")


def test_every_reference_page_links_one_shared_stylesheet_that_exists(tmp_path):
    pages = [p for p in REFERENCE.glob("*.html") if p.name != "index.html"]
    linked = set()
    for page in pages:
        html = page.read_text()
        head = html[:html.index("</head>")]
        assert "<style" not in head, f"{page.name} carries its own copy of the template's CSS"
        linked |= set(re.findall(r'href="(jupyter-[0-9a-f]{12}\.css)"', head))
    # One nbconvert version made every page; after an upgrade, `make reference` remakes them all alike.
    assert len(linked) == 1 and all((REFERENCE / name).is_file() for name in linked)
    (tmp_path / "a.html").write_text('<link rel="stylesheet" href="jupyter-aaaaaaaaaaaa.css">')
    for name in ("jupyter-aaaaaaaaaaaa.css", "jupyter-bbbbbbbbbbbb.css"):
        (tmp_path / name).write_text("p{}")
    assert remove_unused_css(tmp_path) == ["jupyter-bbbbbbbbbbbb.css"]
    assert (tmp_path / "jupyter-aaaaaaaaaaaa.css").is_file()


def test_one_notebook_is_rebuilt_and_the_others_kept(tmp_path):
    import json
    import shutil

    import pytest

    from lab.errors import LabError
    from lab.lessons.reference import build

    nb_dir, artifacts, out = tmp_path / "notebooks", tmp_path / "artifacts" / "notebooks", tmp_path / "ref"
    nb_dir.mkdir()
    artifacts.mkdir(parents=True)
    out.mkdir()
    for stem in ("00_start_here", "02_direct_kafka"):
        shutil.copy(ROOT / "notebooks" / f"{stem}.ipynb", nb_dir)
    shutil.copy(nb_dir / "02_direct_kafka.ipynb", artifacts)  # only 02 was executed now
    (artifacts / "02_direct_kafka.html").write_text("<p>02, executed</p>")
    kept = {"html": "00_start_here.html", "source_sha256": "from an earlier build"}
    (out / INDEX).write_text(json.dumps({"notebooks": {"00_start_here": kept}}))
    index = build(tmp_path, tmp_path / "artifacts", out, only=["02_direct_kafka"])
    assert list(index["notebooks"]) == ["00_start_here", "02_direct_kafka"]  # notebook order, the old entry kept
    assert index["notebooks"]["00_start_here"] == kept
    assert (out / "02_direct_kafka.html").read_text() == "<p>02, executed</p>"
    with pytest.raises(LabError, match="no notebook '09_x'; valid: 00_start_here, 02_direct_kafka"):
        build(tmp_path, tmp_path / "artifacts", out, only=["09_x"])


# -- each page shows its lesson, as a learner would read it ------------------------------

PAGES = sorted(REFERENCE.glob("*.html"))
#: What a page must not show: a test's temporary directory, this checkout's path or the home directory (where
#: they start a path), an object's default repr.
NOT_ON_A_PAGE = re.compile("|".join((r"pytest-of-|/tmp/pytest", machine_path(ROOT.resolve()).pattern,
                                     machine_path(Path.home()).pattern, r" object at 0x[0-9a-f]+|RunResult\(config=")))


def page_text(name: str) -> str:
    """A page's text as a reader sees it (tags dropped, entities decoded)."""
    import html

    raw = (REFERENCE / name).read_text()
    raw = re.sub(r"<script\b.*?</script>|<style\b.*?</style>", " ", raw, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", raw)))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_page_shows_no_machine_path_and_no_repr(page):
    found = sorted({m.group(0) for m in NOT_ON_A_PAGE.finditer(page.read_text())})
    assert not found, f"{page.name} shows {found}: rebuild it (`make reference`) with lab.lessons.reference.scrub_paths"


def test_the_index_names_each_page_s_parameters():
    import json

    index = json.loads((REFERENCE / INDEX).read_text())["notebooks"]
    missing = [k for k, v in index.items() if "parameters" not in v]
    assert not missing, f"no parameters recorded for {missing}"
    assert index["00_start_here"]["parameters"].get("INTERACTIVE") is False
    assert "small parameters" in (REFERENCE / "index.html").read_text()


def test_page_00_shows_a_crash_that_duplicates():
    """The first page a learner opens: the crash replays written rows (not a crash before the first batch)."""
    # the panel's verdict, with the prediction the notebook tests give it (tests/notebooks: SMALL's PREDICTIONS)
    m = re.search(r"You predicted \S+ ; measured (\S+) \. (\d+) duplicated, (\d+) lost of (\d+) acknowledged",
                  page_text("00_start_here.html"))
    assert m and m.group(1) == "at-least-once" and int(m.group(2)) > 0 and m.group(3) == "0", m and m.group(0)


def test_page_04_shows_the_committed_matrix():
    import pandas as pd

    rows = len(pd.read_csv(REFERENCE / "matrix.csv"))
    text = page_text("04_semantics_matrix.html")
    assert f"{rows} runs in" in text and "every run as expected" in text and "deliberately wrong" not in text


def test_page_03_shows_what_a_naive_reader_of_the_file_sink_sees():
    m = re.search(r"naive reader: (\d+) extra copies in (\d+) files; Spark's reader: (\d+) in (\d+)",
                  page_text("03_structured_streaming.html"))
    assert m and int(m.group(1)) > 0 and m.group(3) == "0" and int(m.group(2)) > int(m.group(4)), m and m.group(0)


def test_page_01_shows_the_worker_failure():
    text = page_text("01_receiver_wal.html")
    rows = dict(re.findall(r"reliable, no WAL, replication (\d) \S+ \S+ (\d+) lost", text))
    assert set(rows) == {"1", "2"} and int(rows["1"]) > 0 and rows["2"] == "0", rows


def test_scrub_paths_drops_the_checkout_and_the_home_directory_only_where_a_path_starts(tmp_path):
    from lab.lessons.reference import scrub_paths

    root = Path("/lab")
    home = str(Path.home())
    html = f"<p>/lab/notebooks/00.ipynb and {home}/.cache/lab/jars/x.jar, not /srv/lab/y</p>"
    assert scrub_paths(html, root) == "<p>notebooks/00.ipynb and ~/.cache/lab/jars/x.jar, not /srv/lab/y</p>"


def test_page_09_shows_each_lesson():
    """Queues and zombies: the held records delivered again, the poison archived, the fenced zombie."""
    text = page_text("09_queues_and_zombies.html")
    m = re.search(r"archived: (\d+) lost: (\d+)", text)
    assert m and m.groups() == ("1", "0"), m and m.group(0)
    assert "deliveries in the end" in text and "delivery_count" in text  # the held records' table, the archived one
    # the zombies side by side (nb.compare): the fenced one wrote nothing a read_committed reader sees
    assert (re.search(r"kafka-eos, zombie exactly-once", text)
            and re.search(r"plain consumer, zombie at-least-once", text))
