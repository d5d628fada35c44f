"Resume through the CLI: a run killed with SIGKILL and resumed ends bitwise equal to the uninterrupted run."
import json, signal, time
import pytest, torch
from safetensors.torch import load_file
from conftest import (run_cli, start_cli, main_in_process, copy_run, fault_env, TINY_MOONS, cli_in_process, comparable,
                      same_run, records)
from rectiflow.store.rundir import read_holder
from rectiflow.store.files import write_manifest

RUN = [*TINY_MOONS, '--steps', '300', '--checkpoint.save_every', '50', '--eval.every', '50', '--eval.sample_every', '150']

def final_tensors(run):
    ckpt = sorted((run / 'checkpoints').glob('step_*'))[-1]
    return load_file(str(run / 'final' / 'model' / 'diffusion_pytorch_model.safetensors')), load_file(str(ckpt / 'model.safetensors'))

@pytest.fixture(scope='module')
def straight(tmp_path_factory):
    "The uninterrupted run every kill test is compared with."
    run = tmp_path_factory.mktemp('straight') / 'run'
    assert run_cli('train', *RUN, '--out', run).returncode == 0
    return run

def test_resume_after_sigkill_is_bit_identical(tmp_path, straight):
    a, b = straight, tmp_path / 'b'
    proc = start_cli('train', *RUN, '--out', b)
    deadline = time.time() + 300
    while not (b / 'checkpoints' / 'step_000100').exists():
        assert proc.poll() is None and time.time() < deadline, 'run ended before it could be killed'
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL); proc.wait()
    assert not (b / 'final').exists() and read_holder(b)['pid'] == proc.pid     # the killed run's lock, left behind
    p = run_cli('train', '--resume', '--out', b, '--no-progress')
    assert p.returncode == 0, p.stderr                                          # ... taken over silently
    assert read_holder(b)['pid'] != proc.pid and 'written by' not in p.stderr
    for x, y in zip(final_tensors(a), final_tensors(b)):
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
    assert comparable(a) == comparable(b)

@pytest.mark.parametrize('args,message', [
    (['--task.channels', '32'], 'Cannot resume: task.channels was'),
    (['--optim.lr', '0.5'], 'Cannot resume: optim.lr was'),
    (['--overwrite'], '--resume continues a run and --overwrite replaces it'),
])
def test_resume_refusals_are_one_line_exit_2(tiny_run, args, message):
    before = sorted(str(p) for p in tiny_run.rglob('*'))
    code, _, err = main_in_process('train', '--resume', tiny_run, *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(str(p) for p in tiny_run.rglob('*')) == before

def test_a_checkpoint_older_than_a_section_or_a_field_resumes_while_they_keep_their_defaults(tiny_run, tmp_path):
    # a run written before `lora`, `repa` and a task field existed: its checkpoint's config lacks them
    run = copy_run(tiny_run, tmp_path / 'run')
    for state in (run / 'checkpoints').glob('step_*/trainer_state.json'):
        s = json.loads(state.read_text())
        for section in ('lora', 'repa'): s['config'].pop(section)
        s['config']['task'].pop('t_std')
        state.write_text(json.dumps(s))
        write_manifest(state.parent)                     # as that older rectiflow wrote it: whole
    code, _, err = main_in_process('train', '--resume', run, '--repa.weight', '0.3')
    assert code == 2 and 'Cannot resume: repa.weight was 0.5 and is now 0.3' in err, err
    code, out, err = main_in_process('train', '--resume', run, '--no-progress')
    assert code == 0, err

TINY = [*TINY_MOONS, '--steps', '20', '--checkpoint.save_every', '10']     # the shared tiny run's command

def test_resume_into_an_absent_or_empty_folder_starts_the_run(tmp_path, tiny_run):
    # a job script that always says --resume, on its first launch (the folder may hold a lock of an earlier try)
    p = run_cli('train', *TINY, '--resume', '--out', tmp_path / 'absent')
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"rectiflow: nothing to resume in {tmp_path / 'absent'} yet: starting the run.")
    same_run(tiny_run, tmp_path / 'absent')
    locked = tmp_path / 'locked'
    locked.mkdir()
    (locked / '.lock').touch()
    code, out, err = main_in_process('train', *TINY, '--resume', locked)
    assert code == 0 and 'nothing to resume' in out, err
    code, _, err = main_in_process('train', '--resume', tmp_path / 'absent' / 'checkpoints' / 'step_000400')
    assert code == 2 and 'No checkpoint to resume' in err          # a checkpoint's path that is not there: refused

@pytest.mark.parametrize('write', ['run_info.json', 'config.json'])
def test_a_kill_after_each_write_of_a_start_resumes_to_the_same_run(tmp_path, tiny_run, write):
    run = tmp_path / 'run'
    p = run_cli('train', *TINY, '--resume', '--out', run, env=fault_env(kill_after=write))
    assert p.returncode == -signal.SIGKILL and (run / write).exists(), p.stderr
    p = run_cli('train', *TINY, '--resume', '--out', run)             # the scheduler requeues the same command
    assert p.returncode == 0, p.stderr
    assert 'beginning the run again from step 0' in p.stdout
    same_run(tiny_run, run)

def test_the_sampler_changes_on_resume_and_the_log_says_where(tmp_path, tiny_run):
    run = copy_run(tiny_run, tmp_path / 'run')
    code, out, err = main_in_process('train', '--resume', run, '--steps', '30', '--eval.solver', 'euler',
                                     '--eval.nfe', '8', '--no-progress')
    assert code == 0, err
    assert 'resuming' in out and 'from step 20' in out and 'trained steps 20-30 (10 in this command)' in out
    changed = [r for r in records(run) if r['kind'] == 'sampler']
    assert [(r['step'], r['solver'], r['nfe'], r['was']) for r in changed] == [(20, 'euler', 8, {'solver': 'heun', 'nfe': 20})]
    assert json.loads((run / 'final' / 'info.json').read_text())['config']['eval']['nfe'] == 8

def _start(run, *extra, faults=None):
    return start_cli('train', *RUN, '--out', run, *extra, env=fault_env(**(faults or {})))

def _wait_for(path, proc, timeout=300):
    deadline = time.time() + timeout
    while not path.exists():
        assert proc.poll() is None and time.time() < deadline, 'run ended before the moment came'
        time.sleep(0.01)

def test_sigterm_checkpoints_exits_0_and_resumes_bit_identically(tmp_path, straight):
    a, b = straight, tmp_path / 'b'
    proc = _start(b)
    _wait_for(b / 'checkpoints' / 'step_000050', proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    info = json.loads((b / 'run_info.json').read_text())
    assert info['status'] == 'stopped_by_signal' and info['signal'] == 'SIGTERM'
    assert (b / 'checkpoints' / f"step_{info['stopped_at']:06d}").is_dir() and 'continue with' in out
    assert 50 <= info['stopped_at'] < 300
    p = run_cli('train', '--resume', '--out', b, '--no-progress')
    assert p.returncode == 0, p.stderr
    for x, y in zip(final_tensors(a), final_tensors(b)):
        assert all(torch.equal(x[k], y[k]) for k in x)
    assert comparable(a) == comparable(b)
    assert json.loads((b / 'run_info.json').read_text())['status'] == 'completed'

def test_nan_fails_nonzero_and_keeps_the_last_good_checkpoint(tmp_path):
    run = tmp_path / 'run'
    p = run_cli('train', *RUN, '--out', run, env=fault_env(nan_at_step=120))
    assert p.returncode not in (0, 2) and 'Non-finite loss' in p.stderr and 'Traceback' not in p.stderr
    info = json.loads((run / 'run_info.json').read_text())
    assert info['status'] == 'failed' and 'NonFiniteError' in info['reason']
    last = sorted((run / 'checkpoints').glob('step_*'))[-1]
    assert last.name == 'step_000100'
    weights = load_file(str(last / 'model.safetensors'))
    assert all(torch.isfinite(w).all() for w in weights.values())
    assert (run / 'best' / 'model' / 'diffusion_pytorch_model.safetensors').exists()

def test_heartbeat_is_written_at_log_steps(tiny_run):
    hb = json.loads((tiny_run / 'heartbeat.json').read_text())
    assert hb['step'] == 20 and hb['total'] == 20 and hb['best'] is not None and time.time() - hb['time'] < 600

@pytest.mark.slow     # a minute: five kills and resumes; every `make test` has the one SIGKILL above
def test_killed_at_five_moments_including_mid_checkpoint_still_bit_identical(tmp_path, straight):
    a, b = straight, tmp_path / 'b'
    ck = b / 'checkpoints'
    moments = [lambda: (ck / 'step_000050').exists(),
               lambda: any(ck.glob('.tmp_step_0001*')),                 # inside a checkpoint write
               lambda: (ck / 'step_000150').exists(),
               lambda: any(ck.glob('.tmp_step_0002*')),
               lambda: (ck / 'step_000250').exists()]
    for i, moment in enumerate(moments):
        proc = _start(b, *(['--resume'] if i else []), faults={'checkpoint_delay': 0.3})
        deadline = time.time() + 300
        while not moment():
            assert proc.poll() is None and time.time() < deadline, f'moment {i}: run ended first ({proc.stderr.read()[-2000:]})'
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL); proc.wait()
    p = run_cli('train', '--resume', '--out', b, '--no-progress')
    assert p.returncode == 0, p.stderr
    for x, y in zip(final_tensors(a), final_tensors(b)):
        assert all(torch.equal(x[k], y[k]) for k in x)
    assert comparable(a) == comparable(b)

def test_a_torn_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, tiny_run):
    run = copy_run(tiny_run, tmp_path / 'run')
    newest = run / 'checkpoints' / 'step_000020' / 'model.safetensors'
    newest.write_bytes(newest.read_bytes()[:100])                     # a copy cut short
    p = run_cli('train', '--resume', '--out', run, '--steps', '30', '--no-progress')
    assert p.returncode == 0, p.stderr
    assert 'step_000020 is damaged: model.safetensors is 100 bytes, not the' in p.stderr
    assert 'falling back to the one before it' in p.stderr
    recs = comparable(run)
    assert [r['step'] for r in recs if r['kind'] == 'train'] == [10, 20, 30]   # 20 re-trained from the step-10 checkpoint

def test_init_from_starts_a_new_run_from_trained_weights(tmp_path):
    a, b, fresh = tmp_path / 'a', tmp_path / 'b', tmp_path / 'fresh'
    args = [*TINY_MOONS, '--steps', '10']
    assert run_cli('train', *args, '--steps', '60', '--out', a).returncode == 0
    assert cli_in_process('train', *args, '--out', fresh).returncode == 0
    p = cli_in_process('train', *args, '--out', b, '--init-from', a)
    assert p.returncode == 0, p.stderr
    first_val = lambda run: next(r for r in comparable(run) if r['kind'] == 'val')
    assert first_val(b)['step'] == 0                                     # a new run: step, schedule and log start afresh
    assert first_val(b)['val_loss'] < 0.9 * first_val(fresh)['val_loss']  # but from the trained weights
    assert json.loads((b / 'run_info.json').read_text())['init_from'].endswith('step_000060')
    code, _, err = main_in_process('train', *args, '--out', tmp_path / 'c', '--init-from', a, '--task.channels', '64')
    assert code == 2 and 'model config' in err

def test_a_runs_config_holds_no_fault_injection_and_one_with_the_old_debug_section_resumes(tiny_run, tmp_path):
    assert 'debug' not in json.loads((tiny_run / 'config.json').read_text())
    run = copy_run(tiny_run, tmp_path / 'run')                 # as a run written when the faults were a config section
    old = {'nan_at_step': 0, 'nan_rank': -1, 'checkpoint_delay': 0.0, 'fail_checkpoint_at': 0, 'free_bytes': 0.0}
    config = json.loads((run / 'config.json').read_text())
    (run / 'config.json').write_text(json.dumps({**config, 'debug': old}))
    for ckpt in (run / 'checkpoints').glob('step_*'):
        state = json.loads((ckpt / 'trainer_state.json').read_text())
        state['config']['debug'] = old
        (ckpt / 'trainer_state.json').write_text(json.dumps(state))
        write_manifest(ckpt)
    code, out, err = main_in_process('evaluate', run / 'checkpoints' / 'step_000010', '--json')
    assert code == 0 and json.loads(out)['step'] == 10, err
    code, _, err = main_in_process('train', '--resume', run / 'checkpoints' / 'step_000010', '--no-progress')
    assert code == 0, err
    code, _, err = main_in_process('train', '--resume', '--out', run, '--steps', '30', '--no-progress')
    assert code == 0, err

def test_the_python_api_resumes_a_run_directory_from_its_newest_checkpoint(tiny_run, tmp_path, one_thread):
    import shutil
    from rectiflow.tasks.registry import load_config
    from rectiflow.api import train
    run = copy_run(tiny_run, tmp_path / 'run')
    for gone in ('final', 'checkpoints/step_000020'): shutil.rmtree(run / gone)
    first = (run / 'metrics.jsonl').read_text().splitlines()[0]         # step 0's record, with the time it took
    cfg = load_config(run / 'config.json')
    cfg.run.out = str(run)
    train(cfg, progress=False, resume=run)                      # a run directory, not a checkpoint: its newest
    assert (run / 'metrics.jsonl').read_text().splitlines()[0] == first     # continued, not begun again
    same_run(run, tiny_run)
