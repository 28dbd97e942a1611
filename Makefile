# The two commands a new user runs: `make demo` and `make test`; `make examples` runs
# every example.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
INTEGRATIONS := $(wildcard integrations/*/pyproject.toml)
DEMO_DB ?= tiermem-demo.db
# chat_service.py is a server: `make examples` plays its in-process demo instead.
EXAMPLES := $(filter-out examples/chat_service.py,$(wildcard examples/*.py))
EXAMPLES_DIR ?= .examples

.PHONY: demo examples dist dist-check docs docs-serve test test-fast test-slow lint types bench install install-tests clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# tiermem with its extras, and the integrations the examples use: they are not on a
# package index, so they are installed (editable) from this repository.
$(VENV)/.installed: $(BIN)/python pyproject.toml $(INTEGRATIONS)
	$(PIP) install -q -e '.[offline,postgres,cli,mcp,embeddings]' $(addprefix -e ,$(dir $(INTEGRATIONS)))
	$(PIP) install -q 'langmem>=0.0.30'  # examples/langgraph_langmem.py
	touch $@

$(VENV)/.installed-tests: $(VENV)/.installed tests/conformance/fetch.py
	$(PIP) install -q --group tests --group typing --group examples
	$(BIN)/python tests/conformance/fetch.py
	touch $@

install: $(VENV)/.installed

install-tests: $(VENV)/.installed-tests

## demo: a conversation on an embedded SQLite file; no API key needed
demo: install
	$(BIN)/tiermem demo --db $(DEMO_DB)

## examples: run every example (no API key needed), writing their files in $(EXAMPLES_DIR)/
examples: install
	mkdir -p $(EXAMPLES_DIR)
	for example in $(EXAMPLES); do \
		echo "== $$example"; \
		(cd $(EXAMPLES_DIR) && $(abspath $(BIN))/python $(CURDIR)/$$example < /dev/null) || exit 1; \
	done
	$(PIP) install -q --group examples
	cd $(EXAMPLES_DIR) && $(abspath $(BIN))/python $(CURDIR)/examples/chat_service.py demo \
		--url sqlite:///chat_service.db

## dist: wheels of tiermem and of each integration in dist/ (pip install --find-links dist ...)
dist: $(BIN)/python
	rm -rf dist
	$(PIP) wheel -q --no-deps -w dist . $(dir $(INTEGRATIONS))

## dist-check: install the wheels in a clean environment and run every README's quick start
dist-check: dist
	$(BIN)/python tests/packaging/check_dist.py

$(VENV)/.installed-docs: $(BIN)/python pyproject.toml
	$(PIP) install -q --group docs
	touch $@

## docs: build the documentation site into site/; a warning or a broken reference fails it
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## docs-serve: serve the documentation at http://127.0.0.1:8000, rebuilt on every change
docs-serve: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

lint: install-tests
	$(BIN)/ruff check src tests examples benchmarks integrations
	$(BIN)/ruff format --check src tests examples benchmarks integrations

types: install-tests
	$(BIN)/mypy src tests examples benchmarks integrations/*/src

## test: lint, types, and the whole fast suite on SQLite and PostgreSQL
test: lint types test-fast

# Two workers: every test has its own files, PostgreSQL schema and application name.
test-fast: install-tests
	$(BIN)/python -m pytest -m "not slow" -q -n 2 tests $(wildcard integrations/*/tests)

## test-slow: crash, kill and concurrency tests, and the long state-machine runs
# On two workers: the crash and kill tests wait on what they observe, never on a
# guess at timing, so they hold on a loaded machine.
test-slow: install-tests
	$(BIN)/python -m pytest -m slow -q -n 2 tests $(wildcard integrations/*/tests)

## bench: every benchmark, one summary
bench: install-tests
	$(PIP) install -q --group benchmark --group examples
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) site dist .pytest_cache .mypy_cache .ruff_cache $(DEMO_DB)* $(EXAMPLES_DIR)
