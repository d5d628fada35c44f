#!/usr/bin/env bash
# The GPU check: the real `rectiflow train` on the digits default and on a DiT over synthetic 16x32x32 latents
# (~170M parameters), eager / regional compile / compile + gradient checkpointing, one table row per run
# (benchmarks/gpu_train.py). On a CUDA machine it takes about 7 minutes and writes benchmarks/gpu_results.json
# row by row (then `python benchmarks/run_benchmarks.py --render` puts the table into RESULTS.md); `--smoke` runs
# tiny sizes on the CPU (what `make test` checks). Other arguments go to gpu_train.py.
#
# On a machine without the package installed (the lent GPU machine: its own torch and accelerate, no diffusers,
# no fastcore, no network) it runs from source: wheels of what is missing, downloaded beforehand into .whl/ with
# `bash benchmarks/gpu_wheels.sh`, are installed into /tmp/site (never a torch).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
if ! "$PY" -c "import rectiflow, diffusers, fastcore" 2>/dev/null; then
  if [ -d .whl ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
  else
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  fi
fi
if [ "${1:-}" != "--smoke" ]; then
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
export PYTHONUNBUFFERED=1
exec "$PY" benchmarks/gpu_train.py "$@"
