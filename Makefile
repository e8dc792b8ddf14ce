# Every target creates the virtual environment it needs (.venv, under the repo).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: venv demo test test-emulator lint deploy-check unit fuzz bench sandbox-up sandbox-down clean checkov

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

# The deployment, offline: generated files current, HCL formatted, policy checked
# (kustomize builds, strict manifest validation and HCL consistency run in pytest).
deploy-check: $(STAMP) checkov
	$(VENV)/bin/accelops deploy generate --check
	CHECKPOINT_DISABLE=1 terraform fmt -check -recursive terraform

test: lint deploy-check
	$(PY) -m pytest $(PYTEST_ARGS)

# The e2e suite with the sandbox on Google's Pub/Sub emulator instead of the stand-in
# (tests that rely on one of the emulator's departures from Pub/Sub are skipped).
test-emulator: $(STAMP)
	ACCELOPS_SANDBOX_PUBSUB=emulator $(PY) -m pytest tests/e2e $(PYTEST_ARGS)

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

# Policy checks of terraform/. checkov's dependencies conflict with the project's,
# so it gets its own virtual environment.
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-stamp

$(CHECKOV_STAMP):
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet 'checkov>=3.3,<4'
	@touch $(CHECKOV_STAMP)

checkov: $(CHECKOV_STAMP)
	CHECKPOINT_DISABLE=1 $(CHECKOV_VENV)/bin/checkov -d terraform --framework terraform --skip-download --compact --quiet

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) .sandbox bench-results .mypy_cache .ruff_cache
