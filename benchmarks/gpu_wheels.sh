#!/usr/bin/env bash
# Wheels for the lent GPU machine (Python 3.12, its own torch and accelerate, no network): what rectiflow needs
# that it lacks, at the versions this checkout is tested with, downloaded here into .whl/ (git-ignored), which
# benchmarks/gpu.sh installs into /tmp/site there. Never a torch: the machine's CUDA build stays.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
mkdir -p .whl
for pkg in diffusers fastcore importlib_metadata; do
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl "$pkg==$(version $pkg)"
done
ls .whl
