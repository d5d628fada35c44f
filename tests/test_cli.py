"The `rectiflow` command end to end, in subprocesses, as a user runs it."
import json
import pytest
from conftest import run_cli, main_in_process, TINY_MOONS, BIN, cli_in_process, records

def test_train_then_sample_writes_a_complete_run(tmp_path):
    run = tmp_path / 'run'
    p = run_cli('train', *TINY_MOONS, '--steps', '40', '--out', run, fresh=True)     # a new interpreter, as a user's
    assert p.returncode == 0, p.stderr
    assert 'W2' in p.stdout and 'noise floor' in p.stdout
    for f in ('config.json', 'run_info.json', 'metrics.jsonl', 'final/model/config.json', 'final/model/diffusion_pytorch_model.safetensors',
              'samples/step_000020.png', 'samples/step_000040.png'):
        assert (run / f).exists(), f
    assert json.loads((run / 'run_info.json').read_text())['status'] == 'completed'
    kinds = [r['kind'] for r in records(run)]
    assert kinds.count('final') == 1 and kinds.count('train') == 4
    p = cli_in_process('sample', run, '--n', '300', '--seed', '1')
    assert p.returncode == 0, p.stderr
    assert (run / 'samples' / 'grid_seed1.png').stat().st_size > 1000

def test_console_script_and_help():
    import subprocess
    p = subprocess.run([str(BIN / 'rectiflow'), 'train', '--help'], capture_output=True, text=True)
    assert p.returncode == 0 and '--section.field value' in p.stdout

def _bad_cases(tmp):
    used = tmp / 'used'; used.mkdir(); (used / 'config.json').write_text('{}')
    afile = tmp / 'afile'; afile.write_text('x')
    empty = tmp / 'empty.yaml'; empty.write_text('# to be written\n')
    return {
        'unknown dataset': (['--data', 'mnist'], 'invalid choice'),
        'unknown model': (['--model', 'gan'], 'invalid choice'),
        'zero steps': (['--steps', '0'], 'run.steps must be positive'),
        'negative steps': (['--steps', '-5'], 'run.steps must be positive'),
        'zero batch': (['--data.batch_size', '0'], 'data.batch_size must be positive'),
        'batch larger than data': (['--data', 'moons', '--task.n_train', '100', '--data.batch_size', '128'], 'exceeds the training set'),
        'digits batch larger than data': (['--data.batch_size', '5000'], 'exceeds the training set of 1437'),
        'unwritable out': (['--out', '/proc/rectiflow-run'], 'not writable'),
        'out under a file': (['--out', afile / 'run'], 'not writable'),
        'used out without overwrite': (['--out', used], 'already holds a run; pass --overwrite'),
        'malformed value': (['--optim.lr', 'abc'], 'optim.lr expects a number'),
        'unknown key': (['--optim.learning_rate', '1'], 'Unknown config key optim.learning_rate'),
        'unknown section': (['--optimizer.lr', '1'], "Unknown config section 'optimizer'"),
        'missing value': (['--optim.lr'], 'needs a value'),
        'stray argument': (['moons'], "Unexpected argument 'moons'"),
        'missing config file': (['--config', tmp / 'nope.json'], 'does not exist'),
        'empty config file': (['--config', empty], 'is empty; give the sections'),
        'sampler budget too small': (['--eval.nfe', '2'], 'eval.nfe 2 is too small for one midpoint step with guidance'),
    }

def test_every_bad_case_is_tested(tmp_path):
    assert sorted(_bad_cases(tmp_path)) == sorted(BAD_CASES)

BAD_CASES = ['unknown dataset', 'unknown model', 'zero steps', 'negative steps', 'zero batch', 'batch larger than data',
             'digits batch larger than data', 'unwritable out', 'out under a file', 'used out without overwrite',
             'malformed value', 'unknown key', 'unknown section', 'missing value', 'stray argument', 'missing config file',
             'empty config file', 'sampler budget too small']

def check_one_line_and_nothing_written(tmp_path, case, run):
    args, message = _bad_cases(tmp_path)[case]
    before = sorted(str(p) for p in tmp_path.rglob('*'))
    out = [] if '--out' in map(str, args) else ['--out', tmp_path / 'new-run']
    code, stdout, stderr = run('train', *out, *args, cwd=tmp_path)
    assert code == 2, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('rectiflow: error:') and message in lines[0], stderr
    assert 'Traceback' not in stderr and stdout == ''
    assert sorted(str(p) for p in tmp_path.rglob('*')) == before     # nothing written, nothing overwritten

@pytest.mark.parametrize('case', BAD_CASES)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, case):
    check_one_line_and_nothing_written(tmp_path, case, main_in_process)

def in_a_fresh_process(*args, cwd):
    p = run_cli(*args, cwd=cwd, fresh=True)
    return p.returncode, p.stdout, p.stderr

@pytest.mark.parametrize('case', ['unknown dataset', 'batch larger than data', 'used out without overwrite'])
def test_bad_input_in_a_fresh_process_prints_that_one_line_and_nothing_else(tmp_path, case):
    check_one_line_and_nothing_written(tmp_path, case, in_a_fresh_process)   # no import-time warnings on stderr either

def test_overwrite_replaces_a_previous_run(tmp_path):
    run = tmp_path / 'run'
    assert cli_in_process('train', *TINY_MOONS, '--steps', '10', '--out', run).returncode == 0
    (run / 'metrics.jsonl').write_text('{"stale": true}\n')
    p = cli_in_process('train', *TINY_MOONS, '--steps', '10', '--out', run, '--overwrite')
    assert p.returncode == 0, p.stderr
    assert all('stale' not in r for r in records(run))

def test_config_file_round_trip(tmp_path):
    run = tmp_path / 'a'
    assert cli_in_process('train', *TINY_MOONS, '--steps', '10', '--out', run, '--optim.lr', '0.002').returncode == 0
    p = cli_in_process('train', '--config', run / 'config.json', '--out', tmp_path / 'b', '--no-progress')
    assert p.returncode == 0, p.stderr
    a, b = (json.loads((tmp_path / d / 'config.json').read_text()) for d in 'ab')
    a['run']['out'] = b['run']['out']
    assert a == b and b['optim']['lr'] == 0.002

@pytest.mark.parametrize('flags, message', [(['--solver', 'rk4'], "invalid choice: 'rk4'"),
                                            (['--out', '{tmp}'], 'is a folder; give a file such as'),
                                            (['--out', '{tmp}/x.txt'], "cannot save a figure as 'x.txt'")])
def test_bad_sample_flags_are_one_line_exit_2_and_write_nothing(tiny_run, tmp_path, flags, message):
    before = sorted(str(p) for d in (tiny_run, tmp_path) for p in d.rglob('*'))
    code, out, err = main_in_process('sample', tiny_run, *[f.format(tmp=tmp_path) for f in flags])
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err and out == '', err
    assert sorted(str(p) for d in (tiny_run, tmp_path) for p in d.rglob('*')) == before
