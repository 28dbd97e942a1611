# The two commands a new user runs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
INTEGRATIONS := $(wildcard integrations/*/pyproject.toml)
DEMO_DB ?= tiermem-demo.db

.PHONY: demo test test-fast test-slow lint types bench install install-tests clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(PIP) install -q -e '.[offline,postgres,cli]'
	touch $@

$(VENV)/.installed-tests: $(VENV)/.installed $(INTEGRATIONS) tests/conformance/fetch.py
	$(PIP) install -q --group tests --group typing
	for dir in $(dir $(INTEGRATIONS)); do $(PIP) install -q -e "$$dir" || exit 1; done
	$(BIN)/python tests/conformance/fetch.py
	touch $@

install: $(VENV)/.installed

install-tests: $(VENV)/.installed-tests

## demo: a conversation on an embedded SQLite file; no API key needed
demo: install
	$(BIN)/tiermem demo --db $(DEMO_DB)

lint: install-tests
	$(BIN)/ruff check src tests examples benchmarks integrations
	$(BIN)/ruff format --check src tests examples benchmarks integrations

types: install-tests
	$(BIN)/mypy src tests examples benchmarks integrations/*/src

## test: lint, types, and the whole fast suite on SQLite and PostgreSQL
test: lint types test-fast

test-fast: install-tests
	$(BIN)/python -m pytest -m "not slow" -q tests $(wildcard integrations/*/tests)

## test-slow: crash, kill and concurrency tests
test-slow: install-tests
	$(BIN)/python -m pytest -m slow -q tests $(wildcard integrations/*/tests)

## bench: every benchmark, one summary
bench: install-tests
	$(PIP) install -q --group benchmark
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(DEMO_DB)*
