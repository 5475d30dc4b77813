# Everything a fresh machine (Python 3.11, pip, gcc) needs: `make report`, `make test`.
# Each target creates .venv/ and installs the package first when that has not been done.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# Re-install when the dependency list changes.
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup test report env validate-timer clean-venv help

help:
	@echo "make report   set up, then run the study and build the report (main job)"
	@echo "make test     set up, then run the test suite"
	@echo "make setup    create $(VENV)/ and install bench_utils with its dependencies"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "bench_utils needs Python >= 3.10, found " + sys.version.split()[0] + " (set PYTHON=...)")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "[setup] installing bench_utils and its dependencies into $(VENV)/ (torch is large: first run takes minutes)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)
	@echo "[setup] done: $(VENV)/"

test: setup
	$(PY) -m pytest

# Until the grid runner and report builder exist, the report step prints the
# environment and the timer check, which every report will carry.
report: setup
	@echo "[report] environment of this machine:"
	$(PY) -m bench_utils env
	@echo "[report] timer check (bench_utils.measure against torch.utils.benchmark):"
	$(PY) -m bench_utils validate-timer
	@echo "[report] done: printed the environment and the timer check; the study grid and report arrive with the runner."

env: setup
	$(PY) -m bench_utils env

validate-timer: setup
	$(PY) -m bench_utils validate-timer

clean-venv:
	rm -rf $(VENV)
