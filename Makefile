# signoff — developer entry points. `make demo` and `make test` set up .venv themselves.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv system demo test test-fast test-compat lint bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

system:
	@scripts/setup-system.sh

demo: $(STAMP)
	@$(VENV)/bin/signoff demo

LINT_PATHS := $(wildcard src tests benchmarks examples)

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy

test: lint system
	$(PY) -m pytest -q
	$(PY) -m tests.compat.run_langchain

# LangChain's own HumanInTheLoopMiddleware tests against SignoffMiddleware (docs/langchain.md).
# Fetches the installed langchain's sdist into .cache/compat/ once; skipped when offline.
test-compat: $(STAMP)
	$(PY) -m tests.compat.run_langchain

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" -x

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
