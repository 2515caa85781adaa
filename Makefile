# The two set-up-and-go targets: `make demo` and `make test`.
# Both create a virtual environment for the chosen Python and install the pinned
# dependencies first.  PYTHON picks the interpreter (python3.11, the default;
# python3.12; python3.13); each version gets its own environment: .venv for 3.11,
# .venv-3.12 and .venv-3.13 for the others.
PYTHON ?= python3.11
PYTHON_BIN := $(shell sh .ci/find-python $(PYTHON))
ifeq ($(PYTHON_BIN),)
$(error no interpreter named $(PYTHON) found (on PATH or in pyenv's versions))
endif
PYVER := $(shell $(PYTHON_BIN) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
VENV := $(if $(filter 3.11,$(PYVER)),.venv,.venv-$(PYVER))
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kiln-installed

.PHONY: demo test test-fast venv chromium clean

# torch==2.13.0: on 3.11 pip takes the CPU wheel from this machine's disk; on 3.12 and
# 3.13 the registry's build of the same version (a CUDA build; it runs on the CPU).
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON_BIN) -m venv $(VENV)
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
	$(VENV)/bin/kiln bench --suite quick --frontend both

test: $(STAMP) chromium
	$(PY) -m pytest -n 2 -q

test-fast: $(STAMP) chromium
	$(PY) -m pytest -n 2 -q -m "not slow"

clean:
	rm -rf .venv .venv-3.12 .venv-3.13 build src/*.egg-info
