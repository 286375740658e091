"""The matrix report: expected vs measured, verdicts recomputed from counts, one self-contained HTML file.

Its top is the semantics grid (:mod:`lab.matrix.semantics`): deployments by failures, as the Spark
Streaming guide draws its fault-tolerance table, each cell linked to its runs.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from lab.audit.expectations import AS_EXPECTED, EXPECTATIONS, TOPIC_EXPECTATIONS, measured, verdict
from lab.audit.restarts import restart_cell
from lab.errors import LabError
from lab.host.env import project_root
from lab.matrix.semantics import build_grid, grid_html, run_link
from lab.matrix.table import count_text

COUNT_COLUMNS = ("lost", "duplicated", "unexpected", "unseen", "source_duplicates")
#: The committed results of a real run of the default grid (its versions, machine and command in ``matrix.json``).
REFERENCE_RESULTS = "docs/reference/matrix.csv"
#: Where results tables are looked for, in order, when none is named: the full matrix, ``make demo``'s, then the
#: committed reference, so notebook 04 shows a measured table on a fresh clone.
DEFAULT_RESULTS = ("data/results/matrix.csv", "data/results/demo/matrix.csv", REFERENCE_RESULTS)


def results_dir(path: str | Path | None = None) -> Path:
    """Where a matrix run writes the table ``path`` names (default: ``data/results`` at the project root)."""
    name = Path(path or DEFAULT_RESULTS[0])
    return (name if name.is_absolute() else (project_root() or Path.cwd()) / name).parent


def find_results(path: str | Path | None = None) -> Path:
    """The results table to read, from any working directory.

    Parameters
    ----------
    path : str or Path, optional
        A table to read. A relative path is looked up from the working
        directory, then from the project root. Empty: the full matrix's table
        (``lab matrix``), else the demo's (``make demo``), else the committed
        reference (:data:`REFERENCE_RESULTS`).

    Raises
    ------
    LabError
        When no table exists, naming every place looked at and the command that writes one.
    """
    root = project_root() or Path.cwd()
    names = [Path(path)] if path else [Path(p) for p in DEFAULT_RESULTS]
    tried = []
    for name in names:
        for candidate in ([name] if name.is_absolute() else [Path.cwd() / name, root / name]):
            if candidate.is_file():
                return candidate.resolve()
            tried.append(str(candidate))
    raise LabError(f"no results table at {', '.join(dict.fromkeys(tried))}; "
                   "run `make demo` (a small matrix) or `lab matrix` (the whole table) first")


def is_reference(path: str | Path) -> bool:
    """Whether ``path`` is the committed reference table (:data:`REFERENCE_RESULTS`) of this checkout."""
    root = project_root() or Path.cwd()
    return Path(path).resolve() == (root / REFERENCE_RESULTS).resolve()


def results_note(path: str | Path) -> str:
    """Which table is read, and, for the committed reference, that it is one and where it was measured."""
    path = Path(path)
    if not is_reference(path):
        return f"results: {path}"
    import json

    meta = {}
    try:
        meta = json.loads(path.with_suffix(".json").read_text())
    except (OSError, ValueError):
        pass
    where = ", ".join(f"{k} {meta[k]}" for k in ("date", "lab", "spark", "kafka", "java", "cores") if meta.get(k))
    return (f"results: {path}, the committed reference from a real run of the default grid"
            f"{f' ({where})' if where else ''}, not a run of this machine; `lab matrix` measures your own "
            "(data/results/matrix.csv, read first when it exists)")


def guarantee_of(counts) -> str:
    """The delivery guarantee measured counts show (:func:`lab.outcomes.classify`, the auditor's own rule).

    Recomputed here so a results table's stored ``guarantee`` is never taken on trust.
    """
    from lab.outcomes import classify

    return classify(counts["lost"], counts["duplicated"], counts["unexpected"], counts["unseen"])


def read_results(path: str | Path) -> pd.DataFrame:
    """A results table (``matrix.csv`` or ``matrix.parquet``)."""
    path = Path(path)
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def matrix_view(results: pd.DataFrame) -> pd.DataFrame:
    """The results with each verdict and measured guarantee recomputed from the counts.

    The stored ``verdict`` is ignored; ``measured`` is the final read's outcome
    for ``acked-*`` rows, else the guarantee the counts show (:func:`guarantee_of`);
    a run that ended without a report measured ``error``.
    """
    view = results.copy()
    for c in COUNT_COLUMNS:
        if c not in view:
            view[c] = 0
    if "topic_lost" not in view:
        view["topic_lost"] = None
    verdicts, outcomes = [], []
    for _, r in view.iterrows():
        if pd.isna(r.get("guarantee")) or r.get("guarantee") in ("", "error"):
            verdicts.append("error")
            outcomes.append("error")
            continue
        counts = {c: (0 if pd.isna(r[c]) else int(r[c])) for c in COUNT_COLUMNS}
        counts["topic_lost"] = None if pd.isna(r["topic_lost"]) else int(r["topic_lost"])  # no final read: no verdict
        verdicts.append(verdict(r["expect"], counts))
        outcomes.append(measured(r["expect"], {**counts, "guarantee": guarantee_of(counts)}))
    view["verdict"] = verdicts
    view["measured"] = outcomes
    return view


def mismatches(view: pd.DataFrame) -> pd.DataFrame:
    return view[view["verdict"] != AS_EXPECTED]


def _windows_cell(r) -> str:
    """A window-count run's windows (exact / over / under, with the events over and under); empty otherwise."""
    w = r.get("windows")
    if w is None or pd.isna(w):
        return ""
    n = {k: int(r.get(k) or 0) for k in ("windows_exact", "windows_over", "windows_under", "overcount", "undercount")}
    return (f"{n['windows_exact']} / {n['windows_over']} (+{n['overcount']}) / "
            f"{n['windows_under']} (-{n['undercount']}) of {int(w)}")


def table_html(view: pd.DataFrame, link_base: Path | None = None, link_from: Path | None = None) -> str:
    """The results as an HTML table; mismatches highlighted, each row linked to its run's HTML.

    ``link_base``: the results file's directory (relative run paths are its);
    ``link_from``: where the page is read from (default ``link_base``).
    """
    head = ["scenario", "seed", "expected", "measured", "lost", "duplicated", "unexpected", "source dups",
            "windows exact / over / under", "restart s", "verdict", "run"]
    rows = []
    for _, r in view.iterrows():
        bad = r["verdict"] != AS_EXPECTED
        href, run = run_link(r, link_base, link_from)
        # a run not in this checkout (a committed reference keeps only its name) is named, not linked
        link = (f"<a href='{html.escape(href, quote=True)}'>{'notebook' if href.endswith('.html') else 'run'}</a>"
                if href else html.escape(run or ""))
        lost = f"{r['lost']} (topic: {count_text(r['topic_lost'])})" if r["expect"] in TOPIC_EXPECTATIONS else r["lost"]
        cells = [r["name"], r["seed"], r["expect"], r["measured"], lost, r["duplicated"], r["unexpected"],
                 r["source_duplicates"], _windows_cell(r), restart_cell(r.get("restart_s")), f"<b>{r['verdict']}</b>",
                 link]
        style = " style='background:#fde0dc'" if bad else ""
        rows.append(f"<tr{style}>" + "".join(
            f"<td>{c if isinstance(c, str) and c.startswith('<') else html.escape(str(c))}</td>"
            for c in cells) + "</tr>")
    return ("<table class='lab-matrix' border='1' cellspacing='0' cellpadding='4'><tr>"
            + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>")


def build_html(results: pd.DataFrame, out_file: str | Path, base: str | Path | None = None) -> Path:
    """Write one self-contained HTML report of a matrix's results: the semantics grid, then every run.

    ``base``: the directory relative run paths in ``results`` are the results
    file's (default: the report's own directory); links are made relative to
    the report, and a run that is not here is named, not linked.
    """
    out_file = Path(out_file).resolve()
    view = matrix_view(results)
    grid = build_grid(view, base if base is not None else out_file.parent, link_from=out_file.parent)
    bad = mismatches(view)
    legend = "".join(f"<li><b>{k}</b>: {v}</li>" for k, v in EXPECTATIONS.items())
    body = f"""<!doctype html><html><head><meta charset="utf-8"><title>Semantics matrix</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1500px}} td,th{{font-size:13px}}</style></head><body>
<h1>Semantics matrix</h1>
<p>{len(view)} runs, <b>{len(bad)}</b> not as expected. Verdicts are recomputed here from the measured counts.</p>
{grid_html(grid)}
<h2>Runs</h2>{table_html(view, base if base is not None else out_file.parent, out_file.parent)}
<h2>Expectations</h2><ul>{legend}</ul></body></html>"""
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(body)
    return out_file
