"""The semantics matrix drawn as the Spark Streaming guide draws its fault-tolerance table.

Rows are **deployments** (how a pipeline is set up: a receiver with or without
its write-ahead log, the direct approach with its offsets in the checkpoint or
in the sink's transaction, Structured Streaming with an append, idempotent or
transactional sink, a Kafka cluster's replication settings); columns are
**failures** (the fault plan's kinds, grouped as the guide groups them: driver,
worker, task, producer, broker, or no fault at all). Each cell holds the runs of
that deployment under that failure: the measured guarantee (the worst of its
runs when there are several), the documented expectation beside it
(:data:`lab.audit.expectations.EXPECTATIONS`), a ✘ when they disagree, and the counts.

Pure: plain data in, plain data out. :func:`build_grid` reads the table
:func:`lab.matrix.report.matrix_view` returns (verdicts recomputed from the counts);
:func:`grid_from_results` reads a notebook's finished runs;
:func:`lab.views.plots.semantics_grid` draws a :class:`Grid` and :func:`grid_html`
writes it as an HTML table with a link to each run.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lab.audit.expectations import AS_EXPECTED, TOPIC_EXPECTATIONS, measured, verdict
from lab.errors import LabError
from lab.faults.plan import parse_fault_plan
from lab.matrix.grid import TEMPLATES
from lab.outcomes import COLORS, SEVERITY
from lab.registry import PIPELINES, present as _present, sink_words as _sink

#: The title the figure and the HTML form share.
GRID_TITLE = "What each failure does to each deployment, measured"

#: The failure columns, in the guide's order, and the fault kinds each one gathers.
FAILURES = ("driver failure", "driver pause", "worker failure", "task failure", "producer failure", "broker failure",
            "no fault")
FAILURE_OF_KIND = {
    "driver-crash": "driver failure",
    # not in the guide: a driver that is stopped, not dead, and may come back after its replacement started
    "driver-pause": "driver pause",
    # a receiver runs inside an executor: losing its connection is the guide's worker failure too
    "executor-crash": "worker failure", "receiver-restart": "worker failure",
    # one consumer of a share group is one worker of the group's many
    "consumer-crash": "worker failure",
    # a record whose processing fails every time: the task fails, on every delivery
    "task-failure": "task failure", "bolt-fail": "task failure", "poison": "task failure",
    "ack-loss": "producer failure", "txn-abort": "producer failure",
    "broker-crash": "broker failure", "broker-outage": "broker failure",
    "leader-crash": "broker failure", "follower-lag": "broker failure", "leader-unreachable": "broker failure",
}
#: The column of a run whose fault plan does not parse (an old or hand-edited table).
UNREADABLE_PLAN = "fault plan unreadable"

#: The verdict of a run no expectation is stated for (a notebook's run the default grid does not list).
NO_EXPECTATION = "no expectation"

# Rows are grouped by family in the guide's order (receivers first, Kafka's own last), then by first appearance.
_FAMILIES = ("receiver", "direct", "structured", "kafka-eos", "samza", "flink", "storm", "plain", "cluster")


def _settings(value) -> dict:
    """A results row's ``settings`` (JSON text in a table, a dict in a report); ``{}`` when absent or unreadable."""
    if isinstance(value, dict):
        return value
    if not _present(value):
        return {}
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _pipeline_label(pipeline: str, sink, s: dict) -> str:
    query = s.get("query")
    stateful = f" {query}" if _present(query) and query != "passthrough" else ""
    spec = PIPELINES.get(pipeline) if isinstance(pipeline, str) else None
    if spec:
        return spec.label(sink, s, stateful)
    return f"{pipeline}, {_sink(sink)}" if _present(pipeline) else "unknown deployment"


def deployment(pipeline, sink, settings=None) -> str:
    """A stable row label for a run's deployment, from its pipeline, sink and settings.

    Parameters
    ----------
    pipeline : str
        The run's pipeline (``receiver``, ``direct``, ``structured``, ``kafka-eos``, ``plain``).
    sink : str
        The run's sink.
    settings : dict or str, optional
        The report's ``settings`` (a dict, or a results table's JSON text). Missing
        settings leave their words out, so a table without them still groups by pipeline and sink.

    Returns
    -------
    str
        E.g. ``"receiver, reliable ack, WAL"``, ``"direct, offsets in the sink's transaction"``,
        ``"structured window-count, append sink"``, ``"Kafka cluster acks=all, min.insync=2, unclean=on"``.
    """
    s = _settings(settings)
    if _present(s.get("nodes")) and int(s["nodes"]) > 1:
        label = (f"Kafka cluster acks={s.get('acks', '?')}, min.insync={s.get('min_insync', '?')}, "
                 f"unclean={s.get('unclean', '?')}")
        if s.get("elr") == "off":  # on is Kafka 4.1's own for a new cluster: it goes unsaid
            label += ", ELR off"
        spec = PIPELINES.get(pipeline) if isinstance(pipeline, str) else None
        return f"{label}; {_pipeline_label(pipeline, sink, s)}" if spec is None or spec.label_on_cluster else label
    label = _pipeline_label(pipeline, sink, s)
    # Producer settings change what reaches the topic; the defaults (idempotent, acks=all) go unsaid.
    if s.get("idempotence") is False:
        label += ", producer without idempotence"
    if s.get("transactional") is True:
        label += ", transactional producer"
    if _present(s.get("acks")) and str(s["acks"]) != "all":
        label += f", acks={s['acks']}"
    return label


def _family(pipeline, settings) -> int:
    s = _settings(settings)
    if _present(s.get("nodes")) and int(s["nodes"]) > 1:
        return _FAMILIES.index("cluster")
    return _FAMILIES.index(pipeline) if pipeline in _FAMILIES else len(_FAMILIES)


def failure(faults) -> str:
    """The failure column of a fault plan: its kinds' classes in :data:`FAILURES` order, joined with ``+``.

    An empty plan is ``"no fault"``; a plan :func:`lab.faults.plan.parse_fault_plan`
    rejects is :data:`UNREADABLE_PLAN`.
    """
    if not _present(faults):
        return "no fault"
    try:
        plan = parse_fault_plan(str(faults))
    except LabError:
        return UNREADABLE_PLAN
    classes = {FAILURE_OF_KIND.get(f.kind, f.kind) for f in plan}
    if not classes:
        return "no fault"
    return " + ".join(sorted(classes, key=lambda c: (FAILURES.index(c) if c in FAILURES else len(FAILURES), c)))


@dataclass(frozen=True)
class RunOutcome:
    """One run in a cell: what it was held to, what it measured, and where it is."""

    name: str
    seed: int | None
    expect: str | None
    measured: str
    verdict: str
    lost: int | None
    duplicated: int | None
    unexpected: int | None = None
    link: str | None = None
    run: str | None = None

    @property
    def judged(self) -> bool:
        return self.verdict != NO_EXPECTATION

    @property
    def as_expected(self) -> bool:
        return self.verdict == AS_EXPECTED

    def describe(self) -> str:
        """What the run measured against what it was held to, in words."""
        if not self.judged:
            return f"measured {self.measured}, no expectation stated"
        return f"measured {self.measured}, expected {self.expect}" + ("" if self.as_expected else " ✘")


def _counts_text(values) -> str:
    return ", ".join("-" if v is None else str(v) for v in values)


@dataclass(frozen=True)
class Cell:
    """The runs of one deployment under one failure."""

    deployment: str
    failure: str
    runs: tuple[RunOutcome, ...]

    @property
    def measured(self) -> str:
        """The worst measured outcome of the cell's runs (:data:`SEVERITY`)."""
        return max((r.measured for r in self.runs), key=lambda g: SEVERITY.get(g, max(SEVERITY.values())))

    @property
    def expected(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.expect for r in self.runs if r.judged and r.expect))

    @property
    def judged(self) -> int:
        return sum(r.judged for r in self.runs)

    @property
    def as_expected(self) -> int:
        return sum(r.as_expected for r in self.runs)

    @property
    def mismatch(self) -> bool:
        return self.as_expected < self.judged

    def lines(self) -> list[str]:
        """The cell's text: measured (✘ on a mismatch), expected, counts, and how many runs as expected."""
        topic = any(r.expect in TOPIC_EXPECTATIONS for r in self.runs)
        out = [("✘ " if self.mismatch else "") + self.measured,
               "expected " + " / ".join(self.expected) if self.expected else "no expectation stated",
               f"{'acked lost' if topic else 'lost'} {_counts_text(r.lost for r in self.runs)} · "
               f"dup {_counts_text(r.duplicated for r in self.runs)}"]
        if any(r.unexpected for r in self.runs):
            out.append(f"unexpected {_counts_text(r.unexpected for r in self.runs)}")
        if len(self.runs) > 1:
            out.append(f"{self.as_expected} of {self.judged} as expected" if self.judged
                       else f"{len(self.runs)} runs")
        return out

    def summary(self) -> str:
        return " · ".join(self.lines())


@dataclass(frozen=True)
class Grid:
    """Deployments (rows) by failures (columns); ``cells`` maps ``(deployment, failure)`` to its :class:`Cell`."""

    deployments: tuple[str, ...]
    failures: tuple[str, ...]
    cells: dict = field(default_factory=dict)

    def cell(self, deployment: str, failure: str) -> Cell | None:
        return self.cells.get((deployment, failure))

    def frame(self) -> pd.DataFrame:
        """The grid as a table: one row per deployment, one column per failure, each cell's summary ('' when empty)."""
        return pd.DataFrame([[c.summary() if (c := self.cell(d, f)) else "" for f in self.failures]
                             for d in self.deployments],
                            index=pd.Index(self.deployments, name="deployment"),
                            columns=pd.Index(self.failures, name="failure"))

    def table(self) -> pd.DataFrame:
        """One row per non-empty cell: deployment, failure, measured, expected, runs, as expected, mismatch."""
        rows = [{"deployment": d, "failure": f, "measured": c.measured, "expected": " / ".join(c.expected),
                 "runs": len(c.runs), "as_expected": c.as_expected, "mismatch": c.mismatch,
                 "lost": [r.lost for r in c.runs], "duplicated": [r.duplicated for r in c.runs]}
                for d in self.deployments for f in self.failures if (c := self.cell(d, f))]
        return pd.DataFrame(rows, columns=["deployment", "failure", "measured", "expected", "runs", "as_expected",
                                           "mismatch", "lost", "duplicated"])


def _int(value) -> int | None:
    try:
        return None if not _present(value) else int(value)
    except (TypeError, ValueError):
        return None


def run_link(row, base: Path | None, link_from: Path | None = None) -> tuple[str | None, str | None]:
    """``(href, run label)`` of a results row: its HTML, else its run directory; no href when it is not here.

    A relative path is the results file's (``base``); a committed reference
    table keeps only names, so its runs are labelled, not linked. The href is
    relative to ``link_from`` (default ``base``) when the run lies below it.
    """
    link_from = Path(link_from if link_from is not None else base).resolve() if (link_from or base) else None
    run_dir, page = row.get("run_dir"), row.get("html")
    # named by its run directory (what a committed reference keeps), else by the folder of its notebook
    label = (Path(run_dir).name if isinstance(run_dir, str) and run_dir
             else Path(page).parent.name if isinstance(page, str) and page else None)
    for value in (page, run_dir):
        if not isinstance(value, str) or not value:
            continue
        path = Path(value)
        full = path if path.is_absolute() or base is None else base / path
        if full.exists():
            if link_from is not None and full.resolve().is_relative_to(link_from):
                return os.path.relpath(full.resolve(), link_from), label
            return str(full.resolve()), label
    return None, label


def _assemble(placed: list[tuple[str, str, int, RunOutcome]]) -> Grid:
    """A grid from ``(deployment, failure, family, outcome)`` in table order."""
    rank: dict[str, tuple] = {}
    failures: list[str] = []
    cells: dict[tuple[str, str], list] = {}
    for i, (dep, fail, family, outcome) in enumerate(placed):
        rank.setdefault(dep, (family, i))
        if fail not in failures:
            failures.append(fail)
        cells.setdefault((dep, fail), []).append(outcome)
    order = {f: (FAILURES.index(f) if f in FAILURES else len(FAILURES) + (f == UNREADABLE_PLAN), i)
             for i, f in enumerate(failures)}
    return Grid(deployments=tuple(sorted(rank, key=rank.get)),
                failures=tuple(sorted(failures, key=order.get)),
                cells={k: Cell(k[0], k[1], tuple(v)) for k, v in cells.items()})


def build_grid(view: pd.DataFrame, base: str | Path | None = None, link_from: str | Path | None = None) -> Grid:
    """The grid of a results table whose verdicts were recomputed (:func:`lab.matrix.report.matrix_view`).

    Parameters
    ----------
    view : pandas.DataFrame
        ``matrix_view``'s table: ``name``, ``seed``, ``expect``, ``measured``,
        ``verdict``, ``pipeline``, ``sink``, ``faults``, the counts, and when
        present ``settings``, ``topic_lost``, ``html``, ``run_dir``.
    base : str or Path, optional
        The results file's directory: relative run paths are looked up there.
    link_from : str or Path, optional
        Where the links will be read from (an HTML report's directory); default ``base``.

    Returns
    -------
    Grid
    """
    base = Path(base) if base is not None else None
    placed = []
    for _, r in view.iterrows():
        settings = r.get("settings")
        pipeline, sink = r.get("pipeline"), r.get("sink")
        expect = r.get("expect") if _present(r.get("expect")) else None
        lost = r.get("topic_lost") if expect in TOPIC_EXPECTATIONS else r.get("lost")
        href, run = run_link(r, base, link_from)
        outcome = RunOutcome(
            name=str(r.get("name")), seed=_int(r.get("seed")), expect=expect,
            measured=r["measured"] if _present(r.get("measured")) else "error", verdict=str(r["verdict"]),
            lost=_int(lost), duplicated=_int(r.get("duplicated")), unexpected=_int(r.get("unexpected")),
            link=href, run=run)
        placed.append((deployment(pipeline, sink, settings), failure(r.get("faults")), _family(pipeline, settings),
                       outcome))
    return _assemble(placed)


def documented_expectations(grid_file: str | Path | None = None) -> dict[tuple[str, str], str]:
    """What the default grid (or ``grid_file``) expects per ``(deployment, failure)`` cell.

    A cell whose scenarios expect different outcomes has no entry (no single
    claim to hold a run to); scenarios this machine cannot configure are skipped.
    """
    import yaml

    from lab.config import make_config

    path = Path(grid_file) if grid_file else TEMPLATES / "default_grid.yaml"
    data = yaml.safe_load(path.read_text())
    claims: dict[tuple[str, str], set] = {}
    for row in data.get("scenarios") or []:
        params = {**(data.get("defaults") or {}), **(row.get("params") or {})}
        try:
            cfg = make_config(**params)
        except LabError:
            continue
        key = (deployment(cfg.pipeline, cfg.sink, cfg.settings), failure(cfg.faults))
        claims.setdefault(key, set()).add(row.get("expect"))
    return {k: next(iter(v)) for k, v in claims.items() if len(v) == 1}


def grid_from_results(results: dict, expect: dict | None = None) -> Grid:
    """The grid of a notebook's finished runs.

    Parameters
    ----------
    results : dict
        ``{label: RunResult}`` (:class:`lab.run.result.RunResult`: ``.config`` and ``.report``).
    expect : dict, optional
        ``{label: expectation}`` (:data:`lab.audit.expectations.EXPECTATIONS`) for runs to hold
        to a claim of their own; the others get the default grid's claim for their
        cell (:func:`documented_expectations`), or none.

    Returns
    -------
    Grid
    """
    documented = None
    placed = []
    for label, result in results.items():
        cfg, report = result.config, result.report or {}
        settings = report.get("settings") or cfg.settings
        dep, fail = deployment(cfg.pipeline, settings.get("sink", cfg.sink), settings), failure(cfg.faults)
        claim = (expect or {}).get(label)
        if claim is None:
            documented = documented_expectations() if documented is None else documented
            claim = documented.get((dep, fail))
        if claim:
            outcome_verdict = verdict(claim, report)
            outcome_measured = measured(claim, report)
        else:
            outcome_verdict, outcome_measured = NO_EXPECTATION, report.get("guarantee") or "error"
        topic_lost = (report.get("topic") or {}).get("lost")
        run_dir = report.get("run_dir")
        placed.append((dep, fail, _family(cfg.pipeline, settings), RunOutcome(
            name=str(label), seed=cfg.seed, expect=claim, measured=outcome_measured, verdict=outcome_verdict,
            lost=_int(topic_lost if claim in TOPIC_EXPECTATIONS else report.get("lost")),
            duplicated=_int(report.get("duplicated")), unexpected=_int(report.get("unexpected")),
            link=run_dir if run_dir and Path(run_dir).exists() else None,
            run=Path(run_dir).name if run_dir else None)))
    return _assemble(placed)


def grid_html(grid: Grid, title: str = GRID_TITLE) -> str:
    """The grid as one HTML table: each cell coloured by its measured outcome, each run linked when it is here."""

    head = "".join(f"<th>{html.escape(f)}</th>" for f in grid.failures)
    rows = []
    for d in grid.deployments:
        tds = []
        for f in grid.failures:
            c = grid.cell(d, f)
            if c is None:
                tds.append("<td style='background:#f4f4f4;color:#999;text-align:center'>·</td>")
                continue
            runs = []
            several = len({r.name for r in c.runs}) > 1  # two scenarios of one cell may share a seed
            for i, r in enumerate(c.runs):
                text = f"run {i + 1}" if several or r.seed is None else f"seed {r.seed}"
                tip = html.escape(f"{r.name}: {r.describe()}" + (f" ({r.run})" if r.run else ""), quote=True)
                mark = "" if r.as_expected or not r.judged else "✘ "
                runs.append(f"<a href='{html.escape(r.link, quote=True)}' title='{tip}' "
                            f"style='color:inherit'>{mark}{text}</a>"
                             if r.link else f"<span title='{tip}'>{mark}{text}</span>")
            lines = [html.escape(line) for line in c.lines()]
            lines[0] = f"<b>{lines[0]}</b>"
            border = "3px solid #111" if c.mismatch else "1px solid #fff"
            color = COLORS.get(c.measured, COLORS["error"])
            tds.append(f"<td style='background:{color};color:#fff;border:{border};vertical-align:top;min-width:10em'>"
                       + "<br>".join(lines) + "<br><small>" + " ".join(runs) + "</small></td>")
        rows.append(f"<tr><th style='text-align:left'>{html.escape(d)}</th>{''.join(tds)}</tr>")
    present = dict.fromkeys(c.measured for c in grid.cells.values())
    legend = " ".join(f"<span style='background:{COLORS.get(g, COLORS['error'])};color:#fff;"
                      f"padding:1px 6px'>{html.escape(g)}</span>" for g in present)
    return (f"<div class='lab-grid'><h3>{html.escape(title)}</h3>"
            "<table style='border-collapse:collapse' cellpadding='6'>"
            f"<tr><th>deployment \\ failure</th>{head}</tr>{''.join(rows)}</table>"
            f"<p><small>Colour: the measured outcome (the worst run of a cell). {legend} "
            "✘ and a black border: a run measured something other than its expectation.</small></p></div>")
