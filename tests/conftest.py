import os, sys, subprocess
from pathlib import Path
import pytest

BIN = Path(sys.executable).parent

def run_cli(*args, launcher=(), timeout=600, **kw):
    "Run `python -m rectiflow.cli ARGS` (or under a launcher) and return the CompletedProcess."
    cmd = [*launcher, *( [] if launcher else [sys.executable]), '-m', 'rectiflow.cli', *map(str, args)]
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'MPLBACKEND': 'Agg'}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)

# Small, fast moons settings shared by the end-to-end tests.
TINY_MOONS = ['--data', 'moons', '--no-progress', '--data.n_train', '2048', '--data.n_val', '256',
              '--data.batch_size', '128', '--run.log_every', '10', '--eval.every', '10', '--eval.sample_every', '20',
              '--eval.n_samples', '500']

@pytest.fixture
def cli(): return run_cli

def pytest_addoption(parser):
    parser.addoption('--slow', action='store_true', help='also run the slow tests (minutes each: the full golden defaults)')

def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: minutes-long; skipped unless pytest --slow (make test-slow)')

def pytest_collection_modifyitems(config, items):
    if config.getoption('--slow'): return
    skip = pytest.mark.skip(reason='slow: run with pytest --slow (make test-slow)')
    for item in items:
        if 'slow' in item.keywords: item.add_marker(skip)
