# Every target creates the virtual environment it needs (.venv, under the repo).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: venv demo test lint unit fuzz bench sandbox-up sandbox-down clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip check
	$(PY) -c "import duckdb_extensions; duckdb_extensions.import_extension('spatial')"
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/accelops demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy shared sandbox functions services
	$(VENV)/bin/lint-imports

test: lint
	$(PY) -m pytest $(PYTEST_ARGS)

unit: $(STAMP)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# The fuzz suite as a longer campaign (make test runs it at scale 1).
FUZZ_SCALE ?= 20
fuzz: $(STAMP)
	ACCELOPS_FUZZ_SCALE=$(FUZZ_SCALE) $(PY) -m pytest tests/fuzz --hypothesis-show-statistics $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m tests.bench
	$(PY) -m tests.bench.slices
	$(PY) -m tests.bench.metrics
	$(PY) -m tests.bench.report
	$(PY) -m tests.bench.hostile

sandbox-up: $(STAMP)
	$(VENV)/bin/accelops sandbox up

sandbox-down: $(STAMP)
	$(VENV)/bin/accelops sandbox down

clean:
	rm -rf $(VENV) .sandbox bench-results .mypy_cache .ruff_cache
