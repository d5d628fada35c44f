"Issue 8's code paths that are not timings: the GPU benchmark's smoke size and profile mode."
import json, math, os, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def test_gpu_benchmark_smoke_runs_every_variant_on_cpu(tmp_path):
    out = tmp_path / 'gpu.json'
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHON': sys.executable}
    p = subprocess.run(['bash', str(ROOT / 'benchmarks' / 'gpu.sh'), '--smoke', '--json', str(out)], capture_output=True,
                       text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r['smoke'] and r['params'] > 0 and r['gflops_per_item'] > 0
    variants = {(v['compile'], v['checkpointing']) for v in r['runs']}
    assert variants == {(False, False), (False, True), (True, False), (True, True)}
    for v in r['runs']: assert math.isfinite(v['loss']) and v['step_ms'] > 0 and v['samples_per_s'] > 0
    assert '| compile | gradient checkpointing |' in p.stdout
