import atexit, io, json, os, random, shutil, socket, sys, subprocess
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace
import pytest

BIN = Path(sys.executable).parent

def run_cli(*args, launcher=(), timeout=600, fresh=False, **kw):
    """`rectiflow ARGS` as a process of its own (`env` adds to the environment; `cwd` too), its CompletedProcess.
    The process is forked from one that has already imported what a command needs (`cli_server.py`, one for each
    PYTHONPATH): a fresh interpreter spends seconds importing before it does anything, most of a short test's time. A
    fresh `python -m rectiflow.cli` where `fresh` is set (what a process prints at its start is the point) or a
    `launcher` starts it."""
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'MPLBACKEND': 'Agg', **kw.pop('env', {})}
    server = None if fresh or launcher or set(kw) - {'cwd'} or _servers.get('busy') else cli_server(env.get('PYTHONPATH'))
    if server is not None:
        done = forked(server, [str(a) for a in args], env, kw.get('cwd'), timeout)
        if done is not None: return done
    cmd = [*launcher, *( [] if launcher else [sys.executable]), '-m', 'rectiflow.cli', *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)

_servers = {}

def cli_server(pythonpath):
    """This test process's command server for `pythonpath` (the PYTHONPATH its commands see; None: none), started on
    first use: a server's `sys.path` is made from it when it starts, so each PYTHONPATH has one of its own."""
    server = _servers.get(('server', pythonpath))
    if server is None or server.poll() is not None:
        env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
        if pythonpath is not None: env['PYTHONPATH'] = pythonpath
        server = subprocess.Popen([sys.executable, str(Path(__file__).parent / 'cli_server.py')], text=True,
                                  env={**env, 'OMP_NUM_THREADS': '1', 'MPLBACKEND': 'Agg'},
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        _servers[('server', pythonpath)] = server
        atexit.register(server.kill)
    return server

def forked(server, args, env, cwd, timeout):
    "`rectiflow ARGS` forked by `server`, waited for up to `timeout` seconds (then killed); None if the server is gone."
    try: started = Started(server, args, env, cwd)
    except (OSError, ValueError): return None
    try: started.wait(timeout)
    except subprocess.TimeoutExpired:
        started.kill()
        started.wait()
        raise
    out, err = started.communicate()
    return subprocess.CompletedProcess(['rectiflow', *args], started.returncode, out, err)

class Started:
    """A command forked by the command server, as much of `subprocess.Popen` as the tests use (pid, poll, wait,
    send_signal, kill, communicate, stderr); the server runs nothing else until it has ended."""
    def __init__(self, server, args, env, cwd):
        import tempfile, threading
        self.dir = Path(tempfile.mkdtemp())
        self.out, self.err, self.returncode = self.dir / 'out', self.dir / 'err', None
        req = {'args': [str(a) for a in args], 'env': env, 'cwd': str(Path(cwd or os.getcwd()).resolve()),
               'out': str(self.out), 'err': str(self.err)}
        server.stdin.write(json.dumps(req) + '\n')
        server.stdin.flush()
        self.pid = json.loads(server.stdout.readline())['pid']
        _servers['busy'] = True
        self._answer = threading.Thread(target=self._read, args=(server,), daemon=True)
        self._answer.start()

    def _read(self, server):
        self.returncode = json.loads(server.stdout.readline())['code']
        _servers['busy'] = False

    def poll(self):
        return None if self._answer.is_alive() else self.returncode

    def wait(self, timeout=None):
        self._answer.join(timeout)
        if self._answer.is_alive(): raise subprocess.TimeoutExpired(['rectiflow'], timeout)
        return self.returncode

    def send_signal(self, sig): os.kill(self.pid, sig)
    def kill(self): self.send_signal(9)

    def communicate(self, timeout=None):
        self.wait(timeout)
        out, err = self.out.read_text(), self.err.read_text()
        shutil.rmtree(self.dir, ignore_errors=True)
        return out, err

    @property
    def stderr(self): return io.StringIO(self.err.read_text() if self.err.exists() else '')

def start_cli(*args, env=None, cwd=None):
    """`rectiflow ARGS` started and left running (`env` adds to the environment): a `Started` from the command server,
    or a fresh `subprocess.Popen` where the server is busy or gone."""
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'MPLBACKEND': 'Agg', **(env or {})}
    server = None if _servers.get('busy') else cli_server(env.get('PYTHONPATH'))
    if server is not None:
        try: return Started(server, args, env, cwd)
        except (OSError, ValueError): pass
    return subprocess.Popen([sys.executable, '-m', 'rectiflow.cli', *map(str, args)], env=env, cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)

# Small, fast moons settings shared by the end-to-end tests.
TINY_MOONS = ['--data', 'moons', '--no-progress', '--task.n_train', '2048', '--task.n_val', '256',
              '--data.batch_size', '128', '--run.log_every', '10', '--eval.every', '10', '--eval.sample_every', '20',
              '--eval.n_samples', '500', '--eval.val_items', '256', '--schedule.warmup_steps', '10']

@pytest.fixture
def cli(): return run_cli

def free_port() -> int:
    """A TCP port free on loopback now, for a launcher's rendezvous, from below the kernel's ephemeral range: a port
    the kernel hands out (to `torchrun --standalone` in the other test worker, say) could be taken again between
    this check and the launcher's bind; one outside that range is never handed out."""
    try: low = int(Path('/proc/sys/net/ipv4/ip_local_port_range').read_text().split()[0])
    except (OSError, ValueError, IndexError): low = 32768
    rng = random.Random()
    for _ in range(100):
        port = rng.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try: s.bind(('127.0.0.1', port))
            except OSError: continue
            return port
    raise RuntimeError('no free port below the ephemeral range')

def fault_env(**faults) -> dict:
    "The environment that switches the tests' `faults` on for a command a test starts (`rectiflow.run.faults`)."
    from rectiflow.run.faults import FAULTS_ENV
    return {FAULTS_ENV: ','.join(f'{k}={v}' for k, v in faults.items())}

def main_in_process(*args, cwd=None, faults=None) -> tuple[int, str, str]:
    """`rectiflow ARGS` through the command's own `main`, in this interpreter: `(exit code, stdout, stderr)`, with the
    tests' `faults` (a dict) switched on. For the many bad-input cases, which each cost a process start (the imports:
    seconds) as a subprocess; a few subprocess cases beside them check that a fresh process prints nothing else."""
    from rectiflow.cli import main
    from rectiflow.run.faults import injected
    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    try:
        if cwd is not None: os.chdir(cwd)
        with redirect_stdout(out), redirect_stderr(err), injected(**(faults or {})):
            try: code = main([str(a) for a in args])
            except SystemExit as e: code = e.code
    finally: os.chdir(here)
    return code, out.getvalue(), err.getvalue()

def cli_in_process(*args, cwd=None, faults=None) -> SimpleNamespace:
    """`run_cli`'s answer (returncode, stdout, stderr) from `main_in_process`: for a test's later commands, whose
    process start (seconds of imports) its first command, run as a user runs it, has already shown."""
    code, out, err = main_in_process(*args, cwd=cwd, faults=faults)
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)

def built_once(name: str, tmp_path_factory, build) -> Path:
    """A folder `build(folder)` fills once for the whole session, however many pytest-xdist workers ask: the first
    builds it under the workers' common temporary root, holding a lock; the others wait for it and read it."""
    import fcntl
    root = tmp_path_factory.getbasetemp()
    if os.environ.get('PYTEST_XDIST_WORKER'): root = root.parent          # the workers' basetemps share this parent
    folder, done = root / f'shared-{name}', root / f'shared-{name}.done'
    with open(root / f'shared-{name}.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder

def _train_into(folder, *args, cwd=None):
    p = run_cli('train', *args, cwd=cwd)
    assert p.returncode == 0, p.stderr

@pytest.fixture(scope='session')
def tiny_run(tmp_path_factory):
    "One tiny moons run (20 steps, checkpoints at 10 and 20) for the tests that only read a finished run."
    build = lambda f: _train_into(f, *TINY_MOONS, '--steps', '20', '--checkpoint.save_every', '10', '--out', f / 'run')
    return built_once('tiny', tmp_path_factory, build) / 'run'

def records(run) -> list[dict]:
    "The records of `run/metrics.jsonl`."
    return [json.loads(l) for l in (Path(run) / 'metrics.jsonl').read_text().splitlines()]

def comparable(run) -> list[dict]:
    "The records of `run` without the fields that measure the machine: what two runs of one seed have in common."
    from rectiflow.run.lifecycle import run_figures
    return [run_figures(r) for r in records(run)]

def same_run(a, b):
    "Runs `a` and `b` have the same records (the machine's fields aside) and bit-identical final weights."
    import torch
    assert comparable(a) == comparable(b)
    wa, wb = final_weights(a), final_weights(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)

def one_line(err: str) -> bool:
    "Whether a command said what it had to say on stderr in one line."
    return len(err.strip().splitlines()) == 1

def final_weights(run) -> dict:
    "The tensors of `run/final/`'s weights, by name."
    from safetensors.torch import load_file
    return load_file(str(next((Path(run) / 'final' / 'model').rglob('*.safetensors'))))

@pytest.fixture
def one_thread():
    "In-process runs on the one thread the subprocess runs use, so that they can be bit-identical to them."
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

def copy_run(run, to) -> Path:
    "A copy of finished run `run` at `to`, for a test that changes it."
    return Path(shutil.copytree(run, to))

@contextmanager
def lock_held(*dirs, command='the other writer'):
    "Another process holding the run locks of `dirs` for the block (killed with SIGKILL after it); the process."
    code = ('import contextlib\nfrom rectiflow.store.rundir import run_lock\nwith contextlib.ExitStack() as s:\n'
            f'    for d in {[str(d) for d in dirs]!r}: s.enter_context(run_lock(d, {command!r}))\n'
            "    print('held', flush=True)\n    input()")
    proc = subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, 'OMP_NUM_THREADS': '1'})
    try:
        assert proc.stdout.readline() == 'held\n', 'the holder could not take the locks'
        yield proc
    finally:
        proc.kill()
        proc.wait()

# The digits default, short: a golden case (tests/test_golden.py), and the run the README's examples are tried on.
DIGITS_SHORT = ['--steps', '60', '--run.log_every', '20', '--eval.every', '30', '--eval.sample_every', '60',
                '--checkpoint.save_every', '30', '--eval.n_samples', '100']

@pytest.fixture(scope='session')
def digits_short_run(tmp_path_factory):
    "`rectiflow train` of the short digits default into `runs/default` of a scratch working directory; the run's path."
    build = lambda cwd: _train_into(cwd, '--no-progress', '--out', 'runs/default', *DIGITS_SHORT, cwd=cwd)
    return built_once('default', tmp_path_factory, build) / 'runs' / 'default'

def pytest_addoption(parser):
    parser.addoption('--slow', action='store_true', help='also run the slow tests (minutes each: the full golden defaults)')

def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: minutes-long; skipped unless pytest --slow (make test-slow)')
    # matplotlib's own, raised by the in-process commands' figures (numpy 2's __array__ copy keyword): not ours to fix
    config.addinivalue_line('filterwarnings', "ignore:__array__ implementation doesn't accept a copy:DeprecationWarning")


# `make test` runs pytest on two workers (pytest-xdist, --dist loadfile): a file's tests stay on one worker, in order,
# so its module-scoped runs are trained once; the session's shared runs are trained once for both (`built_once`).
# (loadgroup's `xdist_group` marks do not reach its scheduler under pytest 9: every test was scheduled alone, and each
# worker trained every module's runs again.)
# The longest files go first, so that neither worker is left alone with one at the end.
LONGEST_FIRST = ['test_multiprocess', 'test_resume', 'test_checkpoint_integrity', 'test_gates', 'test_latents', 'test_performance',
                 'test_outside_task', 'test_lines', 'test_filler', 'test_sequences', 'test_own_data']

def file_order(item) -> int:
    "Where `item`'s file comes in LONGEST_FIRST (the others after them, in their own order)."
    module = item.module.__name__.rsplit('.', 1)[-1]
    return LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)

def pytest_collection_modifyitems(config, items):
    items.sort(key=file_order)                                  # stable: a file's tests keep their order
    if config.getoption('--slow'): return
    skip = pytest.mark.skip(reason='slow: run with pytest --slow (make test-slow)')
    for item in items:
        if 'slow' in item.keywords: item.add_marker(skip)
