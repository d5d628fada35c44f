"""Golden runs: the seed-0 records and weights of the digits default and of moons, recorded once, must stay
bit-identical through every refactor (on the CPU kind that recorded them; within float noise on another).

`python tests/test_golden.py --record [NAME ...]` re-records (say why in the commit: a deliberate change in
the order of computation). The full defaults are `slow`; the short cases run in every `make test`."""
import hashlib, json, os, sys
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from conftest import run_cli, DIGITS_SHORT
from rectiflow.run.lifecycle import run_figures

GOLDEN = Path(__file__).parent / 'golden'
CASES = {
    'digits-short': DIGITS_SHORT,
    'moons-short': ['--data', 'moons', '--steps', '200', '--run.log_every', '50', '--eval.every', '100',
                    '--eval.sample_every', '200', '--eval.n_samples', '500'],
    'digits-default': [],
    'moons-default': ['--data', 'moons'],
}
SLOW = ('digits-default', 'moons-default')

def platform() -> dict:
    "What bit-identity depends on besides the code: the torch build and its CPU kernels."
    import torch
    return {'torch': torch.__version__, 'cpu_capability': torch.backends.cpu.get_cpu_capability()}   # run_cli: one thread

def weights_digest(export: Path) -> dict:
    "sha256 of every tensor of the export's weights (`model/`: a UNet's own copy in `unet/` is the same tensors), by name."
    from safetensors.torch import load_file
    files = sorted(p for p in (export / 'model').rglob('*.safetensors'))
    assert len(files) == 1, files
    return {k: hashlib.sha256(v.contiguous().numpy().tobytes()).hexdigest()[:20] for k, v in sorted(load_file(str(files[0])).items())}

def observe(name: str, tmp: Path) -> dict:
    "Train golden case `name` into `tmp` from the CLI; what `observed` reads of it."
    run = tmp / name
    p = run_cli('train', '--no-progress', '--out', run, *CASES[name], timeout=1800, fresh=True)     # as recorded
    assert p.returncode == 0, p.stderr[-3000:]
    return observed(run)

def observed(run: Path) -> dict:
    "A finished run's records (the machine's fields dropped: times, speed, memory) and the digests of its exports."
    recs = [run_figures(json.loads(l)) for l in (run / 'metrics.jsonl').read_text().splitlines()]
    return {'records': recs, 'final': weights_digest(run / 'final'), 'best': weights_digest(run / 'best')}

# The Fréchet distances are read on the features of a classifier the run trains on this CPU (`08_eval.gauge`): its
# training amplifies another CPU's float noise, so on another platform they agree within 15% (AVX2 against the AVX512
# records: FD 70.9 against 70.0, its floor 2.92 against 3.27), and everything else within float noise.
GAUGE_FIGURES, GAUGE_RTOL = ('fd', 'fd_floor', 'fd_ratio'), 0.15

def close(a, b, rtol=1e-4, atol=1e-6) -> bool:
    "Records equal up to float noise: what another CPU's kernels may change."
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], GAUGE_RTOL if k in GAUGE_FIGURES else rtol, atol)
                                            for k in a)
    if isinstance(a, list): return len(a) == len(b) and all(close(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, (int, float)): return abs(a - b) <= atol + rtol * abs(b)
    return a == b

@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CASES])
def test_golden_run_is_unchanged(name, tmp_path, request):
    want = json.loads((GOLDEN / f'{name}.json').read_text())
    got = observed(request.getfixturevalue('digits_short_run')) if name == 'digits-short' else observe(name, tmp_path)
    if platform() == want['platform']:
        for i, (g, w) in enumerate(zip(got['records'], want['records'])): assert g == w, (i, g, w)
        assert got == {k: want[k] for k in got}
    else:       # another CPU kind or torch build: the same run within float noise (weights are not compared bitwise)
        assert close(got['records'], want['records']), (platform(), want['platform'])

if __name__ == '__main__' and sys.argv[1:2] == ['--record']:
    import tempfile
    for name in sys.argv[2:] or CASES:
        with tempfile.TemporaryDirectory() as d:
            obs = observe(name, Path(d))
        (GOLDEN / f'{name}.json').write_text(json.dumps({'platform': platform(), 'args': CASES[name], **obs}, indent=1) + '\n')
        print('recorded', name, len(obs['records']), 'records')
