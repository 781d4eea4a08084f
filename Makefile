# Every target makes its own .venv first, so a fresh clone needs nothing typed before it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -qq --upgrade pip
	$(PY) -m pip install -qq -e ".[test]"
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m taskcell.demo

test: $(STAMP)
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
