# The commands that work on a fresh Debian 12 machine (as root):
#   make demo   from nothing to a finished sweep on the embedded dev cluster, with its report
#   make exporter-container   the exporter in its container against the dev cluster (its URL)
#   make test   every test: lint, unit, promtool, live (real dev cluster + stack)
VENV ?= .venv
PY := $(VENV)/bin/python
CEPHSCOPE := $(VENV)/bin/cephscope
DEMO_STATE ?= $(HOME)/.local/state/cephscope/demo

.PHONY: setup demo demo-down exporter-container test test-unit lint bench clean

setup:
	bash deploy/install.sh

demo: setup
	bash deploy/demo.sh "$(DEMO_STATE)"

demo-down:
	-$(CEPHSCOPE) stack down --state-dir "$(DEMO_STATE)/stack"
	-$(CEPHSCOPE) devcluster down --state-dir "$(DEMO_STATE)/cluster"

# The exporter's image against the dev cluster: cluster up and image built when absent.
exporter-container: setup
	$(PY) -m cephscope.deploy.exporter_container

lint: setup
	$(VENV)/bin/ruff check .

# Two workers, each test module whole on one, in the order tests/live/conftest.py gives (most
# of a live test is waiting on the cluster); then the `serial` tests, which compare latencies
# across runs, alone.
test: setup
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -p no:cacheprovider -ra --durations=25 -n 2 --dist loadfile --no-loadscope-reorder -m "not serial" tests
	$(PY) -m pytest -p no:cacheprovider -ra --durations=10 -m serial tests

test-unit: setup
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -p no:cacheprovider -ra -n 2 -m "not live" tests

bench: setup
	$(PY) benchmarks/scrape_cost.py
	$(PY) benchmarks/render_cost.py

clean:
	rm -rf $(VENV) build *.egg-info
