"""The README's commands work as written. Its ```sh blocks hold the CPU examples, in the order a newcomer runs
them after `make train`; ```text blocks hold synopses, placeholders and GPU-only lines.

Every example parses and builds its config here (fast); the slow test runs them all, in order, as written, after a
fresh default run."""
import os, shlex, sys
from pathlib import Path
import pytest
from conftest import run_cli, BIN

README = Path(__file__).resolve().parent.parent / 'README.md'

def sh_commands(text: str = None) -> list[str]:
    "The command lines of the README's ```sh blocks, in order, comments dropped."
    lines, inside = [], False
    for line in (text or README.read_text()).splitlines():
        if line.startswith('```'):
            inside = line.strip() == '```sh'
            continue
        if inside and line.strip() and not line.lstrip().startswith('#'):
            lines.append(line.split('  #')[0].strip())
    return lines

def cli_args(command: str) -> list[str] | None:
    "The `rectiflow` arguments of a command line (also under torchrun / accelerate / python -m), or None."
    words = shlex.split(command)
    if words[0] == 'rectiflow': return words[1:]
    if 'rectiflow.cli' in words: return words[words.index('rectiflow.cli') + 1:]
    return None

def test_the_readme_has_runnable_examples_of_every_command():
    commands = [cli_args(c)[0] for c in sh_commands() if cli_args(c)]
    assert {'train', 'sample', 'evaluate', 'gate', 'lr-find'} <= set(commands), commands
    assert sh_commands()[:2] == ['make train', 'make test']

@pytest.mark.parametrize('command', [c for c in sh_commands() if cli_args(c) and cli_args(c)[0] in ('train', 'gate', 'lr-find')])
def test_every_training_example_builds_its_config(command, tmp_path, monkeypatch):
    from rectiflow.cli import make_parser, config_from_args
    args, rest = make_parser().parse_known_args(cli_args(command))
    if args.config or getattr(args, 'resume', None) is not None or args.vae: pytest.skip('names the files of an earlier example')
    monkeypatch.chdir(tmp_path)
    cfg = config_from_args(args, rest)
    assert cfg.run.out and cfg.run.task

@pytest.mark.parametrize('command', [c for c in sh_commands() if cli_args(c) and cli_args(c)[0] in ('sample', 'evaluate')
                                     and 'runs/default' in c])
def test_the_examples_on_the_default_run_run_as_written(command, digits_short_run):
    p = run_cli(*cli_args(command), cwd=digits_short_run.parent.parent)     # the short default run, where `make train` puts it
    assert p.returncode == 0, (command, p.stdout, p.stderr)

@pytest.mark.slow
def test_every_cpu_example_runs_in_order_after_a_fresh_default_run(tmp_path):
    env = {**os.environ, 'PATH': f"{BIN}:{os.environ['PATH']}", 'OMP_NUM_THREADS': '1', 'MPLBACKEND': 'Agg'}
    import subprocess
    steps = [['rectiflow', 'train', '--out', 'runs/default', '--overwrite', '--no-progress']]     # what `make train` runs
    steps += [shlex.split(c) for c in sh_commands() if not c.startswith('make ')]
    for words in steps:
        p = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
        assert p.returncode == 0, (' '.join(words), p.stdout[-2000:], p.stderr[-3000:])

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
    p = run_cli('sample', run, '--nfe', '3', '--solver', 'heun', '--out', tmp_path / 'few.png', cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert '--nfe 3 is too small for one heun step with guidance' in p.stderr and not (tmp_path / 'few.png').exists()
