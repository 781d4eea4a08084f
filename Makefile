# Every target makes its own .venv first, so a fresh clone needs nothing typed before it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint format clean

$(STAMP): pyproject.toml labextension/package.json $(wildcard labextension/src/*.ts labextension/style/*)
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

test: $(STAMP) $(CHROMIUM)
	$(PY) -m pytest

# JupyterLab on the demo notebooks; the Resources sidebar is the bars icon on the right.
.PHONY: lab
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=demo_notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

bench: $(STAMP)
	$(PY) -m benchmarks

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix . && $(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) build dist *.egg-info
