# Every target creates the virtual environment it needs (.venv, under the repo).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: venv demo test test-emulator lint deploy-check unit fuzz bench browser chromium sandbox-up sandbox-down clean checkov

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

# The suite in parallel: each module on one worker (a module's sandbox stays its own),
# one worker per core (an e2e module's sandbox is a dozen busy processes). It prints the
# 25 slowest tests and writes bench-results/suite.json; a whole-suite run over the budget
# in pyproject.toml fails. PYTEST_WORKERS=0 runs serially.
PYTEST_WORKERS ?= auto
test: lint deploy-check chromium
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --durations=25 \
	  --suite-report=bench-results/suite.json $(PYTEST_ARGS)

# The browser tests alone: the dashboard and an offline report in headless Chromium.
browser: $(STAMP) chromium
	$(PY) -m pytest tests/browser $(PYTEST_ARGS)

# tests/browser drive Debian's Chromium (Playwright's own browser downloads cannot be
# fetched here). Installed with apt as root, or through sudo; `apt-get update` only
# when the package lists are too old to find it.
CHROMIUM := /usr/bin/chromium
APT_INSTALL_CHROMIUM := env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
APT_UPDATE := env DEBIAN_FRONTEND=noninteractive apt-get update

chromium: $(CHROMIUM)

$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ]; then as_root=; \
	elif command -v sudo >/dev/null 2>&1; then as_root=sudo; \
	else echo "make: $(CHROMIUM) is missing and installing it needs root (no sudo here): run" \
	  "'apt-get install -y --no-install-recommends chromium' as root" >&2; exit 1; fi; \
	command -v apt-get >/dev/null 2>&1 || { echo "make: $(CHROMIUM) is missing and there" \
	  "is no apt-get: install Debian's chromium package, which the browser tests drive" >&2; \
	  exit 1; }; \
	$$as_root $(APT_INSTALL_CHROMIUM) \
	  || { $$as_root $(APT_UPDATE) && $$as_root $(APT_INSTALL_CHROMIUM); } \
	  || { echo "make: could not install Debian's chromium package (see apt's output" \
	    "above); the browser tests need $(CHROMIUM)" >&2; exit 1; }; \
	test -x $(CHROMIUM) || { echo "make: apt installed chromium but $(CHROMIUM) is" \
	  "missing" >&2; exit 1; }

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
	$(PY) -m tests.bench.telemetry
	$(PY) -m tests.bench.schedule
	$(PY) -m tests.bench.metrics
	$(PY) -m tests.bench.report
	$(PY) -m tests.bench.dashboard
	$(PY) -m tests.bench.hostile
	$(PY) -m tests.bench.serving
	$(PY) -m tests.bench.jobs
	$(PY) -m tests.bench.crd_validation

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
