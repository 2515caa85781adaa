# The two set-up-and-go targets: `make demo` and `make test`.
# Both create .venv with Python 3.11 and install the pinned dependencies first.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kiln-installed

.PHONY: demo test test-fast venv chromium clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[models,test]"
	touch $(STAMP)

venv: $(STAMP)

# Headless Chromium for the report's browser tests (Debian's package).  Installed only
# where apt-get exists and we are root; any failure just leaves those tests skipped.
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
			|| echo "make chromium: could not install chromium; the report's browser tests will be skipped"; \
	else echo "make chromium: no apt-get or not root; the report's browser tests will be skipped"; fi

demo: $(STAMP)
	$(VENV)/bin/kiln bench --suite quick

test: $(STAMP) chromium
	$(PY) -m pytest -n 2 -q

test-fast: $(STAMP) chromium
	$(PY) -m pytest -n 2 -q -m "not slow"

clean:
	rm -rf $(VENV) build src/*.egg-info
