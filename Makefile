# Everything a fresh machine (Python 3.11 or newer, pip, gcc) needs: `make report`, `make test`.
# Each target creates .venv/ and installs the package first when that has not been done.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# The lock: every dependency pinned, for Python 3.11 on Linux x86_64 (docs/reproducing.md). `make lock` renews it;
# UNLOCKED=1 installs the newest releases pyproject.toml's ranges admit instead.
LOCK       := environments/lock-py311-linux-x86_64.txt
UV_VERSION := 0.13.9
LOCKED     := $(if $(UNLOCKED),unlocked,locked)
# Re-install when the dependency list, the lock or the choice between them changes.
STAMP  := $(VENV)/.installed-$(LOCKED)

.PHONY: setup test typecheck bench report lab env validate-timer clean-venv help test-compat wheelhouse lock reproduce

help:
	@echo "make report   set up, then run the study and build the report (main job)"
	@echo "              (EXECUTOR=ray [RAY_ADDRESS=auto|HOST:PORT|ray://HOST:10001]: on a Ray cluster, docs/cluster.md)"
	@echo "make test     set up, then run the test suite, then the type check"
	@echo "make typecheck    set up, then type-check the package (mypy; pyproject.toml's [tool.mypy])"
	@echo "make test-compat  the test suite in $(COMPAT_VENV)/: the GPU image's Python and versions (docs/testing.md)"
	@echo "make wheelhouse   download into $(WHEELHOUSE)/ the wheels a GPU host lacks (PYTHON_VERSION=3.12)"
	@echo "make bench    set up, then measure what a study costs beyond its measurements"
	@echo "              (BENCH_GRID=grid.yaml; RESULTS=results.jsonl from a GPU projects the guide's grid;"
	@echo "              PROFILE_GRID=grid.yaml: what profiling costs compiled cells, default params/cpu-quick.yaml)"
	@echo "make lab      set up, then start JupyterLab on the project with its kernel (LAB_PORT=8888)"
	@echo "make env      print what every record says about this machine"
	@echo "make validate-timer  check the timer against torch.utils.benchmark and do_bench"
	@echo "make setup    create $(VENV)/ and install bench_utils with the locked versions ($(LOCK));"
	@echo "              UNLOCKED=1: the newest releases instead"
	@echo "make lock     renew $(LOCK), keeping its versions where they still fit (UPGRADE=1: the newest)"
	@echo "make reproduce STUDY=reports/<study>  re-run a published study in the versions it was measured with,"
	@echo "              into reports/<study>-reproduced/, and compare the two (docs/reproducing.md)"
	@echo "make clean-venv      remove $(VENV)/"

setup: $(STAMP)

$(STAMP): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "bench_utils needs Python >= 3.11, found " + sys.version.split()[0] + " (set PYTHON=...)")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c 'import platform, sys; sys.version_info[:2] == (3, 11) and platform.machine() == "x86_64" or print("[setup] note: $(LOCK) was resolved for Python 3.11 on x86_64; this is " + platform.python_version() + " on " + platform.machine() + " (UNLOCKED=1 if a pin does not install)")'
	@echo "[setup] installing bench_utils and its dependencies ($(LOCKED)) into $(VENV)/ (torch is large: first run takes minutes)"
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile $(if $(UNLOCKED),,-c $(LOCK)) -e '.[test,ray]'
	@# pip byte-compiles one file at a time (55 s of a 154-s install on 2 cores): here on every core, 38 s. A file
	@# that does not compile (a package's template, say) stays source, as pip leaves it.
	@$(PY) -m compileall -q -j 0 $(VENV)/lib > /dev/null 2>&1 || true
	$(PY) -m ipykernel install --sys-prefix --name bench-utils --display-name "Python (bench-utils)" > /dev/null
	@rm -f $(VENV)/.installed-*
	@echo "$(if $(UNLOCKED),unlocked: the newest releases,locked: $(LOCK))" > $(STAMP)
	@echo "[setup] done: $(VENV)/"

# uv resolves for a named Python and platform without installing anything, in seconds, and keeps the versions
# already in the file unless told to upgrade; pip installs its output as it is (no uv needed to set up).
lock: setup
	$(PY) -m pip install --quiet --disable-pip-version-check 'uv==$(UV_VERSION)'
	$(PY) -m uv pip compile pyproject.toml --extra test --extra ray --python-version 3.11 \
		--python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock" $(if $(UPGRADE),--upgrade) \
		--quiet -o $(LOCK)
	@echo "[lock] $(LOCK): $$(grep -c '==' $(LOCK)) pins; make setup installs them"

# In parallel (pytest-xdist), a worker more than the CPUs (TEST_WORKERS=1: serially): most tests wait on a kernel,
# a subprocess or a compiler, so 3 workers on this 2-core machine took 6.0 minutes where 2 took 6.6 and one 10.5.
# Each worker's torch uses one thread (it would take every core). Each worker takes device locks in a folder of its
# own (tests/conftest.py). The tests that judge real durations (busy waits timed by compare and measure) and those
# that start a real Ray cluster, marked serial, run after, alone: under the parallel load a stall once hid a 2x
# speed-up, and a Ray node once failed to start.
# compileall: where PYTHONDONTWRITEBYTECODE is set (this machine), every process the tests start would otherwise
# compile the package from source again. --durations=10: the 10 slowest tests, where make test's time goes.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
# The tests that need the machine to themselves (marked serial): real durations, and a real Ray cluster, whose nodes
# Ray gives a fixed 30 s to start (under the parallel load one once did not). Named here: collecting all costs 11 s.
SERIAL_TESTS := tests/measurement tests/cluster/test_ray_cluster.py

test: setup
	@$(PY) -m compileall -q bench_utils tools benchmarks > /dev/null
ifeq ($(TEST_WORKERS),1)
	$(PY) -m pytest --durations=10
else
	OMP_NUM_THREADS=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not slow and not serial" --durations=10
	$(PY) -m pytest -q -m "serial and not slow" $(SERIAL_TESTS)
endif
	$(PY) -m mypy

# mypy over the package (pyproject.toml's [tool.mypy]); make test runs it last, alone: about 10 s from nothing
# on this 2-core machine, seconds where its cache (.mypy_cache/) holds the files that did not change.
typecheck: setup
	$(PY) -m mypy

# Per-cell wall time split into measured parts and overhead; see benchmarks/README.md.
BENCH_GRID ?= benchmarks/grids/resnet18-eager.yaml

# PROFILE_GRID: compiled cells, for what a profile costs them (make report's grid on a CPU; PROFILE_GRID= to skip).
PROFILE_GRID ?= params/cpu-quick.yaml

bench: setup
	$(PY) benchmarks/study_cost.py $(BENCH_GRID) $(if $(RESULTS),--results $(RESULTS))
	$(if $(PROFILE_GRID),$(PY) benchmarks/study_cost.py $(PROFILE_GRID))
	$(PY) benchmarks/lease_replay.py
	@echo "[bench] the slow end-to-end tests make test leaves out (every variant through the runner; Ray's exactly-once;"
	@echo "[bench] a CPU case where compile loses, diagnosed), and the 10 slowest of them:"
	$(PY) -m pytest -m slow --durations=10

# Where the grid runs: local (this machine's devices) or ray (a Ray cluster: RAY_ADDRESS, which Ray
# reads too, names it; without it, a cluster of this machine alone). See docs/cluster.md.
EXECUTOR ?= local

# The study grid: the guide's where CUDA is available (or on a cluster), the CPU one otherwise
# (override: PARAMS=...).
ifeq ($(EXECUTOR),ray)
PARAMS ?= params/hf-guide.yaml
else
PARAMS ?= $(shell $(PY) -c 'import torch; print("params/hf-guide.yaml" if torch.cuda.is_available() else "params/cpu-quick.yaml")' 2>/dev/null || echo params/cpu-quick.yaml)
endif

STUDY_DIR = reports/$(shell $(PY) -c 'from bench_utils.study.grid.grid_file import load_grid; print(load_grid("$(PARAMS)").study)' 2>/dev/null)
LOCALES ?= en,ar,es

report: setup
ifneq ($(EXECUTOR),ray)
	@echo "[report] environment of this machine:"
	$(PY) -m bench_utils env
	@echo "[report] timer check (bench_utils.measure against torch.utils.benchmark), saved for the report:"
	$(PY) -m bench_utils validate-timer --out $(STUDY_DIR)/timer_check.json
else
	@echo "[report] on a Ray cluster: each record carries its node's environment; no timer check here"
	@echo "[report] (docs/cluster.md says how to add one from a node)"
endif
	@echo "[report] running the study grid $(PARAMS) (resumes: cells already measured are skipped):"
	@# The report is rendered even when some cells failed (they are shown as errors); the exit status is the grid's.
	@status=0; $(PY) -m bench_utils run $(PARAMS) $(if $(filter ray,$(EXECUTOR)),--executor ray) || status=$$?; \
	echo "[report] rendering the report ($(LOCALES)):"; \
	$(PY) -m bench_utils report $(STUDY_DIR) --locales $(LOCALES) || exit $$?; \
	echo "[report] done: open $(STUDY_DIR)/index.html"; exit $$status

# JupyterLab on this machine only (127.0.0.1; as root too, as in containers); from elsewhere, tunnel the port:
#   ssh -N -L 8888:localhost:8888 USER@GPU-HOST   then open the URL it prints, on your own machine.
# bench_utils/lab_settings: Lab's own settings for this server (a Run All before the notebook has found its kernel
# says so, instead of dropping the cells); bench_utils.lab_sessions: the explore notebook's kernel started with it.
LAB_PORT ?= 8888

lab: setup
	@echo "[lab] JupyterLab on $(CURDIR), kernel \"Python (bench-utils)\"; open the URL below."
	@echo "[lab] on a remote machine: ssh -N -L $(LAB_PORT):localhost:$(LAB_PORT) USER@HOST from yours first."
	$(PY) -m jupyterlab --no-browser --ip=127.0.0.1 --port=$(LAB_PORT) --ServerApp.root_dir="$(CURDIR)" \
		--MultiKernelManager.default_kernel_name=bench-utils $(if $(filter 0,$(shell id -u)),--allow-root) \
		--ServerApp.jpserver_extensions bench_utils.lab_sessions=True \
		--LabApp.app_settings_dir="$(CURDIR)/bench_utils/lab_settings" \
		--LabApp.extra_labextensions_path="$(CURDIR)/bench_utils/lab_extensions"

env: setup
	$(PY) -m bench_utils env

validate-timer: setup
	$(PY) -m bench_utils validate-timer

clean-venv:
	rm -rf $(VENV)

# The GPU machines' image: its Python and versions (environments/gpu-image-constraints.txt), without what it
# lacks (Ray, JupyterLab, Playwright), and the project not installed but on PYTHONPATH, as on a GPU host.
COMPAT_VENV        := .venv-compat
COMPAT_PY          := $(COMPAT_VENV)/bin/python
COMPAT_CONSTRAINTS := environments/gpu-image-constraints.txt
COMPAT_STAMP       := $(COMPAT_VENV)/.installed-stamp
COMPAT_INSTALL     := $(COMPAT_PY) -m pip install --quiet --disable-pip-version-check -c $(COMPAT_CONSTRAINTS)
# pyenv's shim answers for python3.12 only where 3.12 is the selected version: then look into pyenv itself.
COMPAT_PYTHON ?= $(shell python3.12 -c '' 2>/dev/null && echo python3.12 || \
	ls -d $$(pyenv root 2>/dev/null)/versions/3.12*/bin/python3.12 2>/dev/null | tail -n 1)

$(COMPAT_STAMP): pyproject.toml $(COMPAT_CONSTRAINTS) tools/gpu_image.py
	@test -n "$(COMPAT_PYTHON)" || { echo "make test-compat needs Python 3.12: set COMPAT_PYTHON=..."; exit 2; }
	@test -x $(COMPAT_PY) || $(COMPAT_PYTHON) -m venv $(COMPAT_VENV)
	@echo "[test-compat] the GPU image's versions into $(COMPAT_VENV)/ (torch is large: the first run takes minutes)"
	$(COMPAT_INSTALL) packaging
	$(COMPAT_PY) tools/gpu_image.py requirements --extra test > $(COMPAT_VENV)/requirements.txt
	$(COMPAT_INSTALL) -r $(COMPAT_VENV)/requirements.txt
	$(COMPAT_PY) -m ipykernel install --sys-prefix --name bench-utils --display-name "Python (bench-utils)" > /dev/null
	@touch $(COMPAT_STAMP)

# PYTEST_ARGS=tests/measurement for a part of the suite.
test-compat: $(COMPAT_STAMP)
	$(COMPAT_PY) -m pip list --disable-pip-version-check --format=freeze | grep -iE '^(torch|transformers|timm)=='
	PYTHONPATH=$(CURDIR) $(COMPAT_PY) -m pytest $(PYTEST_ARGS)

# Wheels for a GPU host that reaches no registry (docs/testing.md): what the project needs and its image lacks.
PYTHON_VERSION ?= 3.12
WHEELHOUSE     ?= .whl

wheelhouse: setup
	$(PY) tools/wheelhouse.py --python-version $(PYTHON_VERSION) --dest $(WHEELHOUSE)
	$(PY) -c 'from bench_utils.environment.capture import write_source_commit; print("commit for the copy:", write_source_commit().name)'

# STUDY=reports/<study> [STUDY_ENV=<environment>, where its records hold several]: docs/reproducing.md
reproduce: setup
	@test -n "$(STUDY)" || { echo "make reproduce needs STUDY=reports/<study> (a study folder)"; exit 2; }
	$(PY) -m bench_utils reproduce $(STUDY) $(if $(STUDY_ENV),--environment $(STUDY_ENV))
