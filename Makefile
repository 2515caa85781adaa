# The two set-up-and-go targets: `make demo` and `make test`.
# Both create .venv with Python 3.11 and install the pinned dependencies first.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kiln-installed

.PHONY: demo test test-fast venv clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[models,test]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/kiln bench --suite quick

test: $(STAMP)
	$(PY) -m pytest -n 2 -q

test-fast: $(STAMP)
	$(PY) -m pytest -n 2 -q -m "not slow"

clean:
	rm -rf $(VENV) build src/*.egg-info
