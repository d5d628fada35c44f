"""Code a run or export names is imported only from where the user's Python imports code, unless they pass
--trust-code (trust_code=True): a planted module (its model class, its task, a saved config's callbacks, in the export's
folder or the working directory) never runs for `sample`, `evaluate`, `load_run` or `--resume` without it, and runs with
it; a current export without its manifest is damaged, not read unverified."""
import json, os, subprocess, sys
from pathlib import Path
import pytest
from conftest import run_cli, copy_run, one_line, TINY_MOONS
from rectiflow.store.files import write_manifest, MANIFEST

# A module that leaves a marker when it is imported, and is otherwise the class it stands for.
PLANTED = {'model': "open({marker!r}, 'w').close()\nfrom rectiflow.flow.models import MLPVelocity as Net\n",
           'task': "open({marker!r}, 'w').close()\nfrom rectiflow.tasks.flow import FlowTask as Task\n",
           'callback': "open({marker!r}, 'w').close()\nfrom rectiflow.run.callbacks import Callback as Cb\n"}


def plant(folder: Path, module: str, kind: str, marker: Path):
    (folder / f'{module}.py').write_text(PLANTED[kind].format(marker=str(marker)))

def rewrite_info(export: Path, change):
    "The export's info.json changed by `change(info)`, its manifest rewritten to match: as a stranger would ship it."
    info = json.loads((export / 'info.json').read_text())
    change(info)
    (export / 'info.json').write_text(json.dumps(info))
    (export / MANIFEST).unlink()
    write_manifest(export)

def set_task(task: str): return lambda info: info['config']['run'].update(task=task)
def set_model_class(spec: str): return lambda info: info.update(model_class=spec)


@pytest.fixture(scope='module')
def planted(tiny_run, tmp_path_factory):
    """Exports of the tiny run, each naming a planted module: {case: (export, working directory, spec, marker)}.
    The working directory of each is empty but for what the case plants there."""
    root = tmp_path_factory.mktemp('planted')
    cases = {}
    for case, module, kind, beside in [('model class in the export', 'p_model', 'model', 'export'),
                                       ('task in the working directory', 'p_task_cwd', 'task', 'cwd'),
                                       ('task in the export', 'p_task_export', 'task', 'export')]:
        export, cwd = copy_run(tiny_run / 'final', root / module / 'hub'), root / module / 'work'
        cwd.mkdir()
        spec = f'{module}:Net' if kind == 'model' else f'{module}:Task'
        marker = root / module / 'ran'
        plant(export if beside == 'export' else cwd, module, kind, marker)
        rewrite_info(export, set_model_class(spec) if kind == 'model' else set_task(spec))
        cases[case] = (export, cwd, spec, marker)
    return cases

COMMANDS = {'sample': lambda export, out: ['sample', export, '--n', '20', '--out', out / 'grid.png'],
            'evaluate': lambda export, out: ['evaluate', export, '--json']}

@pytest.mark.parametrize('command', COMMANDS)
def test_a_planted_module_runs_only_with_trust_code(planted, command, tmp_path):
    for case, (export, cwd, spec, marker) in planted.items():
        args = COMMANDS[command](export, tmp_path)
        p = run_cli(*args, cwd=cwd)
        assert p.returncode == 2 and one_line(p.stderr), (case, p.stderr)
        assert f'class {spec} would be imported from {export if "export" in case else cwd}/' in p.stderr, (case, p.stderr)
        assert 'which is not trusted' in p.stderr and '--trust-code' in p.stderr, (case, p.stderr)
        assert not marker.exists(), f'{command} ran the planted module of the {case} without --trust-code'
        p = run_cli(*args, '--trust-code', cwd=cwd)
        assert p.returncode == 0, (case, p.stderr)
        assert marker.exists(), f'{command} --trust-code did not import the {case}'
        marker.unlink()


# load_run in one fresh interpreter (no planted module imported before), in each case's working directory in turn:
# refused (nothing run, the working directory not added to sys.path), then with trust_code=True the module runs.
LOAD_RUN = r'''
import json, os, sys
from pathlib import Path
from rectiflow.config import ConfigError
from rectiflow.api import load_run
for export, cwd, marker in json.loads(sys.argv[1]):
    os.chdir(cwd)
    export, marker = Path(export), Path(marker)
    try:
        load_run(export)
        err = None
    except ConfigError as e: err = str(e)
    out = {'error': err, 'ran': marker.exists(), 'cwd_added': os.getcwd() in sys.path}
    out['shape'] = list(load_run(export, trust_code=True).sample(4).shape)
    out['ran_trusted'] = marker.exists()
    print(json.dumps(out))
'''

def test_load_run_imports_a_planted_module_only_with_trust_code(planted):
    cases = [(str(export), str(cwd), str(marker)) for export, cwd, spec, marker in planted.values()]
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    p = subprocess.run([sys.executable, '-c', LOAD_RUN, json.dumps(cases)], cwd=cases[0][1], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    answers = [json.loads(l) for l in p.stdout.splitlines() if l.startswith('{')]
    assert len(answers) == len(planted)
    for (case, (export, cwd, spec, marker)), r in zip(planted.items(), answers):
        assert r['error'] and f'class {spec} would be imported from' in r['error'], (case, r)
        assert not r['ran'] and not r['cwd_added'], (case, r)
        assert r['ran_trusted'] and r['shape'] == [4, 2], (case, r)
        marker.unlink()


# A run trained with a callback the user named from the working directory: resuming it reads that name from the
# run's config, so the working directory no longer serves it without trust.
RESUME = r'''
import json, sys
from pathlib import Path
from rectiflow.config import ConfigError
from rectiflow.tasks.registry import load_config
from rectiflow.api import train
run, marker = Path(sys.argv[1]), Path(sys.argv[2])
cfg = load_config(run / 'config.json')
cfg.run.max_steps = 0                                   # on to the run's end, as --max-steps 0
try:
    train(cfg, progress=False, resume=run / 'checkpoints' / 'step_000010')
    err = None
except ConfigError as e: err = str(e)
out = {'error': err, 'ran': marker.exists()}
final = train(cfg, progress=False, resume=run / 'checkpoints' / 'step_000010', trust_code=True)
out.update(ran_trusted=marker.exists(), step=final['step'])
print(json.dumps(out))
'''

def test_a_saved_configs_callbacks_are_imported_on_resume_only_with_trust_code(tmp_path):
    marker = tmp_path / 'ran'
    plant(tmp_path, 'p_callback', 'callback', marker)
    p = run_cli('train', *TINY_MOONS, '--steps', '20', '--max-steps', '10', '--checkpoint.save_every', '10',
                '--callbacks', 'p_callback:Cb', '--out', 'run', cwd=tmp_path)
    assert p.returncode == 0 and marker.exists(), p.stderr            # named on the command line: as ever
    marker.unlink()
    run = tmp_path / 'run'
    p = run_cli('train', '--resume', '--out', run, '--no-progress', cwd=tmp_path)
    assert p.returncode == 2 and one_line(p.stderr), p.stderr
    assert f'Callback class p_callback:Cb would be imported from {tmp_path}/p_callback.py' in p.stderr, p.stderr
    assert not marker.exists()
    p = subprocess.run([sys.executable, '-c', RESUME, str(run), str(marker)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.splitlines()[-1])
    assert 'Callback class p_callback:Cb would be imported from' in r['error'] and not r['ran'], r
    assert r['ran_trusted'] and r['step'] == 20, r


def test_the_runs_own_code_loads_without_trust_where_the_user_put_it_on_pythonpath(planted, tmp_path):
    export, cwd, spec, marker = planted['task in the working directory']
    p = run_cli('sample', export, '--n', '20', '--out', tmp_path / 'grid.png', cwd=cwd,
                env={'PYTHONPATH': os.pathsep.join(p for p in (str(cwd), os.environ.get('PYTHONPATH')) if p)})
    assert p.returncode == 0 and marker.exists(), p.stderr
    marker.unlink()


def flip(p: Path):
    b = bytearray(p.read_bytes())
    b[len(b) // 2] ^= 0xFF
    p.write_bytes(bytes(b))

def test_a_current_export_without_its_manifest_is_damaged_and_an_old_one_is_read_with_a_warning(tiny_run, tmp_path):
    run = copy_run(tiny_run, tmp_path / 'run')
    final = run / 'final'
    (final / MANIFEST).unlink()
    flip(final / 'model' / 'diffusion_pytorch_model.safetensors')
    for args in (['evaluate', final], ['sample', final, '--out', tmp_path / 'grid.png']):
        p = run_cli(*args)
        assert p.returncode == 2 and one_line(p.stderr), p.stderr
        assert 'final is damaged: manifest.json is missing' in p.stderr, p.stderr
    old = copy_run(tiny_run / 'best', tmp_path / 'old')                 # version 1: perhaps from before manifests
    info = json.loads((old / 'info.json').read_text())
    (old / 'info.json').write_text(json.dumps({**info, 'version': 1}))
    (old / MANIFEST).unlink()
    p = run_cli('evaluate', old, '--json')
    assert p.returncode == 0 and 'old was exported before exports had manifests: it is read unverified' in p.stderr
    assert json.loads(p.stdout)['step'] == info['step']


def test_export_imports_the_task_a_runs_export_names_only_with_trust_code(tiny_run, tmp_path):
    run, marker = copy_run(tiny_run, tmp_path / 'run'), tmp_path / 'ran'
    plant(run / 'final', 'p_task_export_cmd', 'task', marker)
    rewrite_info(run / 'final', set_task('p_task_export_cmd:Task'))
    p = run_cli('export', run, tmp_path / 'hub', cwd=tmp_path)
    assert p.returncode == 2 and one_line(p.stderr) and 'Task class p_task_export_cmd:Task would be' in p.stderr, p.stderr
    assert not marker.exists() and not (tmp_path / 'hub').exists()
    p = run_cli('export', run, tmp_path / 'hub', '--trust-code', cwd=tmp_path)
    assert p.returncode == 0 and marker.exists(), p.stderr
