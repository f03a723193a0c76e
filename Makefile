# Two commands for a newcomer: `make demo` and `make test`.  Everything else is a building block.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: venv demo cluster-up cluster-down cluster-status cluster-clean test test-unit test-integration lint typecheck

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

## The nightly genomics example end to end on the local cluster (scaled to DEMO_SHARDS=40), then a summary.
demo: venv
	$(PY) tools/demo.py

## Local cluster (etcd, kube-apiserver, controller-manager, scheduler, KWOK, Kueue, Azurite) as processes.
cluster-up: venv
	$(PY) -m devcluster up

cluster-down: venv
	$(PY) -m devcluster down

cluster-status: venv
	$(PY) -m devcluster status

cluster-clean: cluster-down
	rm -rf .devcluster

## Tests: every test; the integration fixture starts the cluster when it is not running.
test: venv
	$(PY) -m pytest $(PYTEST_ARGS) tests

test-unit: venv
	$(PY) -m pytest $(PYTEST_ARGS) tests/unit

test-integration: venv
	$(PY) -m pytest $(PYTEST_ARGS) tests/integration

lint: venv
	$(VENV)/bin/ruff check .

typecheck: venv
	$(VENV)/bin/mypy airflow_kueue_provider devcluster
