# Every target makes its own .venv first, so a fresh clone needs nothing typed before it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint format clean generate

$(STAMP): pyproject.toml labextension/package.json $(wildcard labextension/src/*.ts labextension/src/*.tsx labextension/style/*)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -qq --upgrade pip
	$(PY) -m pip install -qq -e ".[test]"
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m taskcell.demo

# Debian's chromium drives tests/e2e; installed where this runs as root with apt-get (CI).
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null \
	  || echo "taskcell: could not install chromium; the browser test will be skipped"; \
	else echo "taskcell: no $(CHROMIUM) (apt-get install -y chromium as root); the browser test will be skipped"; fi

# The Flyte and Latch SDKs conflict with each other, so each gets a venv of its own, pinned, from
# PyPI; tests/export/test_sdk_modules.py imports and runs the exported modules in them (numpy:
# the demo notebook's own import).
FLYTE_VENV := .venv-flyte
LATCH_VENV := .venv-latch
$(FLYTE_VENV)/.installed:
	$(PYTHON) -m venv $(FLYTE_VENV)
	$(FLYTE_VENV)/bin/python -m pip install -qq "flyte==2.12.1" numpy pandas scikit-learn matplotlib "dask[distributed]" pyarrow ipython
	touch $@

$(LATCH_VENV)/.installed:
	$(PYTHON) -m venv $(LATCH_VENV)
	$(LATCH_VENV)/bin/python -m pip install -qq "latch==2.77.2" numpy pandas scikit-learn matplotlib "dask[distributed]" pyarrow ipython
	touch $@

# Debian's slurm-wlm and munge run a real SLURM on 127.0.0.1 for tests/cluster/test_slurm.py;
# installed where this runs as root with apt-get (CI), which slurmd needs to start jobs anyway.
SLURMCTLD := /usr/sbin/slurmctld
$(SLURMCTLD):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge) >/dev/null \
	  || echo "taskcell: could not install slurm-wlm and munge; the SLURM test will be skipped"; \
	else echo "taskcell: no $(SLURMCTLD) (apt-get install -y slurm-wlm munge as root); the SLURM test will be skipped"; fi

test: $(STAMP) $(CHROMIUM) $(SLURMCTLD) $(FLYTE_VENV)/.installed $(LATCH_VENV)/.installed
	TASKCELL_FLYTE_PYTHON=$(CURDIR)/$(FLYTE_VENV)/bin/python \
	  TASKCELL_LATCH_PYTHON=$(CURDIR)/$(LATCH_VENV)/bin/python \
	  $(PY) -m pytest

# JupyterLab on the demo notebooks; the Resources sidebar is the bars icon on the right.
.PHONY: lab
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=demo_notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

bench: $(STAMP)
	$(PY) -m benchmarks

# The lab extension's TypeScript types, from the Python that writes what the server sends
# (taskcell/planner/schema.py, view.py, taskcell/extension/payloads.py); the suite fails when
# labextension/src/generated.ts is stale.
generate: $(STAMP)
	$(PY) -m taskcell.planner.typescript

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff check --fix . && $(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) $(FLYTE_VENV) $(LATCH_VENV) build dist *.egg-info
