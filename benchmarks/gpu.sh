#!/usr/bin/env bash
# The GPU path in one script: an SD3-style DiT step (~170M parameters, 32x32x16 latents, bf16) eager and
# under torch.compile, with and without gradient checkpointing: step time, samples/s, peak memory, MFU.
# On a CUDA machine it takes about 8 minutes and writes benchmarks/gpu_results.json; `--smoke` runs a
# tiny size on the CPU (what `make test` checks). Extra arguments go to benchmarks/gpu_step.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
if [ "${1:-}" != "--smoke" ]; then
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  exec "$PY" benchmarks/gpu_step.py --json benchmarks/gpu_results.json "$@"
fi
exec "$PY" benchmarks/gpu_step.py "$@"
