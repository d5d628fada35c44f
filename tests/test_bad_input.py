"""Bad input, one table: each case is one line on stderr (`rectiflow: error:`), exit code 2, and nothing written (no
--out folder, nothing in the run it reads). Run in this process through the command's own `main` (`main_in_process`)."""
import pytest
from conftest import main_in_process, TINY_MOONS

def _files(tmp):
    "The config files the cases read."
    texts = {'list.json': '[1, 2]', 'list.yaml': '- run\n- optim\n', 'run-list.json': '{"run": [1]}',
             'task-list.json': '{"task": [1]}', 'five.json': '5', 'five.yaml': '5\n',
             'out-null.json': '{"run": {"out": null}}', 'out-null.yaml': 'run:\n  out:\n'}
    for name, text in texts.items(): (tmp / name).write_text(text)

NEW = '{tmp}/new'           # the --out a refused command must not create
TRAIN = ['train', '--out', NEW, '--no-progress']

CASES = {       # name: (command line, the one line's words)
    'empty tuple value': ([*TRAIN, '--task.channels', ''], "task.channels expects a comma-separated list of numbers"),
    'empty int value': ([*TRAIN, '--task.layers', ''], "task.layers expects an integer, got ''."),
    'config: a JSON list': ([*TRAIN, '--task', 'flow', '--config', '{tmp}/list.json'], 'holds a list, not sections'),
    'config: a YAML list': ([*TRAIN, '--task', 'flow', '--config', '{tmp}/list.yaml'], 'holds a list, not sections'),
    'config: run is a list': ([*TRAIN, '--task', 'flow', '--config', '{tmp}/run-list.json'],
                              'section run holds a list, not a mapping'),
    'config: task is a list': ([*TRAIN, '--task', 'flow', '--config', '{tmp}/task-list.json'],
                               'section task holds a list, not a mapping'),
    'config: a JSON scalar': ([*TRAIN, '--task', 'flow', '--config', '{tmp}/five.json'], 'holds a number, not sections'),
    'config: a YAML scalar': ([*TRAIN, '--task', 'flow', '--config', '{tmp}/five.yaml'], 'holds a number, not sections'),
    'config: run.out null': (['train', '--no-progress', '--config', '{tmp}/out-null.json'],
                             'run.out expects text, got null'),
    'config: YAML run.out empty': (['train', '--no-progress', '--config', '{tmp}/out-null.yaml'],
                                   'run.out expects text, got null'),
    'empty --data': ([*TRAIN, '--data', ''], "argument --data: expected a dataset, got nothing ('')"),
    'unknown eval.metric': ([*TRAIN, '--eval.metric', 'bogus'], "eval.metric 'bogus' is not a validation figure"),
    'eval.metric of a quality figure without passes': ([*TRAIN, '--data', 'moons', '--eval.metric', 'w2'],
                                                       "eval.metric 'w2' is not a validation figure of task FlowTask"),
    'nfe no whole number of steps': ([*TRAIN, *TINY_MOONS, '--eval.nfe', '3', '--eval.solver', 'heun'],
                                     'eval.nfe 3 is no whole number of heun steps: each takes 2 evaluations, '
                                     'so 2 would be spent; choose 2 or 4.'),
    'sample count past memory': (['sample', '{run}', '--n', '10000000000', '--out', '{tmp}/new.png'],
                                 '10000000000 samples of shape (2,) would take'),
    'unknown encode device': (['encode', '--vae', '{tmp}/vae', '--data', 'moons', '--out', NEW, '--device', 'bogus'],
                              "argument --device: 'bogus' is no device here"),
    'evaluate --solvers without --nfe': (['evaluate', '{run}', '--solvers', 'rk4'],
                                         'argument --solvers: Unknown solver'),
    'evaluate --solvers without --nfe, known names': (['evaluate', '{run}', '--solvers', 'heun'],
                                                      '--solvers chooses the solvers of an --nfe sweep'),
    'evaluate an unknown solver': (['evaluate', '{run}', '--nfe', '2', '--solvers', 'euler,rk4'],
                                   "argument --solvers: Unknown solver 'rk4'; choose from euler, heun"),
    'export an unknown license': (['export', '{run}', NEW, '--license', 'nonsense'],
                                  "Unknown license 'nonsense': give one of the Hub's identifiers, such as apache-2.0"),
}

def tree(*dirs) -> list[str]:
    return sorted(str(p) for d in dirs for p in d.rglob('*'))

@pytest.mark.parametrize('case', CASES)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tiny_run, tmp_path, case):
    _files(tmp_path)
    args, words = CASES[case]
    before = tree(tmp_path, tiny_run)
    code, out, err = main_in_process(*[a.format(tmp=tmp_path, run=tiny_run) for a in args], cwd=tmp_path)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith('rectiflow: error:'), (code, out, err)
    assert words in lines[0] and 'Traceback' not in err and out == '', err
    assert tree(tmp_path, tiny_run) == before                   # no --out, no None/, nothing in the run

def test_a_config_built_in_python_takes_natural_types():
    from rectiflow.tasks.registry import preset, validate
    cfg = preset()
    cfg.run.threads, cfg.optim.lr, cfg.run.steps, cfg.task.channels = 1, 1, 10.0, [16, 32]
    validate(cfg)
    assert (cfg.run.threads, cfg.optim.lr, cfg.run.steps, cfg.task.channels) == ('1', 1.0, 10, (16, 32))
    assert type(cfg.optim.lr) is float and type(cfg.run.steps) is int

def test_settings_that_work_but_not_as_they_read_warn_in_one_line(tmp_path):
    # a warmup as long as the run, and a validation subset larger than the validation set: the run goes on
    code, out, err = main_in_process('train', '--out', tmp_path / 'run', *TINY_MOONS, '--steps', '20',
                                     '--eval.val_items', '300', '--schedule.warmup_steps', '80')
    assert code == 0, err
    assert err.splitlines() == [
        'rectiflow: warning: schedule.warmup_steps 80 is not shorter than run.steps 20: the LR never reaches '
        'optim.lr 0.001; lower the warmup for a run this short.',
        'rectiflow: warning: eval.val_items 300 is more than the 256 validation items; all 256 are used.'], err
    code, out, err = main_in_process('train', '--out', tmp_path / 'quiet', *TINY_MOONS, '--steps', '100',
                                     '--eval.val_items', '256')
    assert code == 0 and err == '', err
