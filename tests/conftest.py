import os, sys, subprocess
from pathlib import Path
import pytest

BIN = Path(sys.executable).parent

def run_cli(*args, launcher=(), timeout=600, **kw):
    "Run `python -m rectiflow.cli ARGS` (or under a launcher; `env` adds to the environment) and return the CompletedProcess."
    cmd = [*launcher, *( [] if launcher else [sys.executable]), '-m', 'rectiflow.cli', *map(str, args)]
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'MPLBACKEND': 'Agg', **kw.pop('env', {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)

# Small, fast moons settings shared by the end-to-end tests.
TINY_MOONS = ['--data', 'moons', '--no-progress', '--task.n_train', '2048', '--task.n_val', '256',
              '--data.batch_size', '128', '--run.log_every', '10', '--eval.every', '10', '--eval.sample_every', '20',
              '--eval.n_samples', '500']

@pytest.fixture
def cli(): return run_cli

# The digits default, short: a golden case (tests/test_golden.py), and the run the README's examples are tried on.
DIGITS_SHORT = ['--steps', '60', '--run.log_every', '20', '--eval.every', '30', '--eval.sample_every', '60',
                '--checkpoint.save_every', '30', '--eval.n_samples', '100']

@pytest.fixture(scope='session')
def digits_short_run(tmp_path_factory):
    "`rectiflow train` of the short digits default into `runs/default` of a scratch working directory; the run's path."
    cwd = tmp_path_factory.mktemp('default')
    p = run_cli('train', '--no-progress', '--out', 'runs/default', *DIGITS_SHORT, cwd=cwd)
    assert p.returncode == 0, p.stderr
    return cwd / 'runs' / 'default'

def pytest_addoption(parser):
    parser.addoption('--slow', action='store_true', help='also run the slow tests (minutes each: the full golden defaults)')

def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: minutes-long; skipped unless pytest --slow (make test-slow)')

def pytest_collection_modifyitems(config, items):
    if config.getoption('--slow'): return
    skip = pytest.mark.skip(reason='slow: run with pytest --slow (make test-slow)')
    for item in items:
        if 'slow' in item.keywords: item.add_marker(skip)
