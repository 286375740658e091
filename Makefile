# The lab's two commands: `make demo` (the main job) and `make test` (everything).
# Both create .venv first when it is missing or out of date.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST := $(BIN)/python -m pytest
# Test processes side by side: the suite waits on batches, triggers and producers more than it computes
# (measured on 2 cores: 13.6 CPU-minutes in 28 minutes of wall time). TEST_WORKERS=2 takes 15-17.5 minutes,
# but notebook 01's receiver runs stalled under that load in 2 of 5 runs: one process by default until that is fixed.
TEST_WORKERS ?= 1

.PHONY: venv demo test test-fast lab bench bench-matrix doctor clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==26.3" "setuptools==84.2.1" "wheel==0.48.0"
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	@touch $(STAMP)

demo: venv
	$(BIN)/lab fetch
	$(BIN)/lab doctor
	$(BIN)/lab run --pipeline plain --sink append --events 3000 --rate 1000 --faults driver-crash@at=3s
	$(BIN)/lab matrix --grid lab/templates/demo_grid.yaml --out data/results/demo
	$(BIN)/lab report --out data/results/demo

test: venv
	$(PYTEST) -q $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup) --durations=20 tests

test-fast: venv
	$(PYTEST) -q tests/unit

lab: venv
	$(BIN)/jupyter lab --ip 127.0.0.1 --no-browser --notebook-dir notebooks $$([ "$$(id -u)" = 0 ] && echo --allow-root) \
	  --IdentityProvider.token="$${LAB_JUPYTER_TOKEN:-$$($(BIN)/python -c 'import secrets;print(secrets.token_hex(16))')}"

bench: venv
	$(BIN)/python bench/testbed.py
	$(BIN)/python bench/pipelines.py --pipeline structured --pipeline direct --pipeline receiver

bench-matrix: venv
	$(BIN)/python bench/matrix.py

doctor: venv
	$(BIN)/lab doctor

clean:
	rm -rf runs .pytest_cache test-artifacts
