# pairjudge developer tasks. `make` (or `make help`) lists them. Commands run from $(VENV), so
# `make install` first; .ci/run does the whole thing from a clean checkout, services included.

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.DEFAULT_GOAL := help
.PHONY: help install check test unit demo bench schemas clean

help: ## List the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z-]*:.*## / { printf "  %-9s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo "  (VENV=$(VENV); override with make VENV=path ...)"

install: ## Create the virtualenv and install pairjudge editable, with the dev extras
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -e ".[dev]"

check: ## Lint and type-check: ruff check, ruff format --check, mypy, import-linter (layering)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy bench tests
	$(BIN)/lint-imports

test: check ## check, then the whole suite (real Kafka and llama.cpp server: see .ci/run)
	$(BIN)/pytest -q

unit: ## Unit tests only (no services)
	$(BIN)/pytest -q tests/unit

demo: ## The whole path on embedded defaults: Tansu broker, offline judge, sample pairs
	$(BIN)/pairjudge demo

bench: ## Pipeline throughput benchmark
	$(BIN)/python -m bench.pipeline

schemas: ## Export the event JSON Schemas to schemas-json/
	$(BIN)/pairjudge schemas export schemas-json/

clean: ## Remove caches and build output (keeps the virtualenv, the Kafka jars and the llama wheel)
	rm -rf .mypy_cache .ruff_cache .pytest_cache .import_linter_cache build dist
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
