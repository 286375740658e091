# The lab's commands: `make demo` (the main job); `make test`, before a change (the unit tests and one short
# scenario per pipeline family, a few minutes); `make test-all`, what CI runs (everything, about half an hour).
# Each creates .venv first when it is missing or out of date.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST := $(BIN)/python -m pytest
# Test processes side by side: on 2 cores the suite is CPU-bound (both cores 80-99% busy by /proc/stat,
# bench/suite_cpu.py), and three processes made each test about 50% slower. Its measured times, which move with the
# machine's hour more than with the code: bench/README.md, the tests' time. TEST_WORKERS=1: one process.
TEST_WORKERS ?= 2
XDIST := $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)
# More pytest arguments for `make test` and `make test-all` (bench/suite_time.py adds --junitxml=FILE),
# e.g. TEST_ARGS=--durations=0.
TEST_ARGS ?=
# `make test`'s tests: all of tests/unit, and of the tests that start brokers, JVMs or notebooks only the nine
# marked quick, one per pipeline family, each its shortest audited fault scenario, so a change that breaks a
# pipeline fails in minutes rather than half an hour.
# tests/conftest.py marks every test by its directory, so a module without its pytestmark cannot slip in.
QUICK := tests/unit tests/integration -m "quick or not (integration or notebook or browser)"

.DEFAULT_GOAL := help

.PHONY: help preflight venv lint flink fetch bundle offline demo test test-all test-fast test-stack reference lab bench bench-matrix soak doctor clean

# `make` alone: each target and its line (the text after `##` on its rule).
help:
	@awk -F':.*## ' '/^[a-z][a-z-]*:.*## / { printf "  make %-13s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

venv: $(STAMP) ## the virtualenv .venv with the pinned packages (every target makes it when missing or stale)

include venv.mk

# The flink pipeline's own environment (PyFlink 2.2.0 pins a pandas, pyarrow and py4j the lab cannot share) and
# Flink's Kafka connector, both into the jar cache's directory, once (lab/flink/env.py; 35-55 s, about 310 MB of wheels).
flink: venv ## the flink pipeline's own PyFlink environment and its Kafka connector
	$(BIN)/python -m lab.flink.env

# Offline install for workshop rooms. `make bundle` (online, once, on a machine of the laptops' OS, CPU and Python)
# fills $(BUNDLE): wheels/ holds every pin of constraints.txt and the pip/setuptools/wheel the venv target installs
# (setuptools is also the build backend of the editable install and of the Flink environment's four sdists), and
# every pin of lab/flink-requirements.txt (408 MB more); cache/ the pinned jar sets. A second run reuses
# what is there. `make offline BUNDLE=<dir>` builds .venv from wheels/ only (no package index), copies cache/ into
# the jar cache (lab.host.jars.cache_dir(): LAB_CACHE_DIR, else ~/.cache/lab; newer files there are kept), then runs
# `lab fetch` (finds every jar cached, builds the class archives), makes the Flink environment from wheels/ (measured
# with the network cut: 26 s) and runs `lab doctor`.
BUNDLE ?= bundle

bundle: venv ## an offline bundle of every wheel and jar, for a room without internet (BUNDLE=dir)
	@mkdir -p "$(BUNDLE)/wheels" "$(BUNDLE)/cache"
	$(BIN)/python -m pip download --quiet --dest "$(BUNDLE)/wheels" --find-links "$(BUNDLE)/wheels" \
	  $(PIP_PINS) -r constraints.txt -c constraints.txt
	$(BIN)/python -m pip download --quiet --dest "$(BUNDLE)/wheels" --find-links "$(BUNDLE)/wheels" \
	  -r lab/flink-requirements.txt -c lab/flink-requirements.txt
	LAB_CACHE_DIR="$(abspath $(BUNDLE))/cache" $(BIN)/lab fetch --no-class-archive
	@echo "bundle: $$(du -sh "$(BUNDLE)" | cut -f1) in $(abspath $(BUNDLE)) ($$(ls "$(BUNDLE)/wheels" | wc -l | tr -d ' ') files in wheels/, jars in cache/)"
	@echo "install a laptop without internet (copy the bundle and the repository there first): make offline BUNDLE=$(abspath $(BUNDLE))"

offline: ## install from a bundle without the network (BUNDLE=dir)
	$(if $(wildcard $(BUNDLE)/wheels/*),,$(error no wheels in $(BUNDLE)/wheels: make the bundle online first with `make bundle` or name yours: make offline BUNDLE=/path/to/bundle))
	PIP_NO_INDEX=1 PIP_FIND_LINKS="$(abspath $(BUNDLE))/wheels" $(MAKE) --no-print-directory venv
	@$(BIN)/python -c 'import shutil, sys; from pathlib import Path; from lab.host.jars import cache_dir; \
	  src, dst = Path(sys.argv[1]), cache_dir(); \
	  todo = [(f, dst / f.relative_to(src)) for f in sorted(src.rglob("*")) if f.is_file()]; \
	  todo = [(f, t) for f, t in todo if not t.exists() or t.stat().st_mtime < f.stat().st_mtime]; \
	  [(t.parent.mkdir(parents=True, exist_ok=True), shutil.copy2(f, t)) for f, t in todo]; \
	  print(f"jar cache: {len(todo)} files copied from {src} into {dst} (newer files there kept)")' "$(BUNDLE)/cache"
	$(BIN)/lab fetch
	PIP_NO_INDEX=1 PIP_FIND_LINKS="$(abspath $(BUNDLE))/wheels" $(BIN)/python -m lab.flink.env
	$(BIN)/lab doctor

# The pinned jars (Kafka's broker, the Spark and Flink connectors, Storm, Samza) into the jar cache, the Storm
# topology and the Samza job compiled, and the JVMs' class archives, once (about 1 min online: 240 MB of jars,
# 225 MB of archives; 0.3 s when everything is there).
fetch: venv ## the pinned jars into the jar cache, the lab's Java compiled, the JVMs' class archives
	$(BIN)/lab fetch

demo: fetch ## the first run: doctor, one crash audited, a small grid and its report
	$(BIN)/lab doctor
	$(BIN)/lab run --pipeline plain --sink append --events 3000 --rate 1000 --faults driver-crash@at=3s
	$(BIN)/lab matrix --grid lab/templates/demo_grid.yaml --out data/results/demo
	$(BIN)/lab report --out data/results/demo

# What the suite needs from the system (Java, PostgreSQL, Chromium): installed as root on Debian/Ubuntu, else the
# one command to run is printed and make stops (tests/preflight.sh).
preflight: ## what the tests need from the system (Java, PostgreSQL, Chromium), or the command to get it
	@tests/preflight.sh

test: preflight venv flink fetch lint ## before a change: linter, unit tests, one short scenario per pipeline family
	$(PYTEST) -q $(XDIST) --durations=20 $(TEST_ARGS) $(QUICK)

# Every test: unit, integration, the notebooks and solutions through papermill, the browser's.
test-all: preflight venv flink fetch lint ## everything CI runs: unit, integration, notebooks, solutions, browser
	$(PYTEST) -q $(XDIST) --durations=20 $(TEST_ARGS) tests

# No JVM, no broker: seconds, for iterating.
test-fast: venv lint ## linter and unit tests only (no JVM, no broker): seconds, for iterating
	$(PYTEST) -q tests/unit

# docker-compose.yml for real, with podman, as root (docs/docker.md): the images it names built from Debian's archive
# (stand-ins for the official ones; cached, rebuilt when their recipe changes), the stack up and healthy, Spark
# executor and driver crashes and a Flink crash audited by `lab run` inside it, a run on the host through the
# published ports, JupyterLab's token, notebook 05 by papermill, then all of it taken down and checked gone.
test-stack: venv fetch ## docker-compose.yml for real with podman, as root
	@tests/stack/preflight.sh
	$(BIN)/python tests/stack/run.py

# The pinned linter (ruff, pyproject.toml's [tool.ruff]) over the code, its tests, benchmarks and docs tools.
lint: venv ## the pinned linter over code, tests, benchmarks and notebooks
	$(BIN)/ruff check --quiet lab tests bench docs/tools notebooks

# docs/reference: every notebook (and its solutions) executed headless with its small parameters, as HTML.
# The notebook tests execute and check them; lab.lessons.reference copies their HTML and records each notebook's digest.
# The README's grid picture (docs/images/semantics_grid.png) from docs/reference/matrix.csv: docs/tools/render_grid.py.
reference: venv ## docs/reference: every notebook and solution executed headless, as HTML
	$(PYTEST) -q $(XDIST) tests/notebooks/test_notebooks.py tests/notebooks/test_solutions.py
	$(BIN)/python -m lab.lessons.reference

# JupyterLab on 127.0.0.1 over the learner's copies of notebooks/ in workspace/ (git ignores it), with the lab's
# JupyterLab settings; prints the one link to open (lab/host/jupyter.py). LAB_JUPYTER_TOKEN: a token of your own.
lab: venv ## JupyterLab on 127.0.0.1 over your copies of the notebooks
	@$(BIN)/lab jupyter

bench: venv ## the testbed and the Spark pipelines' throughput benchmarks
	$(BIN)/python bench/testbed.py
	$(BIN)/python bench/pipelines.py --pipeline structured --pipeline direct --pipeline receiver

# Every notebook and solution, headless, three rounds beside one CPU hog per core: bench/results/load.json.
soak: venv flink fetch ## every notebook three rounds beside one CPU hog per core
	$(BIN)/python bench/soak.py

bench-matrix: venv ## the default grid's wall time
	$(BIN)/python bench/matrix.py

doctor: venv ## is this machine ready? one PASS/FAIL line per check
	$(BIN)/lab doctor

clean: ## remove runs/, .pytest_cache and test-artifacts
	rm -rf runs .pytest_cache test-artifacts
