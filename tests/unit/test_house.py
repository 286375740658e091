"""The house's shape: ``lab/`` by role, with no import loop and a small root.

Every import in ``lab/`` counts, at module level or inside a function, and under
``if TYPE_CHECKING:`` too: a lazy import hides a loop without removing it.
"""

from __future__ import annotations

import ast
from pathlib import Path

LAB = Path(__file__).resolve().parents[2] / "lab"

#: The root holds the vocabulary and the entry points only.
ROOT_MODULES_AT_MOST = 12
#: A folder past this many modules is grouped again by role (as the receiver's parts are in pipelines/receiver/).
FOLDER_MODULES_AT_MOST = 15
#: A module past this many lines does more than one job: its parts go to modules of their own.
MODULE_LINES_AT_MOST = 550


def module_name(path: Path) -> str:
    parts = path.relative_to(LAB.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(LAB.rglob("*.py"))}


def imports(path: Path, known: set[str]) -> set[str]:
    """The lab modules ``path`` imports, each with the packages above it (importing runs their ``__init__``)."""
    found: set[str] = set()
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                targets.append(sub if sub in known else base)
        for t in targets:
            if t == "lab" or t.startswith("lab."):
                parts = t.split(".")
                found.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
    found.discard(me)
    return {t for t in found if t in known}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(p, set(mods)) for m, p in mods.items()}


def loops(g: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected set of two or more modules (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_finder_sees_a_loop_of_three():
    g = {"lab.a": {"lab.b"}, "lab.b": {"lab.c"}, "lab.c": {"lab.a"}, "lab.d": {"lab.a"}}
    assert loops(g) == [["lab.a", "lab.b", "lab.c"]]


def test_lazy_and_type_only_imports_are_read():
    g = graph()
    assert "lab.matrix.grid" in g["lab.matrix.table"]  # only under ``if TYPE_CHECKING:``
    assert "lab.broker.shared" in g["lab.run.kernel"]  # only inside functions
    assert "lab.sinks" in g["lab.sinks.files"]  # a module imports the packages above it


def test_no_import_loop_in_lab():
    found = loops(graph())
    assert not found, "import loops in lab/: " + "; ".join(" <-> ".join(c) for c in found)


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def imports_from(g: dict[str, set[str]], source: str, target: str) -> list[str]:
    """``importer -> imported`` for each module under package ``source`` that imports one under ``target``."""
    return sorted(f"{src} -> {dst}" for src, targets in g.items() if under(src, source)
                  for dst in targets if under(dst, target))


def test_no_module_of_the_brokers_imports_spark():
    """The class archive's build is the host's (lab.host.class_archive); the broker's archive needs nothing of Spark."""
    found = imports_from(graph(), "lab.broker", "lab.spark")
    assert not found, "lab/broker imports lab/spark: " + ", ".join(found)


def test_no_sink_imports_the_audit():
    """A sink writes and reads rows; its words are in lab.outcomes, the ledger's counts come from its caller."""
    found = imports_from(graph(), "lab.sinks", "lab.audit")
    assert not found, "lab/sinks imports lab/audit: " + ", ".join(found)


#: Inside lab/pipelines/, what every pipeline may import besides itself: the driver's protocol (``DriverContext``)
#: and what more than one pipeline uses. These import no pipeline.
PIPELINES_SHARED = ("lab.pipelines.driver", "lab.pipelines.shared")


def pipeline_of(module: str, names: set[str]) -> str | None:
    """The pipeline a module of lab/pipelines/ belongs to, or None (the package, the shared part, or outside).

    A pipeline is a folder (``structured``, ``receiver``) or a module, whose helpers beside it are named after
    it: ``share_consumer`` is ``share``'s, ``direct_offsets`` is ``direct``'s. ``names``: the names directly
    in lab/pipelines/.
    """
    if not module.startswith("lab.pipelines.") or any(under(module, s) for s in PIPELINES_SHARED):
        return None
    name = module.split(".")[2]
    return min((n for n in names if name == n or name.startswith(n + "_")), key=len, default=name)


def sideways_imports(g: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` for each import from one pipeline into another, or from the shared part into a pipeline.

    The packages above an imported module are left out when the module itself is named.
    """
    names = {m.split(".")[2] for m in g if m.startswith("lab.pipelines.")}
    found = []
    for src in sorted(g):
        if not src.startswith("lab.pipelines."):
            continue
        mine = pipeline_of(src, names)
        bad = {dst for dst in g[src] if pipeline_of(dst, names) not in (None, mine)}
        found += [f"{src} -> {dst}" for dst in sorted(bad) if not any(o.startswith(dst + ".") for o in bad)]
    return found


def test_no_pipeline_imports_another_pipeline():
    found = sideways_imports(graph())
    assert not found, ("imports between pipelines (move what both use to lab/pipelines/shared/): "
                       + ", ".join(found))


def test_each_pipeline_of_the_registry_is_a_pipeline_of_its_own_for_the_sideways_check():
    from lab.registry import PIPELINES

    names = {m.split(".")[2] for m in graph() if m.startswith("lab.pipelines.")}
    owners = {name: pipeline_of(spec.module, names) for name, spec in PIPELINES.items()}
    assert None not in owners.values() and len(set(owners.values())) == len(owners), owners


def test_the_floor_checks_name_each_import_they_refuse():
    g = {"lab.broker.archive": {"lab.host.class_archive", "lab.spark.archive", "lab.spark"},
         "lab.spark.archive": {"lab.host.class_archive"},
         "lab.sinks.files": {"lab.outcomes", "lab.audit.predictions", "lab.audit"},
         "lab.pipelines.direct": {"lab.pipelines", "lab.pipelines.direct_offsets", "lab.pipelines.driver",
                                  "lab.pipelines.shared", "lab.pipelines.shared.kafka_reader",
                                  "lab.pipelines.structured", "lab.pipelines.structured.kafka_input"},
         "lab.pipelines.direct_offsets": {"lab.pipelines.driver"},
         "lab.pipelines.share": {"lab.pipelines.share_consumer"},
         "lab.pipelines.share_consumer": set(),
         "lab.pipelines.kafka_eos": set(),
         "lab.pipelines.structured.kafka_input": {"lab.pipelines.structured", "lab.pipelines.shared.tasks"},
         "lab.pipelines.receiver.pipeline": {"lab.pipelines.receiver.epoch", "lab.pipelines.structured.sessions"},
         "lab.pipelines.shared.tasks": {"lab.pipelines.driver", "lab.pipelines.receiver.epoch"}}
    assert imports_from(g, "lab.broker", "lab.spark") == ["lab.broker.archive -> lab.spark",
                                                          "lab.broker.archive -> lab.spark.archive"]
    assert imports_from(g, "lab.sinks", "lab.audit") == ["lab.sinks.files -> lab.audit",
                                                         "lab.sinks.files -> lab.audit.predictions"]
    assert sideways_imports(g) == ["lab.pipelines.direct -> lab.pipelines.structured.kafka_input",
                                   "lab.pipelines.receiver.pipeline -> lab.pipelines.structured.sessions",
                                   "lab.pipelines.shared.tasks -> lab.pipelines.receiver.epoch"]
    g["lab.pipelines.direct"] -= {"lab.pipelines.structured", "lab.pipelines.structured.kafka_input"}
    g["lab.pipelines.receiver.pipeline"].discard("lab.pipelines.structured.sessions")
    g["lab.pipelines.shared.tasks"].discard("lab.pipelines.receiver.epoch")
    assert sideways_imports(g) == []  # its own helpers, the shared part and the driver's protocol pass


def test_the_root_holds_few_modules_and_every_other_module_is_in_a_role_folder():
    root = sorted(p.name for p in LAB.glob("*.py"))
    assert len(root) <= ROOT_MODULES_AT_MOST, f"lab/ holds {len(root)} modules: {', '.join(root)}"
    for folder in (p for p in LAB.iterdir() if p.is_dir() and any(p.glob("*.py"))):
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        assert doc and len(doc.split()) >= 8, f"lab/{folder.name}/__init__.py says what its role is and may import"
    crowded = {f.relative_to(LAB.parent).as_posix(): n for f in LAB.rglob("*") if f.is_dir()
               if (n := len(list(f.glob("*.py")))) > FOLDER_MODULES_AT_MOST}
    assert not crowded, f"folders of more than {FOLDER_MODULES_AT_MOST} modules: {crowded}"


def notebook_imports(path: Path) -> list[str]:
    """Every ``lab`` module a notebook's code cells import, as written."""
    import json

    found = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        tree = ast.parse("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [a.name for a in node.names if a.name.split(".")[0] == "lab"]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lab":
                found += [f"{node.module}.{a.name}" if node.module == "lab" else node.module for a in node.names]
    return found


def test_notebooks_and_solutions_import_only_lab_notebook():
    books = sorted((LAB.parent / "notebooks").rglob("*.ipynb"))
    assert len(books) >= 18
    wrong = {p.relative_to(LAB.parent).as_posix(): [m for m in notebook_imports(p) if m != "lab.notebook"]
             for p in books}
    wrong = {k: v for k, v in wrong.items() if v}
    assert not wrong, f"notebooks import lab modules other than lab.notebook: {wrong}"


def test_the_notebook_check_sees_a_direct_import(tmp_path):
    book = tmp_path / "x.ipynb"
    book.write_text('{"cells": [{"cell_type": "code", "source": ["from lab import notebook as nb\\n", '
                    '"from lab.views import plots"]}]}')
    assert notebook_imports(book) == ["lab.notebook", "lab.views"]


def test_modules_run_by_name_exist():
    """Names used as strings (``python -m`` entry points, trainers, lesson modules) name real modules."""
    import importlib.util

    from lab.broker import archive as broker_archive
    from lab.lessons.code import LESSON_MODULES
    from lab.registry import PIPELINES
    from lab.spark import archive as spark_archive

    names = [broker_archive.TRAINER, spark_archive.TRAINER, *LESSON_MODULES, *(p.module for p in PIPELINES.values())]
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    assert not missing, f"named modules that do not exist: {missing}"


#: Dotted strings that begin with ``lab.`` and name no module, on purpose.
NOT_MODULE_NAMES = {"lab.fetch": "the Maven groupId of the pom that fetches jars (lab.host.jars)",
                    "lab._pyspark_": "the prefix of a module name built at run time (lab.spark.archive)",
                    "lab.storm.LabTopology": "the Storm topology's Java class (lab/storm/java)",
                    "lab.samza.LabSamza": "the Samza job's Java class (lab/samza/java)",
                    "lab.share.LabShareState": "the share group's state reader, a Java class (lab/share/java)",
                    "lab.broker.LabTxnProducer": "the Java transactional producer's class (lab/broker/java)",
                    "lab.broker.LabTxnServer": "the Java producer called one request at a time (lab/broker/java)",
                    **{key: "a key of the Samza job's configuration (lab/samza/settings.py)"
                       for key in ("lab.input.topic", "lab.output.topic", "lab.attempt")}}


def resolves(name: str) -> bool:
    """Whether dotted ``name`` is a module, or a chain of attributes below the longest module it starts with."""
    import importlib

    parts = name.split(".")
    for i in range(len(parts), 1, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            fields = getattr(obj, "__dataclass_fields__", {})
            if not hasattr(obj, attr) and attr not in fields:
                return False
            obj = getattr(obj, attr, None)
        return True
    return False


def test_every_lab_name_written_as_a_string_resolves():
    """A dotted ``lab.…`` string in the code (``python -m`` commands, worker preload lists, patch targets, the
    compose file and the Makefile) names a module, or an attribute of one: a stale name would fail silently."""
    import re

    root = LAB.parent
    pattern = re.compile(r"""(?<![\w./<-])(lab(?:\.[A-Za-z_]\w*)+)(?![\w/{])""")
    files = [*LAB.rglob("*.py"), *(root / "bench").glob("*.py"), root / "Makefile", root / "docker-compose.yml",
             *(root / "docker").glob("*")]
    bad = set()
    for path in files:
        text = path.read_text()
        if path.suffix == ".py":
            strings = [n.value for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant)
                       and isinstance(n.value, str)]
        else:
            strings = [text]
        for s in strings:
            for name in pattern.findall(s):
                if name not in NOT_MODULE_NAMES and not resolves(name.rstrip(".")):
                    bad.add(f"{path.relative_to(root)}: {name}")
    assert not bad, "stale lab names: " + ", ".join(sorted(bad))


def string_constants(path: Path) -> list[tuple[int, str]]:
    return [(n.lineno, n.value) for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_only_the_ledger_module_queries_the_sends_table():
    import re

    query = re.compile(r"\b(FROM|INTO|UPDATE|JOIN)\s+sends\b", re.I)
    found = [f"{p.relative_to(LAB.parent)}:{line}" for p in LAB.rglob("*.py") if p.name != "ledger.py"
             for line, s in string_constants(p) if query.search(s)]
    assert not found, f"the ledger's sends table queried outside lab/audit/ledger.py: {found}"


def test_one_verdict_rule_and_one_list_of_outcome_words():
    verdict_words = [f"{p.relative_to(LAB.parent)}:{line}" for p in LAB.rglob("*.py") if p.name != "expectations.py"
                     for line, s in string_constants(p) if s in ("MISMATCH", "as expected", "as documented")]
    assert not verdict_words, f"verdict words written outside lab.audit.expectations.verdict: {verdict_words}"
    from lab.outcomes import GUARANTEES

    lists = []
    for p in LAB.rglob("*.py"):
        if p.name == "outcomes.py":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
                words = {e.value for e in (node.keys if isinstance(node, ast.Dict) else node.elts)
                         if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                if set(GUARANTEES) <= words:
                    lists.append(f"{p.relative_to(LAB.parent)}:{node.lineno}")
    assert not lists, f"the outcome words listed outside lab/outcomes.py: {lists}"


def pipeline_name_tests(tree: ast.AST) -> list[int]:
    """Lines where a ``pipeline`` (a name or an attribute) is compared with a literal name or a literal tuple of
    them."""

    def is_pipeline(node) -> bool:
        return (isinstance(node, ast.Name) and node.id == "pipeline") or (
            isinstance(node, ast.Attribute) and node.attr == "pipeline")

    def literal_names(node) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str)
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)

    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
            and any(is_pipeline(side) and literal_names(other)
                    for side, other in ((node.left, node.comparators[0]), (node.comparators[0], node.left)))]


def test_the_checker_sees_a_pipeline_name_test():
    src = 'if cfg.pipeline == "flink" or pipeline in ("a", "b") or spec.engine == "flink":\n    pass\n'
    assert pipeline_name_tests(ast.parse(src)) == [1, 1]


def test_only_the_registry_tests_a_pipeline_by_its_name():
    found = [f"{p.relative_to(LAB.parent)}:{line}" for p in LAB.rglob("*.py") if p.name != "registry.py"
             for line in pipeline_name_tests(ast.parse(p.read_text()))]
    assert not found, f"a pipeline told apart by its name outside lab/registry.py: {found}"


def test_no_module_is_over_its_line_limit():
    long = {str(p.relative_to(LAB.parent)): n for p in LAB.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MODULE_LINES_AT_MOST}
    assert not long, f"modules over {MODULE_LINES_AT_MOST} lines: {long}"
