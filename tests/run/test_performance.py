"The performance code paths that are not timings: the GPU benchmark's smoke size and profile mode."
import json, math, os, subprocess, sys
import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# `make test-slow` only: the smoke runs six compiled and eager trainings (a minute and a half); every `make test` has
# the compile, checkpointing and throughput paths in tests/run/test_throughput.py
@pytest.mark.slow
@pytest.mark.parametrize('workloads', ['dit', 'digits,dit'])
def test_gpu_check_runs_the_real_train_for_every_variant_at_smoke_size(tmp_path, workloads):
    out = tmp_path / 'gpu.json'
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHON': sys.executable, 'MPLBACKEND': 'Agg'}
    p = subprocess.run(['bash', str(ROOT / 'benchmarks' / 'gpu.sh'), '--smoke', '--work', str(tmp_path / 'runs'),
                        '--json', str(out), '--workloads', workloads], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r['smoke'] and r['compile_backend'] == 'aot_eager'
    names = {'digits': 'digits default', 'dit': 'DiT on 16x32x32 latents'}
    assert [(x['workload'], x['variant']) for x in r['rows']] == [
        (names[w], v) for w in workloads.split(',') for v in ('eager', 'regional', 'regional + checkpointing')]
    for x in r['rows']:
        assert x['step_ms'] > 0 and x['items_per_s'] > 0 and x['params_m'] > 0 and x['tflops'] > 0
        assert x['mfu'] is None and x['peak_mem_mb'] is None          # a CPU: no bf16 peak, no device memory
        assert (x['compiled_graphs'] > 0) == (x['variant'] != 'eager'), x
    runs = sorted(d.name for d in (tmp_path / 'runs').iterdir() if (d / 'final').is_dir())
    assert len(runs) == len(r['rows'])                                # real runs, each with its export
    assert '| workload | variant | params | step | vs eager |' in p.stdout

def test_profile_steps_writes_an_operator_table_and_exits(tmp_path, tiny_run):
    from conftest import run_cli, TINY_MOONS
    run = tmp_path / 'prof'
    p = run_cli('train', *TINY_MOONS, '--profile-steps', '3', '--out', run)
    assert p.returncode == 0 and 'profiled 3 steps' in p.stdout, p.stderr
    table = (run / 'profile' / 'ops.txt').read_text()
    assert 'aten::addmm' in table and 'rectiflow.optimizer_step' in table        # real operator names, our step marker
    ops = json.loads((run / 'profile' / 'ops.json').read_text())['ops']
    assert any(o['name'] == 'rectiflow.optimizer_step' and o['calls'] == 3 for o in ops)
    assert (run / 'profile' / 'trace.json').stat().st_size > 0
    assert sorted(x.name for x in run.iterdir()) == ['.lock', '.lock_holder.json', 'profile']   # a look, not a run: no metrics, checkpoints, exports
    assert not (tiny_run / 'profile').exists() and (tiny_run / 'final').is_dir()      # without the flag: a run, no profile
