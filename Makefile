# The short commands. `make train` and `make test` work on a fresh machine that has only Python 3.11.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Two installs, each with its stamp: `make train` needs only the package and its base requirements; `make test`
# (and the tools below) add the [dev] set: nbdev, pytest, Playwright, JupyterLab and every optional extra.
BASE   := $(VENV)/.rectiflow-base
DEV    := $(VENV)/.rectiflow-dev
OUT    ?= runs/default
ARGS   ?=
# Tests run two notebooks at a time with one thread each: two processes with two OpenMP threads each on
# two cores spin-wait on each other and run an order of magnitude slower.
TEST_ENV := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MPLBACKEND=Agg

.PHONY: install install-dev browser train test test-slow check readme pictures bench bench-all bench-gpu clean-runs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(BASE): setup.py settings.ini | $(BIN)/python
	@# CPU torch first: a bare `torch` requirement with no torch installed pulls a multi-GB CUDA build.
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e .
	touch $(BASE)

$(DEV): $(BASE)
	$(BIN)/pip install -e ".[dev]"
	touch $(DEV)

install: $(BASE)

install-dev: $(DEV)

# Debian's chromium for tests/ui/test_browser.py (Playwright drives it; never a downloaded browser build).
# Without root or apt-get it is not installed and that test skips, saying why.
browser:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium fonts-dejavu-core; \
	else echo "No /usr/bin/chromium, and no root with apt-get to install it: tests/ui/test_browser.py will skip."; fi

train: install
	$(BIN)/rectiflow train --out $(OUT) --overwrite $(ARGS)

check: install-dev
	@before=$$(find rectiflow -name '*.py' | sort | xargs sha256sum); \
	$(BIN)/nbdev_export; \
	after=$$(find rectiflow -name '*.py' | sort | xargs sha256sum); \
	if [ "$$before" != "$$after" ]; then echo "nbdev_export changed rectiflow/: the package did not match the notebooks (it does now; commit it)."; exit 1; fi
	@tmp=$$(mktemp -d); cp -r nbs $$tmp/nbs; $(BIN)/nbdev_clean --fname $$tmp/nbs >/dev/null; \
	if ! diff -rq nbs $$tmp/nbs; then echo "Notebooks are not clean: run nbdev_clean and commit."; rm -rf $$tmp; exit 1; fi; rm -rf $$tmp
	$(BIN)/python .ci/readme.py --check
	$(BIN)/python .ci/lint.py

# The digits tutorial, the longest notebook by far (a training with its gates, range test and evaluation), starts at
# once beside the others: run last, as nbdev_test's order has it, it would leave the second worker idle.
# pytest runs on two workers too (pytest-xdist): a test file's tests stay together on one worker (conftest.py).
test: check browser
	@$(TEST_ENV) $(BIN)/nbdev_test --n_workers 1 --path nbs/tutorials/digits.ipynb & tutorial=$$!; \
	$(TEST_ENV) $(BIN)/nbdev_test --n_workers 2 --skip_file_glob digits.ipynb; rest=$$?; \
	wait $$tutorial && test $$rest = 0
	$(TEST_ENV) $(BIN)/pytest -q -n 2 --dist loadfile tests

# The slow tests (minutes each): the full golden defaults, bit-identical to their records.
test-slow: install-dev
	$(TEST_ENV) $(BIN)/pytest -q --slow -m slow tests

readme: install
	$(BIN)/python .ci/readme.py

# Re-run the notebooks (or NBS="nbs/11_flow.sampling.ipynb ...") and keep their cheap cells' pictures as outputs.
pictures: install-dev
	$(TEST_ENV) $(BIN)/python .ci/pictures.py $(NBS)
	$(BIN)/nbdev_clean

bench: install-dev
	$(BIN)/python benchmarks/run_benchmarks.py --suite perf

bench-all: install-dev
	$(BIN)/python benchmarks/run_benchmarks.py --suite all

bench-gpu: install-dev
	bash benchmarks/gpu.sh

clean-runs:
	rm -rf runs
