"""Golden runs: the seed-0 records and weights of the digits default and of moons, recorded once, must stay
bit-identical through every refactor on any CPU of the kind that recorded them (the Fréchet distances within 1e-9:
see `SQRTM_FIGURES`); within float noise on another kind. A file holds its first recording and, under `more`, those
of other kinds (`platform`), each compared bit for bit where it was made.

`python tests/test_golden.py --record [NAME ...]` records this kind's (a first recording, or a kind's own, replaced:
say why in the commit: a deliberate change in the order of computation, or a new kind, checked first to give what
the code before the change gave on it). The full defaults are `slow`; the short cases run in every `make test`."""
import hashlib, json, math, os, sys
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

# torch's CPU capability names the vector ISA its own kernels use, but oneDNN and MKL choose theirs by finer features:
# an AVX512 machine with AMX and VNNI (a Xeon of 2023) gives a moons run's first validation loss as 2.5928540687561035
# where the AVX512 machine that first recorded it gave 2.592854124069214. The kind is both.
KERNEL_FEATURES = ('amx', 'avx512', 'avx_vnni')

def cpu_features() -> list[str]:
    "The CPU's flags that oneDNN and MKL choose kernels by (AMX, the AVX512 extensions, VNNI), from /proc/cpuinfo."
    try: text = Path('/proc/cpuinfo').read_text()
    except OSError: return []
    flags = next((l.split(':', 1)[1].split() for l in text.splitlines() if l.startswith('flags')), [])
    return sorted({f for f in flags if f.startswith(KERNEL_FEATURES)})

def platform() -> dict:
    "What bit-identity depends on besides the code: the torch build and its CPU kernels."
    import torch
    return {'torch': torch.__version__, 'cpu_capability': torch.backends.cpu.get_cpu_capability(),   # run_cli: one thread
            'cpu_features': cpu_features()}

def recording_for(golden: dict, here: dict) -> dict | None:
    "The recording of `golden` made on a CPU of kind `here` (the first one, or one under `more`), if any."
    return next((r for r in [golden, *golden.get('more', [])] if r['platform'] == here), None)

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

# The figures read through a matrix square root (scipy's `sqrtm`, a Schur decomposition, in `frechet_distance`
# of `07_eval.metrics` and `frechet_from_stats` of `08_eval.gauge`) and those derived from them: the Fréchet
# distances, their floors and the ratio of the two. LAPACK picks its kernels by the CPU model, not only by its
# vector ISA, so from bit-identical features another CPU of the recorded kind gives them within a few 1e-12
# relative (FD 69.99699067657184 against 69.99699067655274, its floor 3.2672802374409002 against 3.2672802374527237),
# not bit for bit. Weights, losses and every record drawn from the run's generators are compared exactly.
SQRTM_FIGURES, SQRTM_RTOL = ('fd', 'fd_floor', 'fd_ratio', 'fd_encoder', 'fd_encoder_floor'), 1e-9

def near(got, want) -> bool:
    "Two values of a `SQRTM_FIGURES` field equal within `SQRTM_RTOL` (relative)."
    if not (isinstance(want, float) and isinstance(got, float)): return got == want
    return math.isclose(got, want, rel_tol=SQRTM_RTOL, abs_tol=0)

def same(got, want) -> bool:
    "Records bit-identical, but for the `SQRTM_FIGURES` fields: within `SQRTM_RTOL`."
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(near(got[k], w) if k in SQRTM_FIGURES else same(got[k], w)
                                                 for k, w in want.items())
    if isinstance(want, list): return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    return got == want

# On another torch build or vector ISA torch's own kernels differ, and so do the weights: the records are compared
# within float noise, but for the `SQRTM_FIGURES`, which are only there and finite. They are read through a
# classifier trained on the CPU that runs the test (`07_eval.metrics`, cached by CPU kind), another network there:
# with torch, MKL and oneDNN held to AVX2 on the AVX512 machine that recorded them, FD 69.59 against 70.00 and its
# floor 3.34 against 3.27; on an AVX2 machine 70.9 and 2.92.
def close(a, b, rtol=1e-4, atol=1e-6) -> bool:
    "Records equal up to float noise (the `SQRTM_FIGURES` aside): what another CPU kind's kernels may change."
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(math.isfinite(a[k]) if k in SQRTM_FIGURES
                                            else close(a[k], b[k], rtol, atol) for k in a)
    if isinstance(a, list): return len(a) == len(b) and all(close(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, (int, float)): return abs(a - b) <= atol + rtol * abs(b)
    return a == b

@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CASES])
def test_golden_run_is_unchanged(name, tmp_path, request):
    want = json.loads((GOLDEN / f'{name}.json').read_text())
    got = observed(request.getfixturevalue('digits_short_run')) if name == 'digits-short' else observe(name, tmp_path)
    mine = recording_for(want, platform())
    if mine is not None:
        for i, (g, w) in enumerate(zip(got['records'], mine['records'])): assert same(g, w), (i, g, w)
        assert same(got['records'], mine['records'])
        assert (got['final'], got['best']) == (mine['final'], mine['best'])                  # every weight, bitwise
    else:       # another CPU kind or torch build: the same run within float noise (weights are not compared bitwise)
        assert close(got['records'], want['records']), (platform(), want['platform'])

def test_a_recording_is_found_for_its_own_kind_only():
    first = {'platform': {'torch': '2', 'cpu_capability': 'AVX512'}, 'records': [1]}
    amx = {'platform': {**first['platform'], 'cpu_features': ['amx_tile']}, 'records': [2]}
    golden = {**first, 'more': [amx]}
    assert recording_for(golden, amx['platform']) is amx
    assert recording_for(golden, {**first['platform'], 'cpu_features': []}) is None     # the first kind's features unknown
    assert recording_for(golden, first['platform']) is golden

if __name__ == '__main__' and sys.argv[1:2] == ['--record']:
    import tempfile
    for name in sys.argv[2:] or CASES:
        with tempfile.TemporaryDirectory() as d:
            obs = observe(name, Path(d))
        path, mine = GOLDEN / f'{name}.json', {'platform': platform(), 'args': CASES[name], **obs}
        golden = json.loads(path.read_text()) if path.exists() else mine
        if golden['platform'] == mine['platform']: golden = {**mine, 'more': golden.get('more', [])}
        else: golden['more'] = [r for r in golden.get('more', []) if r['platform'] != mine['platform']] + [mine]
        path.write_text(json.dumps(golden, indent=1) + '\n')
        print('recorded', name, len(obs['records']), 'records')
