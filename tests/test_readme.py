"""The README's commands work as written, in the order a newcomer meets them. Its ```sh blocks hold the examples that
run here (CPU), in that order, after `make train`; ```text blocks hold synopses, placeholders, GPU-only lines and
messages; a ```python block is a script run in the same folder, or a module it says where to save.

On every test run (cheap, about half a minute): every example parses and builds its config; the chain of examples
holds (each one writes a run folder no earlier example wrote, unless it says --overwrite or --resume, and reads only
what an earlier one wrote); the examples that read the default run run as written, in order, in one folder, on the
short default run. With pytest --slow (about an hour on two cores): every example as written, in order, in one
folder, after a fresh default run, and the scripts beside them."""
import os, re, shlex, subprocess, sys
from pathlib import Path
from types import SimpleNamespace
import pytest
from conftest import run_cli, BIN, copy_run

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / 'README.md'

# The README's ```sh lines the tests do not run as written: why, and what runs instead.
MAKE_TRAIN = ['train', '--out', 'runs/default', '--overwrite']      # the Makefile's `train` recipe, OUT and ARGS unset
EXCEPTIONS = {
    'make train': 'creates .venv and pip-installs into it (minutes, a package index): the tests run what its recipe '
                  'runs next, `rectiflow ' + ' '.join(MAKE_TRAIN) + '`, in the environment already installed',
    'make test': 'runs this test suite itself (and nbdev_test): never run from inside it',
}

def blocks(text: str = None) -> list[tuple[str, str]]:
    "The README's fenced blocks in order: (language, body)."
    return re.findall(r'^```(\w*)\n(.*?)^```', text or README.read_text(), re.M | re.S)

def sh_commands(text: str = None) -> list[str]:
    "The command lines of the README's ```sh blocks, in order, comments dropped."
    return [c for lang, body in blocks(text) if lang == 'sh' for c in block_commands(body)]

def block_commands(body: str) -> list[str]:
    "The command lines of one block, comments dropped."
    lines = [line.split('  #')[0].strip() for line in body.splitlines() if not line.lstrip().startswith('#')]
    return [line for line in lines if line]

def cli_args(command: str) -> list[str] | None:
    "The `rectiflow` arguments of a command line (also under torchrun / accelerate / python -m), or None."
    words = shlex.split(command)
    if words[0] == 'rectiflow': return words[1:]
    if 'rectiflow.cli' in words: return words[words.index('rectiflow.cli') + 1:]
    return None

def launcher(command: str) -> list[str]:
    "The launcher a command line starts `rectiflow.cli` with (`torchrun ...`, `accelerate launch ...`), or []."
    words = shlex.split(command)
    if words[0] in ('rectiflow', 'python') or 'rectiflow.cli' not in words: return []
    return [str(BIN / words[0]), *words[1:words.index('-m')]]

def effects(command: str) -> SimpleNamespace:
    """What a `rectiflow` command line reads and writes: `reads` (paths an earlier command must have written), `out`
    (what it writes), `how` ('new', 'overwrite', 'resume', 'records': gate or range-test records beside a run,
    'export'), whether it `trains`, and the `callbacks` it imports."""
    from rectiflow.cli import make_parser
    args, rest = make_parser().parse_known_args(cli_args(command))
    fields = dict(zip(rest[::2], rest[1::2]))
    if args.command in ('sample', 'evaluate'):
        return SimpleNamespace(reads=[getattr(args, 'run_dir', None) or args.checkpoint], out=None, how=None,
                               trains=False, callbacks=[])
    if args.command == 'export':
        return SimpleNamespace(reads=[args.run], out=args.out, how='overwrite' if args.overwrite else 'export',
                               trains=False, callbacks=[])
    reads = [p for p in (args.config, args.vae, getattr(args, 'init_from', None), fields.get('--task.teacher')) if p]
    resume = getattr(args, 'resume', None)
    if resume not in (None, True, ''): reads.append(resume)
    out = args.out or 'runs/default'
    names = set(args.names.split(',')) if args.command == 'gate' else set()
    if 'sampler' in names: reads.append(out)
    how = ('records' if args.command in ('gate', 'lr-find') else 'resume' if resume is not None
           else 'overwrite' if args.overwrite else 'new')
    return SimpleNamespace(reads=reads, out=out, how=how, trains=args.command != 'gate' or bool(names - {'sampler'}),
                           callbacks=(args.callbacks or '').split(',') if args.callbacks else [])

def written_by(path: str, written: set) -> bool:
    "Whether `path` is, or is inside, one of the folders `written`."
    return any(p in written for p in [Path(path), *Path(path).parents])

def callback_module(text: str = None) -> tuple[str, str]:
    "The file the README says to save its callback in, and the ```python block that holds it."
    text = text or README.read_text()
    part = text[text.index('## Your own callbacks'):text.index('## Your own data')]
    return re.search(r'saved as `([\w/]+\.py)`', part)[1], part.split('```python\n')[1].split('```')[0]

def write_callback_module(folder: Path) -> Path:
    "The README's callback saved where it says, under `folder`."
    path, code = callback_module()
    (folder / path).parent.mkdir(parents=True, exist_ok=True)
    (folder / path).write_text(code)
    return folder / path

def test_the_readme_has_runnable_examples_of_every_command():
    commands = [cli_args(c)[0] for c in sh_commands() if cli_args(c)]
    assert {'train', 'sample', 'evaluate', 'gate', 'lr-find', 'export'} <= set(commands), commands
    assert sh_commands()[:2] == ['make train', 'make test']
    assert [c for c in sh_commands() if not cli_args(c)] == list(EXCEPTIONS)      # each exception named, with why

def test_make_train_runs_what_the_tests_run_for_it():
    makefile = (ROOT / 'Makefile').read_text()
    assert re.search(r'^OUT\s*\?=\s*runs/default$', makefile, re.M)
    recipe = r'^train: install\n\t\$\(BIN\)/rectiflow train --out \$\(OUT\) --overwrite \$\(ARGS\)$'
    assert re.search(recipe, makefile, re.M), 'the Makefile runs another command for `make train`: update MAKE_TRAIN'

TRAINING = [c for c in sh_commands() if cli_args(c) and cli_args(c)[0] in ('train', 'gate', 'lr-find')]

@pytest.mark.parametrize('command', TRAINING)
def test_every_training_example_builds_its_config(command, tmp_path, monkeypatch):
    from rectiflow.cli import make_parser, config_from_args
    if effects(command).reads: pytest.skip('reads the files of an earlier example')
    args, rest = make_parser().parse_known_args(cli_args(command))
    monkeypatch.chdir(tmp_path)
    write_callback_module(tmp_path)
    cfg = config_from_args(args, rest)
    assert cfg.run.out and cfg.run.task

def test_the_examples_chain_in_order():
    "Each example writes a folder no earlier one wrote (unless --overwrite or --resume) and reads what one wrote."
    runs, exports, path = {Path('runs/default')}, set(), callback_module()[0]       # runs/default: `make train`'s
    for command in sh_commands():
        if command in EXCEPTIONS: continue
        e = effects(command)
        assert all(written_by(r, runs | exports) for r in e.reads), (command, 'reads what no earlier example wrote')
        for spec in e.callbacks: assert spec.split(':')[0].replace('.', '/') + '.py' == path, (command, path)
        if e.out is None: continue
        out = Path(e.out)
        if e.how == 'new': assert out not in runs, (command, 'a run is there already: it would refuse')
        if e.how == 'resume': assert out in runs, (command, 'nothing there to resume')
        if e.how == 'export': assert out not in exports, (command, 'an export is there already: it would refuse')
        if e.how in ('new', 'overwrite', 'resume'): runs.add(out)
        if e.how == 'export': exports.add(out)

def test_the_examples_on_the_default_run_run_in_order_as_written(digits_short_run, tmp_path):
    "The examples that read only the default run (and what they write) in one folder holding the short default run."
    copy_run(digits_short_run, tmp_path / 'runs' / 'default')
    written, ran = {Path('runs/default')}, []
    for command in sh_commands():
        if command in EXCEPTIONS: continue
        e = effects(command)
        if e.trains or not all(written_by(r, written) for r in e.reads): continue
        p = run_cli(*cli_args(command), cwd=tmp_path)
        assert p.returncode == 0, (command, p.stdout, p.stderr)
        ran.append(cli_args(command)[0])
        if e.out: written.add(Path(e.out))
    assert ran == ['sample', 'evaluate', 'evaluate', 'gate', 'export', 'sample'], ran
    assert (tmp_path / 'runs' / 'default' / 'nfe_sweep.json').exists()
    assert (tmp_path / 'hub' / 'digits' / 'info.json').exists()

@pytest.mark.slow
def test_every_example_runs_in_order_as_written(tmp_path):
    "Every ```sh line (but EXCEPTIONS) and ```python script, as written, in order, in one folder."
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'MPLBACKEND': 'Agg'}
    printed = {}
    for lang, body in blocks():
        if lang == 'python' and body == callback_module()[1]:
            write_callback_module(tmp_path)                   # a module the next command imports, where it says
        elif lang == 'python' and not re.search(r'^class ', body, re.M):   # a script (the task module: its own test)
            p = subprocess.run([sys.executable, '-c', body], cwd=tmp_path, env=env, capture_output=True, text=True)
            assert p.returncode == 0, (body, p.stderr[-3000:])
        for command in block_commands(body) if lang == 'sh' else []:
            if command == 'make test': continue              # EXCEPTIONS
            args = MAKE_TRAIN if command == 'make train' else cli_args(command)
            p = run_cli(*args, launcher=launcher(command), cwd=tmp_path, timeout=3600)
            assert p.returncode == 0, (command, p.stdout[-2000:], p.stderr[-3000:])
            printed[command] = p.stdout
    gate = next(out for command, out in printed.items() if command.startswith('rectiflow gate sampler'))
    assert 'PASS sampler' in gate, gate
    callback = next(out for command, out in printed.items() if '--callbacks' in command)
    assert re.search(r'^step 0: validation loss [\d.]+ \(EMA weights\)$', callback, re.M), callback

def readme_task() -> tuple[str, list[str]]:
    "The README's complete task (the ```python block under 'Your own task') and the command lines beside it."
    text = README.read_text()
    part = text[text.index('## Your own task'):text.index('## Your own callbacks')]
    code = part.split('```python\n')[1].split('```')[0]
    block = part.split('```text\n')[1].split('```')[0]
    return code, [line.split('  #')[0].strip() for line in block.splitlines() if line.strip()]

def test_the_readme_task_trains_gates_and_samples_as_written(tmp_path):
    code, commands = readme_task()
    assert 'def null_cond' not in code and 'def drop_cond' not in code    # a plain module, conditioned and guided
    (tmp_path / 'blobs.py').write_text(code)
    out = {}
    for command in commands:
        p = run_cli(*cli_args(command), cwd=tmp_path)
        assert p.returncode == 0, (command, p.stdout, p.stderr)
        out[cli_args(command)[0]] = p.stdout
    assert [l.split(':')[0] for l in out['gate'].splitlines() if l.startswith(('PASS', 'FAIL'))] == \
        ['PASS data', 'PASS overfit', 'PASS resume']
    import json
    run = tmp_path / 'runs' / 'blobs'
    final = json.loads((run / 'run_info.json').read_text())['final']
    assert final['status'] == 'completed' and final['spread'] < 2 * final['spread_floor'], final
    assert json.loads((run / 'config.json').read_text())['eval']['cfg_scale'] == 2.0
    assert (run / 'samples' / 'grid_seed0.png').read_bytes()[:4] == b'\x89PNG'
    # the run guides (cfg_scale 2, three classes): a Heun step costs 4 evaluations, so 3 are refused, writing nothing
    p = run_cli('sample', run, '--nfe', '3', '--solver', 'heun', '--out', tmp_path / 'few.png', '--trust-code',
                cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert '--nfe 3 is too small for one heun step with guidance' in p.stderr and not (tmp_path / 'few.png').exists()
