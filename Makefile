# Local runtime (no container engine needed). `make run` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CONFIG ?= example_configs/quickstart.yaml
RUN_ARGS ?=
TORCH_SPEC ?= torch==2.13.0

.PHONY: install install-test run smoke test lint clean-runs

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

install: $(VENV)/bin/python
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e .

install-test: $(VENV)/bin/python
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test]"

run: install
	$(VENV)/bin/aka run $(CONFIG) $(RUN_ARGS)

smoke: install
	$(VENV)/bin/aka doctor

lint: install-test
	$(VENV)/bin/ruff check src tests scripts main.py
	$(VENV)/bin/mypy

test: lint
	$(PY) -m pytest -q $(PYTEST_ARGS)

clean-runs:
	rm -rf workspace_* logs
