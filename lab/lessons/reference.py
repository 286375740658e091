"""Reference outputs: every notebook as executed with its small parameters, in ``docs/reference/`` ("what you should
see").

How they are made (``make reference``): the notebook tests execute every topic
notebook and every solutions notebook headless with their small parameters
(``tests/notebooks``), and check what the runs measured; each executed copy is
exported to HTML in ``test-artifacts/``. :func:`build` then copies those HTML
files here, with plotly.js kept once in ``plotly.min.js`` (each export would
otherwise carry its own 4.8 MB copy), the template's stylesheet kept once in
``jupyter-<digest>.css`` (260 KB a page otherwise), without the saved state of
live widgets, and writes ``index.json``: per notebook,
a digest of its source (:func:`source_digest`), when it was executed and with
which versions. :func:`stale` lists the notebooks whose source changed since,
which a unit test turns into a failure, so a reference cannot silently
describe a notebook that no longer exists.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import time
from pathlib import Path

from lab.errors import LabError

INDEX = "index.json"
PLOTLY_JS = "plotly.min.js"
#: The inline plotly.js bundle an HTML export carries (plotly's "notebook" renderer).
_PLOTLY_BUNDLE = re.compile(r"<script[^>]*>\s*/\*\*\s*\n\* plotly\.js v[\d.]+.*?</script>", re.S)
#: The saved state of a run's live widgets (the panel's FigureWidget holds every point it drew: 5 MB for
#: notebook 00). Headless runs show their results as static HTML and figures, which stay.
_WIDGET_STATE = re.compile(r'<script type="application/vnd\.jupyter\.widget-state\+json">.*?</script>', re.S)
#: A page's parts up to its ``</head>``: a comment, a script (skipped whole, so a ``<style>`` or ``</head>`` in a
#: string or a comment is never taken), the end of the head, or a ``<style>`` block (group 1: its attributes,
#: group 2: its CSS): nbconvert's template CSS.
_HEAD_PART = re.compile(r"<!--.*?-->|<script\b.*?</script>|</head>|<style\b([^>]*)>(.*?)</style>", re.S | re.I)
#: The only ``<style>`` attributes a shared stylesheet keeps the meaning of (a ``media`` one would be lost).
_PLAIN_STYLE = {"", 'type="text/css"', "type='text/css'"}
#: The shared stylesheets' names: ``jupyter-<12 hex digits of the CSS's SHA-256>.css``.
_SHARED_CSS = re.compile(r'href="(jupyter-[0-9a-f]{12}\.css)"')


def notebooks(root: Path) -> list[Path]:
    """The notebooks a reference covers: ``notebooks/*.ipynb`` and ``notebooks/solutions/*.ipynb``."""
    nb_dir = Path(root) / "notebooks"
    return sorted(nb_dir.glob("*.ipynb")) + sorted((nb_dir / "solutions").glob("*.ipynb"))


def key(path: Path) -> str:
    """A notebook's name in the reference: ``03_structured_streaming`` or ``solutions/03_structured_streaming``."""
    return f"solutions/{path.stem}" if path.parent.name == "solutions" else path.stem


def html_name(path: Path) -> str:
    """A notebook's HTML file in the reference directory (flat, so every page finds ``plotly.min.js``)."""
    return key(path).replace("/", "-") + ".html"


def source_digest(path: Path) -> str:
    """SHA-256 of a notebook's cells (type and source only: ids, outputs and metadata do not count).

    The cell papermill injects with the run's parameters (tag ``injected-parameters``)
    does not count either, so an executed copy has the digest of its notebook.
    """
    cells = [c for c in json.loads(Path(path).read_text())["cells"]
             if "injected-parameters" not in c.get("metadata", {}).get("tags", [])]
    blob = json.dumps([(c["cell_type"], "".join(c["source"])) for c in cells], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


#: A runs directory under pytest's temporary directory, up to its ``runs/``: where the notebook tests' runs went.
_TEMP_RUNS = re.compile(r"/[^\s\"'<>]*?/pytest-of-[^/\s\"'<>]+/pytest-\d+/(?:[^\s\"'<>/]+/)*?runs(?=[/\s\"'<&]|$)")


def machine_path(path: Path | str) -> re.Pattern:
    """``path`` followed by ``/`` where it starts a path, not inside a longer one (``/lab/`` is not in ``/x/lab/``)."""
    return re.compile(r"(?<![\w.~/-])" + re.escape(str(path).rstrip("/")) + "/")


def scrub_paths(html: str, root: Path) -> str:
    """``html`` with the machine's paths made relative: a test's runs directory as ``runs/``, the checkout's as
    nothing, the home directory (the jar cache's ``~/.cache/lab``) as ``~/``.

    A learner's own runs go to ``runs/`` in the checkout (``LAB_RUNS_DIR``'s default), so ``runs/<time>-<name>``
    is what their page would say.
    """
    html = _TEMP_RUNS.sub("runs", html)
    html = machine_path(Path(root).resolve()).sub("", html)
    return machine_path(Path.home()).sub("~/", html)


def parameters_of(executed: Path) -> dict:
    """The parameters papermill gave an executed notebook (its ``injected-parameters`` cell), as a dict of values."""
    import ast

    for cell in json.loads(Path(executed).read_text())["cells"]:
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            values = {}
            for node in ast.parse("".join(cell["source"])).body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    try:
                        values[node.targets[0].id] = ast.literal_eval(node.value)
                    except ValueError:
                        values[node.targets[0].id] = ast.unparse(node.value)
            return values
    return {}


def share_plotly(html: str) -> tuple[str, bool]:
    """``html`` with its inline plotly.js bundle replaced by a ``<script src>`` to the shared copy."""
    out, n = _PLOTLY_BUNDLE.subn(f'<script src="{PLOTLY_JS}"></script>', html, count=1)
    return out, bool(n)


def share_css(html: str) -> tuple[str, str | None, str]:
    """``html`` with the ``<style>`` blocks of its ``<head>`` moved to a shared stylesheet: ``(page, its name, its
    CSS)``.

    The blocks become one ``<link>`` where the first of them was, their CSS
    joined in the same order (the head holds no other stylesheet between them,
    so the cascade is unchanged). The name is content-addressed, so every page
    exported by one nbconvert version links the same file. ``<style>`` blocks
    of the body (an output's own, such as a styled table) stay where they are.
    A page without head styles, or with one that has other attributes than
    ``type="text/css"`` (``media``, say), comes back as it is, with ``None``.
    """
    blocks, head_ends = [], False
    for m in _HEAD_PART.finditer(html):
        if m.group(0).lower() == "</head>":
            head_ends = True
            break
        if m.group(0)[:6].lower() == "<style":
            blocks.append(m)
    if not head_ends or not blocks or any(m.group(1).strip() not in _PLAIN_STYLE for m in blocks):
        return html, None, ""
    css = "\n".join(m.group(2) for m in blocks)
    name = f"jupyter-{hashlib.sha256(css.encode()).hexdigest()[:12]}.css"
    pieces, last = [], 0
    for i, m in enumerate(blocks):
        pieces.append(html[last:m.start()])
        if i == 0:
            pieces.append(f'<link rel="stylesheet" href="{name}">')
        last = m.end()
    return "".join(pieces) + html[last:], name, css


def write_shared_css(out: Path, html: str) -> tuple[str, str | None]:
    """:func:`share_css` for a page going into ``out``: writes its stylesheet there once; ``(page, name)``."""
    from lab.host.atomic_file import write_atomic

    page, name, css = share_css(html)
    path = out / name if name else None
    if path and (not path.is_file() or path.read_text() != css):  # a file an interrupted build cut short is mended
        write_atomic(path, css)
    return page, name


def remove_unused_css(out: Path) -> list[str]:
    """Delete the shared stylesheets in ``out`` that no page links any more; their names."""
    used = {m for page in out.glob("*.html") for m in _SHARED_CSS.findall(page.read_text())}
    gone = sorted(p.name for p in out.glob("jupyter-*.css") if p.name not in used)
    for name in gone:
        (out / name).unlink()
    return gone


def build(root: Path, artifacts: Path, out: Path, only: list[str] | None = None) -> dict:
    """Copy the executed notebooks' HTML from ``artifacts`` into ``out`` and write its index.

    Parameters
    ----------
    root : Path
        The project (its ``notebooks/``).
    artifacts : Path
        ``test-artifacts/``: ``notebooks/<stem>.html`` and ``solutions/<stem>.html``.
    out : Path
        ``docs/reference/``.
    only : list of str, optional
        :func:`key` names (``08_other_engines``, ``solutions/08_other_engines``): rebuild
        only their pages and keep the index's other entries as they are (after the
        tests of one notebook ran). Default: every notebook.

    Returns
    -------
    dict
        The index written to ``out/index.json``.

    Raises
    ------
    LabError
        When a notebook has no executed HTML, or one made from another version
        of it (the executed copy's cells differ): the notebook tests must run
        first (``make reference`` runs them).
    """
    import plotly

    from lab.run.result import versions

    out.mkdir(parents=True, exist_ok=True)
    index = {"made_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "versions": versions(), "notebooks": {}}
    todo = notebooks(root)
    if only:
        unknown = sorted(set(only) - {key(p) for p in todo})
        if unknown:
            raise LabError(f"no notebook {unknown[0]!r}; valid: {', '.join(key(p) for p in todo)}")
        try:
            index["notebooks"] = json.loads((out / INDEX).read_text())["notebooks"]
        except (OSError, ValueError, KeyError):
            pass
        todo = [p for p in todo if key(p) in only]
    for path in todo:
        exported = Path(artifacts) / ("solutions" if path.parent.name == "solutions"
                                      else "notebooks") / f"{path.stem}.html"
        executed = exported.with_suffix(".ipynb")  # the executed copy the HTML was exported from
        if not exported.is_file() or not executed.is_file() or source_digest(executed) != source_digest(path):
            raise LabError(f"no executed HTML of {key(path)} as it is now at {exported}; "
                           "run the notebook tests first (`make reference` does)")
        html, shared = share_plotly(scrub_paths(_WIDGET_STATE.sub("", exported.read_text()), root))
        html, css = write_shared_css(out, html)
        (out / html_name(path)).write_text(html)
        params = {k: scrub_paths(v, root) if isinstance(v, str) else v for k, v in parameters_of(executed).items()}
        index["notebooks"][key(path)] = {"html": html_name(path), "source_sha256": source_digest(path),
                                         "parameters": params,
                                         "executed_at": time.strftime("%Y-%m-%dT%H:%M:%S",
                                                                      time.localtime(exported.stat().st_mtime)),
                                         "plots": html.count("Plotly.newPlot"), "plotly_shared": shared,
                                         "css": css}
    shutil.copyfile(Path(plotly.__file__).parent / "package_data" / PLOTLY_JS, out / PLOTLY_JS)
    remove_unused_css(out)
    (out / INDEX).write_text(json.dumps(index, indent=1) + "\n")
    index["notebooks"] = {key(p): index["notebooks"][key(p)] for p in notebooks(root) if key(p) in index["notebooks"]}
    from html import escape

    def shown(params: dict) -> str:
        return (", ".join(f"<code>{escape(k)}={escape(json.dumps(v))}</code>" for k, v in params.items())
                or "its defaults")

    links = "".join(f'<li><a href="{v["html"]}">{k}</a>: {shown(v.get("parameters", {}))}</li>'
                    for k, v in index["notebooks"].items())
    (out / "index.html").write_text(f"<!doctype html><meta charset='utf-8'><title>The lab: reference outputs</title>"
                                    f"<h1>What you should see</h1><p>Every notebook and solution executed headless "
                                    f"({', '.join(f'{k} {v}' for k, v in index['versions'].items())}). The runs use "
                                    f"<b>small parameters</b>, listed with each page, so they end in seconds: your "
                                    f"counts at the notebook's defaults will be larger, and where a crash lands moves "
                                    f"them; the outcome each section teaches is the same.</p>"
                                    f"<ul>{links}</ul>")
    return index


def stale(root: Path, out: Path) -> list[str]:
    """The notebooks whose source differs from their reference (or that have none), as :func:`key` names."""
    try:
        recorded = json.loads((Path(out) / INDEX).read_text())["notebooks"]
    except (OSError, ValueError, KeyError):
        recorded = {}
    return [key(p) for p in notebooks(root)
            if recorded.get(key(p), {}).get("source_sha256") != source_digest(p)
            or not (Path(out) / recorded[key(p)]["html"]).is_file()]


def main() -> int:
    """``python -m lab.lessons.reference [KEY ...]``: build ``docs/reference`` from ``test-artifacts`` (after the
    notebook tests).

    With keys (``08_other_engines solutions/08_other_engines``), only those pages are rebuilt.
    """
    from lab.host.env import project_root

    root = project_root()
    if root is None:
        raise SystemExit("error: the reference is built from a checkout of the lab (no pyproject.toml found)")
    try:
        index = build(root, root / "test-artifacts", root / "docs" / "reference", only=sys.argv[1:] or None)
    except LabError as e:
        raise SystemExit(f"error: {e}") from None
    print(f"docs/reference: {len(index['notebooks'])} notebooks, executed {index['made_at']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
