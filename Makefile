# Every target creates the virtual environment it needs (.venv, under the repo), from the
# lock: uv.lock pins the whole tree with hashes, and `uv sync --frozen` installs exactly
# that, resolving nothing. Each use installs its own extra: `make demo` the library and
# the `sandbox` extra (the sandbox, Locust, matplotlib, the emulators), every other
# target `dev` (sandbox plus the test and lint tools). `make lock` updates the locks.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

# uv, the installer, comes from PyPI at the version and hashes pinned in
# requirements/uv.txt, with pip, into a bootstrap environment of its own (`uv sync`
# removes whatever the lock does not hold, so it cannot live in .venv).
UV_VENV := .venv-uv
UV := $(UV_VENV)/bin/uv
# The machine's Python, never a downloaded one.
export UV_PYTHON_DOWNLOADS := never
export UV_PYTHON := $(PYTHON)

# Python caches compiled bytecode (__pycache__, git-ignored) even where the environment
# says not to: without it every process compiles what it imports from source, and a
# test run starts hundreds (each sandbox's functions, emulators and cluster; 2-3 s of
# CPU each to compile the Google and Kubernetes clients). From a clean clone the suite
# used a quarter more CPU with PYTHONDONTWRITEBYTECODE=1 than without.
unexport PYTHONDONTWRITEBYTECODE

# One stamp per extra. dev holds sandbox, so installing dev stamps both: `make test`
# then `make demo` installs nothing more.
STAMP := $(VENV)/.installed-dev
SANDBOX_STAMP := $(VENV)/.installed-sandbox

.PHONY: venv demo test checks collect test-emulator lint lock lock-check deploy-check unit fuzz bench browser chromium prometheus sandbox-up sandbox-down clean checkov docs

$(UV): requirements/uv.txt
	@test -x $(UV_VENV)/bin/python || $(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install --quiet --require-hashes --no-deps -r requirements/uv.txt
	@touch $(UV)

# $(call sync,EXTRA,UV-SYNC-OPTIONS): say what is installed, install it from the lock,
# check the result, and unpack DuckDB's spatial extension for the BigQuery emulator.
define sync
	@echo "make: installing accelops with the '$(1)' extra:" \
	  "$$($(UV) export --frozen --extra $(1) --no-hashes --no-header --no-annotate \
	      --no-emit-project | grep -c '==') packages pinned in uv.lock (nothing resolved)"
	$(UV) sync --frozen --extra $(1) $(2)
	$(UV) pip check --quiet --python $(PY)
	$(PY) -c "import duckdb_extensions; duckdb_extensions.import_extension('spatial')"
endef

$(STAMP): uv.lock pyproject.toml | $(UV)
	$(call sync,dev,)
	@touch $(STAMP) $(SANDBOX_STAMP)

# --inexact: a checkout that already has dev keeps its test tools.
$(SANDBOX_STAMP): uv.lock pyproject.toml | $(UV)
	$(call sync,sandbox,--inexact)
	@touch $(SANDBOX_STAMP)

venv: $(STAMP)

demo: $(SANDBOX_STAMP) prometheus
	$(VENV)/bin/accelops demo

lint: $(STAMP) lock-check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy shared sandbox functions services
	$(VENV)/bin/lint-imports

# The deployment, offline: generated files current, HCL formatted, policy checked
# (kustomize builds, strict manifest validation and HCL consistency run in pytest).
deploy-check: $(STAMP) checkov
	$(VENV)/bin/accelops deploy generate --check
	CHECKPOINT_DISABLE=1 terraform fmt -check -recursive terraform

# The suite in parallel: each module on one worker (a module's sandbox stays its own),
# modules in collection order, the sandbox scenarios first (tests/conftest.py). One
# worker more than there are cores: an e2e module mostly waits on its sandbox's
# simulated clock, and with one worker per core the cores sat 44% idle while the
# scenarios ran. It prints the 25 slowest tests and writes bench-results/suite.json; a
# whole-suite run over the budget in pyproject.toml fails. PYTEST_WORKERS=0 runs serially.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test:
	$(MAKE) --no-print-directory -j2 --output-sync=target checks DOCS_GEN=--check
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 \
	  --suite-report=bench-results/suite.json $(PYTEST_ARGS)

# What the suite needs first, two at a time (mypy alone keeps one core busy for half a
# minute on a clean clone): lint, the deployment checks, the docs, Chromium, and the
# collection.
checks: lint deploy-check docs chromium prometheus collect

# The documentation site: the reference pages regenerated from the code (python -m
# docs.gen), then built with --strict (a broken link or anchor fails) into site/,
# git-ignored. Under `make test` (DOCS_GEN=--check) a stale committed page fails instead
# of being rewritten, as tests/unit/test_docs_pages.py does. No --quiet: it drops the
# warnings --strict counts, and a build with broken links then passes.
DOCS_GEN ?=
docs: $(STAMP)
	$(PY) -m docs.gen $(DOCS_GEN)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Every test module imports and the suite collects, in seconds rather than at the end
# of a run. It also leaves the test modules' compiled (assertion-rewritten) bytecode, so
# the workers each load it instead of compiling all of it three times over.
COLLECTED := $(VENV)/collected.txt
collect: $(STAMP)
	@$(PY) -m pytest --collect-only -q $(PYTEST_ARGS) > $(COLLECTED) 2>&1 \
	  || { cat $(COLLECTED); exit 1; }
	@echo "make: $$(tail -1 $(COLLECTED))"

# The browser tests alone: the dashboard and an offline report in headless Chromium.
browser: $(STAMP) chromium
	$(PY) -m pytest tests/browser $(PYTEST_ARGS)

# $(call apt_package,PACKAGE,BINARY,WHY): install Debian's PACKAGE with apt as root, or
# through sudo; `apt-get update` only when the package lists are too old to find it.
# WHY (no commas) says what needs it, in the errors.
APT_UPDATE := env DEBIAN_FRONTEND=noninteractive apt-get update
define apt_package
	@if [ "$$(id -u)" = 0 ]; then as_root=; \
	elif command -v sudo >/dev/null 2>&1; then as_root=sudo; \
	else echo "make: $(2) is missing and installing it needs root (no sudo here): run" \
	  "'apt-get install -y --no-install-recommends $(1)' as root" >&2; exit 1; fi; \
	command -v apt-get >/dev/null 2>&1 || { echo "make: $(2) is missing and there" \
	  "is no apt-get: install Debian's $(1) package ($(3))" >&2; exit 1; }; \
	install="env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(1)"; \
	$$as_root $$install || { $$as_root $(APT_UPDATE) && $$as_root $$install; } \
	  || { echo "make: could not install Debian's $(1) package (see apt's output" \
	    "above); $(3)" >&2; exit 1; }; \
	test -x $(2) || { echo "make: apt installed $(1) but $(2) is missing" >&2; exit 1; }
endef

# tests/browser drive Debian's Chromium (Playwright's own browser downloads cannot be
# fetched here).
CHROMIUM := /usr/bin/chromium

chromium: $(CHROMIUM)

$(CHROMIUM):
	$(call apt_package,chromium,$(CHROMIUM),the browser tests drive it)

# The sandbox's serving part runs a real Prometheus (sandbox/monitoring), Debian's
# package. Its package starts no service of its own here (no init system runs it, and
# policy-rc.d refuses in containers); the sandbox starts its own process on a loopback
# port with its data in the state directory.
PROMETHEUS := /usr/bin/prometheus

prometheus: $(PROMETHEUS)

$(PROMETHEUS):
	$(call apt_package,prometheus,$(PROMETHEUS),the sandbox's serving part runs it)

# The e2e suite with the sandbox on Google's Pub/Sub emulator instead of the stand-in
# (tests that rely on one of the emulator's departures from Pub/Sub are skipped).
test-emulator: $(STAMP) prometheus
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
	$(PY) -m tests.bench.loadgen
	$(PY) -m tests.bench.dashboard
	$(PY) -m tests.bench.hostile
	$(PY) -m tests.bench.serving
	$(PY) -m tests.bench.jobs
	$(PY) -m tests.bench.crd_validation
	$(PY) -m tests.bench.cli
	$(PY) -m tests.bench.bigquery_emulator

sandbox-up: $(SANDBOX_STAMP) prometheus
	$(VENV)/bin/accelops sandbox up

sandbox-down: $(SANDBOX_STAMP)
	$(VENV)/bin/accelops sandbox down

# Policy checks of terraform/. checkov's dependencies conflict with the project's,
# so it gets its own virtual environment, installed from its own hashed lock
# (requirements/checkov.txt) with `uv pip sync`: exactly those files, nothing resolved.
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-stamp

$(CHECKOV_STAMP): requirements/checkov.txt | $(UV)
	@test -x $(CHECKOV_VENV)/bin/python || $(UV) venv --quiet $(CHECKOV_VENV)
	$(UV) pip sync --quiet --require-hashes --python $(CHECKOV_VENV)/bin/python requirements/checkov.txt
	@touch $(CHECKOV_STAMP)

checkov: $(CHECKOV_STAMP)
	CHECKPOINT_DISABLE=1 $(CHECKOV_VENV)/bin/checkov -d terraform --framework terraform --skip-download --compact --quiet

# The locks, from pyproject.toml and requirements/*.in: kept pins stay unless they no
# longer fit (LOCK_ARGS=--upgrade moves everything to the newest that fits). locks.sha256
# records what this wrote, so a lock changed by hand fails lock-check (and make test).
LOCK_ARGS ?=
COMPILE := $(UV) pip compile --quiet --universal --python-version 3.11 --generate-hashes \
  --custom-compile-command 'make lock' $(LOCK_ARGS)

lock: $(UV)
	$(UV) lock $(LOCK_ARGS)
	$(COMPILE) requirements/uv.in -o requirements/uv.txt
	$(COMPILE) requirements/checkov.in -o requirements/checkov.txt
	sha256sum uv.lock requirements/uv.txt requirements/checkov.txt > locks.sha256

# The locks agree with what they were made from, and nobody edited them since.
lock-check: $(UV)
	$(UV) lock --check
	sha256sum --check --quiet locks.sha256

clean:
	rm -rf $(VENV) $(UV_VENV) $(CHECKOV_VENV) .sandbox bench-results .mypy_cache .ruff_cache site
