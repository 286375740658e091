# What decides the venv, and only that: the stamp depends on pyproject.toml, constraints.txt and this file, so an
# edit elsewhere in the Makefile does not reinstall 1.4 GB.

# The installer and the build backend (setuptools builds the editable install and the Flink environment's sdists).
PIP_PINS := "pip==26.3" "setuptools==84.2.1" "wheel==0.48.0"

# rfc3987-syntax (with lark) comes with jupyter-events' jsonschema[format-nongpl], and jsonschema imports it, when
# installed, to check IRI formats; it builds a Lark grammar at import: 0.9-1.1 s in every process that imports
# nbformat (papermill, each kernel's plotly set-up, Jupyter, nbconvert). Nothing in the lab validates an IRI.
# Without it (bench/results/nbformat_import.json): papermill imports in 0.41 s instead of 1.52 s, a notebook's
# setup cell takes 0.66 s instead of 1.93 s. The stamp depends on this file, so an existing venv loses them.
UNUSED := rfc3987-syntax lark

# The interpreter is checked before anything is made (lab/host/python_check.py: one line naming the Python found,
# the range pyproject.toml supports and how to pick another); an existing venv's own interpreter is checked too.
$(STAMP): pyproject.toml constraints.txt venv.mk
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "no '$(PYTHON)' on PATH: install it, or name another Python, e.g. make demo PYTHON=python3.11" >&2; exit 1; }
	@if test -x $(BIN)/python; then $(BIN)/python lab/host/python_check.py; else $(PYTHON) lab/host/python_check.py && $(PYTHON) -m venv $(VENV); fi
	$(BIN)/python -m pip install --quiet --upgrade $(PIP_PINS)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	$(BIN)/python -m pip uninstall --quiet --yes $(UNUSED)
	@touch $(STAMP)
