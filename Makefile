# Two commands from a fresh clone:
#   make run    set up a virtualenv and run the main pipeline (daemon | Prometheus exporter on :8000),
#               on the simulator when this host has no Neuron device
#   make test   set up the virtualenv and the test tools (Prometheus server), run every test
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
SHAPE ?= trn1.32xlarge
CONFIG ?= configs/monitor.conf
PYTEST_ARGS ?=

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,k8s]'
	touch $@

.PHONY: venv run test test-tools lint bench

venv: $(VENV)/.installed

run: $(VENV)/.installed
	@if ls /dev/neuron0 >/dev/null 2>&1; then src=""; else \
	  echo "no Neuron device here: running on a simulated $(SHAPE)" >&2; src="--simulate $(SHAPE)"; fi; \
	echo "metrics on http://127.0.0.1:$(PORT)/metrics (Ctrl-C stops)" >&2; \
	$(VENV)/bin/neuron-monitor -c $(CONFIG) $$src | $(VENV)/bin/neuron-monitor-prometheus --port $(PORT)

test-tools:
	@missing=""; { command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v systemd-analyze >/dev/null 2>&1 || missing="$$missing systemd"; \
	command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	command -v kubectl >/dev/null 2>&1 || missing="$$missing kubernetes-client"; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo"; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing >/dev/null; \
	fi

test: $(VENV)/.installed test-tools
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --strict neuron_monitor
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy --strict neuron_monitor

bench: $(VENV)/.installed
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b; done
