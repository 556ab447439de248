# Local runtime (no container engine needed). `make run` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CONFIG ?= example_configs/quickstart.yaml
RUN_ARGS ?=
TORCH_SPEC ?= torch==2.13.0
# Pinned agent CLIs (npm) live here; the launchers look here before PATH (docs/agents.md).
AGENT_CLI_DIR ?= $(or $(AKA_AGENT_CLI_DIR),.agent-clis)
AGENTS ?= all
LIVE ?=
# Test processes (pytest-xdist): most tests wait on real subprocesses, so two fill two cores.
TEST_WORKERS ?= 2
# Slurm backend (docs/slurm.md): the test Slurm's Debian packages; the submit targets' shape.
comma := ,
SLURM_PACKAGES := slurmctld slurmd slurm-client munge
NODES ?= 1
GPUS_PER_NODE ?= 1
GPU_IDS ?=
SLURM_ARGS ?=

.PHONY: install install-test agent-clis check-agents run parallel-run smoke test lint clean-runs \
	slurm-smoke slurm-run slurm-parallel-submit

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

install: $(VENV)/bin/python
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e .

install-test: $(VENV)/bin/python
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test]"
	@$(MAKE) --no-print-directory agent-clis
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		{ apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null && \
		  apt-get install -y -q bubblewrap >/dev/null; }; }; } || \
		echo "note: bubblewrap is not installed; the agent-sandbox tests will be skipped"
	@[ -x /usr/lib/chromium/chromium ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends chromium >/dev/null; } || \
		echo "note: Debian's chromium is not installed; the dashboard's browser test will be skipped"
	@command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null && \
		command -v munged >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		{ DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(SLURM_PACKAGES) \
		  >/dev/null 2>&1 || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
		  apt-get install -y -q --no-install-recommends $(SLURM_PACKAGES) >/dev/null; }; }; } || \
		echo "note: Slurm is not installed; the Slurm backend's tests will be skipped"

# (Re)install the pinned CLIs when $(AGENT_CLI_DIR)/aka-pins.txt does not list exactly the pinned versions.
agent-clis: $(VENV)/bin/python
	@specs="$$($(PY) -c 'from aka.agents.cli_runner import npm_specs; print(" ".join(npm_specs()))')"; \
	if [ "$$(cat $(AGENT_CLI_DIR)/aka-pins.txt 2>/dev/null)" != "$$specs" ]; then \
		echo "installing agent CLIs into $(AGENT_CLI_DIR): $$specs"; \
		npm install --prefix $(AGENT_CLI_DIR) --no-audit --no-fund --save-exact $$specs && \
		echo "$$specs" > $(AGENT_CLI_DIR)/aka-pins.txt; \
	fi

# make check-agents AGENTS=claude_code,codex [LIVE=1]
check-agents: install
	$(VENV)/bin/aka check-agents --agents $(AGENTS) $(if $(LIVE),--live)

run: install
	$(VENV)/bin/aka run $(CONFIG) $(RUN_ARGS)

# make parallel-run CONFIG=... GPU_IDS=0,1,2,3 [RUN_ARGS=--resume-latest]: one worker per GPU, claiming
# from the run's shared queue; without GPU_IDS, every GPU this machine shows (none: the config's CPU workers).
parallel-run: install
	$(VENV)/bin/aka run $(CONFIG) --gpus $(or $(GPU_IDS),all) $(RUN_ARGS)

smoke: install
	$(VENV)/bin/aka doctor

# Slurm (docs/slurm.md). slurm-smoke: the quickstart on one GPU, waiting for its reports.
slurm-smoke: install
	$(VENV)/bin/aka slurm submit example_configs/quickstart.yaml --nodes 1 --gpus-per-node 1 --wait $(SLURM_ARGS)

# make slurm-run CONFIG=... NODES=2 GPUS_PER_NODE=8 SLURM_ARGS="--partition gpu --time 4:00:00"
slurm-run: install
	$(VENV)/bin/aka slurm submit $(CONFIG) --nodes $(NODES) --gpus-per-node $(GPUS_PER_NODE) $(SLURM_ARGS)

# The seed's form: GPU_IDS=0,1,2,3 asks for that many GPUs per node (Slurm picks which), NODES nodes.
slurm-parallel-submit: install
	$(VENV)/bin/aka slurm submit $(CONFIG) --nodes $(NODES) \
		--gpus-per-node $(if $(GPU_IDS),$(words $(subst $(comma), ,$(GPU_IDS))),$(GPUS_PER_NODE)) $(SLURM_ARGS)

lint: install-test
	$(VENV)/bin/ruff check src tests scripts benchmarks main.py tasks solutions/examples solutions/wrong solutions/kernelbench
	$(VENV)/bin/ruff format --check src tests scripts benchmarks main.py
	$(VENV)/bin/mypy
	MYPYPATH=src:tests:benchmarks $(VENV)/bin/mypy --explicit-package-bases --allow-untyped-defs --allow-incomplete-defs \
		--allow-untyped-calls --allow-untyped-decorators --no-warn-unused-ignores --implicit-reexport --no-strict-optional \
		--no-strict-equality tests benchmarks scripts

test: lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

clean-runs:
	rm -rf workspace_* logs
