"""The matrix report: expected vs measured, verdicts recomputed from counts, one self-contained HTML file."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from lab.config import project_root
from lab.errors import LabError
from lab.matrix import EXPECTATIONS, TOPIC_EXPECTATIONS, count_text, measured, satisfies
from lab.plots import matrix_heatmap

COUNT_COLUMNS = ("lost", "duplicated", "unexpected", "unseen", "source_duplicates")
#: Where results tables are looked for, in order, when none is named: the full matrix, then ``make demo``'s.
DEFAULT_RESULTS = ("data/results/matrix.csv", "data/results/demo/matrix.csv")


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
        (``lab matrix``), else the demo's (``make demo``).

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


def read_results(path: str | Path) -> pd.DataFrame:
    """A results table (``matrix.csv`` or ``matrix.parquet``)."""
    path = Path(path)
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def matrix_view(results: pd.DataFrame) -> pd.DataFrame:
    """The results with each verdict recomputed from the measured counts (the stored verdict is ignored)."""
    view = results.copy()
    for c in COUNT_COLUMNS:
        if c not in view:
            view[c] = 0
    if "topic_lost" not in view:
        view["topic_lost"] = None
    verdicts = []
    for _, r in view.iterrows():
        if pd.isna(r.get("guarantee")) or r.get("guarantee") in ("", "error"):
            verdicts.append("error")
            continue
        counts = {c: (0 if pd.isna(r[c]) else int(r[c])) for c in COUNT_COLUMNS}
        counts["topic_lost"] = None if pd.isna(r["topic_lost"]) else int(r["topic_lost"])  # no final read: no verdict
        verdicts.append("as expected" if satisfies(r["expect"], counts) else "MISMATCH")
    view["verdict"] = verdicts
    view["measured"] = [measured(e, r) for e, (_, r) in zip(view["expect"], view.iterrows())]
    return view


def mismatches(view: pd.DataFrame) -> pd.DataFrame:
    return view[view["verdict"] != "as expected"]


def _windows_cell(r) -> str:
    """A window-count run's windows (exact / over / under, with the events over and under); empty otherwise."""
    w = r.get("windows")
    if w is None or pd.isna(w):
        return ""
    n = {k: int(r.get(k) or 0) for k in ("windows_exact", "windows_over", "windows_under", "overcount", "undercount")}
    return (f"{n['windows_exact']} / {n['windows_over']} (+{n['overcount']}) / "
            f"{n['windows_under']} (-{n['undercount']}) of {int(w)}")


def table_html(view: pd.DataFrame, link_base: Path | None = None) -> str:
    """The results as an HTML table; mismatches highlighted, each row linked to its run's HTML."""
    head = ["scenario", "seed", "expected", "measured", "lost", "duplicated", "unexpected", "source dups",
            "windows exact / over / under", "verdict", "run"]
    rows = []
    for _, r in view.iterrows():
        bad = r["verdict"] != "as expected"
        link = ""
        if isinstance(r.get("html"), str) and r["html"]:
            target = Path(r["html"])
            href = target.relative_to(link_base) if link_base and target.is_relative_to(link_base) else target
            link = f"<a href='{html.escape(str(href))}'>notebook</a>"
        lost = f"{r['lost']} (topic: {count_text(r['topic_lost'])})" if r["expect"] in TOPIC_EXPECTATIONS else r["lost"]
        cells = [r["name"], r["seed"], r["expect"], r["measured"], lost, r["duplicated"], r["unexpected"],
                 r["source_duplicates"], _windows_cell(r), f"<b>{r['verdict']}</b>", link]
        style = " style='background:#fde0dc'" if bad else ""
        rows.append(f"<tr{style}>" + "".join(
            f"<td>{c if isinstance(c, str) and c.startswith('<') else html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return ("<table class='lab-matrix' border='1' cellspacing='0' cellpadding='4'><tr>"
            + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>")


def build_html(results: pd.DataFrame, out_file: str | Path) -> Path:
    """Write one self-contained HTML report (plotly.js inlined) of a matrix's results."""
    out_file = Path(out_file).resolve()
    view = matrix_view(results)
    fig = matrix_heatmap(view)
    bad = mismatches(view)
    legend = "".join(f"<li><b>{k}</b>: {v}</li>" for k, v in EXPECTATIONS.items())
    body = f"""<!doctype html><html><head><meta charset="utf-8"><title>Semantics matrix</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}} td,th{{font-size:13px}}</style></head><body>
<h1>Semantics matrix</h1>
<p>{len(view)} runs, <b>{len(bad)}</b> not as expected. Verdicts are recomputed here from the measured counts.</p>
{fig.to_html(full_html=False, include_plotlyjs=True)}
<h2>Runs</h2>{table_html(view, out_file.parent)}
<h2>Expectations</h2><ul>{legend}</ul></body></html>"""
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(body)
    return out_file
