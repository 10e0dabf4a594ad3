# Two commands from a fresh clone:
#   make run    a virtualenv with the runtime dependencies only, then the main pipeline (daemon | Prometheus
#               exporter on http://127.0.0.1:8000/metrics; BIND=0.0.0.0 to serve the network), on the simulator
#               when this host has no Neuron device
#   make test   the virtualenv with the test tools too, the apt tools the tests run (test-tools), every check
# Plain `make` prints the targets (`make help`).
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
BIND ?= 127.0.0.1
SHAPE ?= trn1.32xlarge
CONFIG ?= configs/monitor.conf
PYTEST_ARGS ?=
# pip prints one line per package it fetches; warnings and the rest stay out of the way (errors still show)
PIP := $(PY) -m pip install --disable-pip-version-check
PIP_LINES := { grep --line-buffered -E '^(Collecting|Successfully installed|ERROR|error)' || true; } | sed -u 's/^/    pip: /'
# An editable install compiles no bytecode, and with PYTHONDONTWRITEBYTECODE set Python caches none either: every
# command would compile the package's modules at each start (about 70 ms of CPU for the daemon). Compiled once here;
# an edited module is newer than its .pyc and is compiled again as usual.
BYTECODE := $(PY) -m compileall -q -j 0 neuron_monitor > /dev/null

$(PY):
	@echo "[venv] creating $(VENV) ($$(python3 --version))"
	@python3 -m venv $(VENV)

# What an install builds from: the package's metadata and the optional compiled helper (neuron_monitor/_native.c,
# built in place by `pip install -e`; without a C compiler the install still succeeds and the pure-Python twins
# run). A change to any of them installs again, so an edited helper is always rebuilt before it runs.
INSTALL_INPUTS := pyproject.toml setup.py neuron_monitor/_native.c

# run-only: the package and its runtime dependencies, no test tools (a full test install serves too)
$(VENV)/.installed-run: $(INSTALL_INPUTS) | $(PY)
	@if [ -z "$$(find $(INSTALL_INPUTS) -newer $(VENV)/.installed 2>/dev/null)" ] && [ -e $(VENV)/.installed ]; then \
	  touch $@; exit 0; fi; \
	echo "[install] neuron-monitor and its runtime dependencies (about 1 min on a fresh machine)"; \
	set -o pipefail; $(PIP) -e . 2>&1 | $(PIP_LINES); $(BYTECODE); touch $@

$(VENV)/.installed: $(INSTALL_INPUTS) | $(PY)
	@echo "[install] neuron-monitor with the test and k8s extras (pytest, hypothesis, moto, ruff, mypy, grpcio-tools, ...)"
	@set -o pipefail; $(PIP) -e '.[test,k8s]' 2>&1 | $(PIP_LINES)
	@$(BYTECODE)
	@touch $@ $(VENV)/.installed-run

.PHONY: help venv run test test-tools lint docs bench dist fleet

help:  ## this list
	@echo "neuron-monitor $$(sed -n 's/^__version__ = "\(.*\)"/\1/p' neuron_monitor/__init__.py): make TARGET [VAR=value ...]"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  \1\t\2/' | expand -t 14
	@echo "variables: SHAPE=$(SHAPE) CONFIG=$(CONFIG) PORT=$(PORT) BIND=$(BIND) VENV=$(VENV) PYTEST_ARGS=..."

venv: $(VENV)/.installed  ## the virtualenv with the test extras and the compiled helper (.venv)

run: $(VENV)/.installed-run  ## daemon | Prometheus exporter (simulated SHAPE without /dev/neuron0); Ctrl-C stops
	@$(PY) scripts/run.py --bin $(VENV)/bin --config $(CONFIG) --bind $(BIND) --port $(PORT) --shape '$(SHAPE)'

test-tools:  ## the Debian tools the tests run (prometheus, promtool, systemd, tmux, openssl, kubectl, chromium, victoria-metrics)
	@missing=""; { command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v systemd-analyze >/dev/null 2>&1 || missing="$$missing systemd"; \
	command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	command -v kubectl >/dev/null 2>&1 || missing="$$missing kubernetes-client"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo"; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing >/dev/null; \
	fi
	@# a real OTLP receiver (VictoriaMetrics, Debian's package unpacked into $(VENV)/tools; see the script)
	@scripts/otlp-receivers.sh $(VENV)/tools >/dev/null || echo "test-tools: no VictoriaMetrics binary (the OTLP receiver test will skip)"

test: $(VENV)/.installed test-tools  ## ruff, mypy --strict and every test (what .ci/run runs)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --strict neuron_monitor
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: $(VENV)/.installed  ## ruff check, ruff format --check, mypy --strict
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy --strict neuron_monitor

docs: $(VENV)/.installed-run  ## rewrite the docs' generated parts from the group specs (run after changing a spec)
	$(PY) scripts/make_docs.py

bench: $(VENV)/.installed  ## every benchmark in bench/ (each prints its ratio to its baseline)
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b; done

# `make dist` needs only the build tools, in a virtualenv of their own (not the test toolchain)
BUILD_VENV ?= .venv-build
$(BUILD_VENV)/.installed:
	@echo "[venv] creating $(BUILD_VENV): the build tools only (build, setuptools)"
	@python3 -m venv $(BUILD_VENV)
	@set -o pipefail; $(BUILD_VENV)/bin/python -m pip install --disable-pip-version-check 'build>=1.2' 'setuptools>=77' 2>&1 | $(PIP_LINES)
	@touch $@

dist: $(BUILD_VENV)/.installed  ## the wheel (abi3: one for every CPython >= 3.10) and the sdist in dist/
	$(BUILD_VENV)/bin/python -m build --no-isolation --outdir dist .

# FLEET_NODES simulated nodes -> Prometheus agent -> remote write -> central Prometheus (docs/fleet.md)
FLEET_NODES ?= 100
FLEET_SECONDS ?= 90
fleet: $(VENV)/.installed test-tools  ## the fleet benchmark: series, samples/s, scrape p50/p99, memory, budget vs full
	$(PY) bench/bench_fleet.py --nodes $(FLEET_NODES) --seconds $(FLEET_SECONDS)
