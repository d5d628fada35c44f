"""Checkpoints and exports are whole or not used, and reading them never runs code: each part of the newest checkpoint
damaged in turn (cut short, deleted, bytes flipped) makes `--resume` fall back to the one before and end bit-identical
to the uninterrupted run, and `evaluate` of it answer in one line; a planted pickle is refused unread by every command
that reads a run; a run killed before its first checkpoint is begun again by `--resume`; a run's damaged files are one
line or a warning."""
import json, os, pickle, signal, time
from pathlib import Path
import pytest, torch
from conftest import main_in_process, start_cli, copy_run, fault_env, TINY_MOONS, one_line, same_run
from rectiflow.store.files import write_manifest, MANIFEST

TINY = [*TINY_MOONS, '--steps', '20', '--checkpoint.save_every', '10']      # the settings of the tiny_run fixture
PARTS = {'model': 'model.safetensors', 'optimizer': 'optimizer.bin', 'scheduler': 'scheduler.bin',
         'ema': 'ema.safetensors', 'streams': 'streams.safetensors', 'rng': 'random_states_0.pkl',
         'state': 'trainer_state.json'}


def one_error(err: str) -> bool:
    "One line of error, after any one-line warnings (a checkpoint read unverified says so)."
    lines = err.strip().splitlines()
    return lines[-1].startswith('rectiflow: error:') and all(l.startswith('rectiflow: warning:') for l in lines[:-1])

def truncate(p: Path): p.write_bytes(p.read_bytes()[:len(p.read_bytes()) // 2])
def delete(p: Path): p.unlink()
def flip(p: Path):
    "16 bytes inverted in the middle of the file: as long as it was, but other bytes."
    b = bytearray(p.read_bytes())
    mid = len(b) // 2
    b[mid:mid + 16] = bytes(x ^ 0xFF for x in b[mid:mid + 16])
    p.write_bytes(bytes(b))

DAMAGES = {'truncate': truncate, 'delete': delete, 'flip': flip}


@pytest.mark.parametrize('part', PARTS)
def test_each_damaged_part_falls_back_on_resume_bit_identically_and_evaluate_says_it_in_one_line(
        tiny_run, tmp_path, one_thread, part):
    for how, damage in DAMAGES.items():
        run = copy_run(tiny_run, tmp_path / f'{part}-{how}')
        newest = run / 'checkpoints' / 'step_000020'
        damage(newest / PARTS[part])
        code, out, err = main_in_process('evaluate', newest)
        assert code == 2 and one_line(err) and f'step_000020 is damaged: {PARTS[part]}' in err, (how, err)
        code, out, err = main_in_process('train', '--resume', '--out', run, '--no-progress')
        assert code == 0, (how, err)
        warned = [l for l in err.splitlines() if l.startswith('rectiflow: warning:')]
        assert len(warned) == 1 and f'step_000020 is damaged: {PARTS[part]}' in warned[0], (how, err)
        assert 'falling back to the one before it' in warned[0]
        same_run(run, tiny_run)


class Planted:
    "A pickle that creates a file when it is loaded: what reading a checkpoint must never run."
    def __init__(self, path): self.path = str(path)
    def __reduce__(self): return (os.system, (f'touch {self.path}',))

def plant(path: Path, marker: Path):
    with open(path, 'wb') as f: pickle.dump({'state': Planted(marker)}, f, protocol=2)

def forge_manifest(folder: Path):
    "The manifest rewritten to match what the folder now holds: the manifest cannot be what refuses the pickle."
    (folder / MANIFEST).unlink()
    write_manifest(folder)

def as_written_before_manifests(ckpt: Path, marker: Path):
    "The checkpoint as a run of the format before manifests wrote it, its EMA pickle swapped for a planted one."
    state = json.loads((ckpt / 'trainer_state.json').read_text())
    state.pop('checkpoint_format')
    (ckpt / 'trainer_state.json').write_text(json.dumps(state))
    for name in ('ema.safetensors', 'streams.safetensors', MANIFEST): (ckpt / name).unlink()
    plant(ckpt / 'custom_checkpoint_0.pkl', marker)
    plant(ckpt / 'custom_checkpoint_1.pkl', marker)


def test_a_planted_pickle_is_refused_unread_by_every_command_that_reads_a_run(tiny_run, tmp_path, one_thread):
    marker = tmp_path / 'ran'
    run = copy_run(tiny_run, tmp_path / 'run')
    ckpts = sorted((run / 'checkpoints').glob('step_*'))
    for ckpt in ckpts: as_written_before_manifests(ckpt, marker)
    refusals = {
        'evaluate': ['evaluate', ckpts[-1]],
        'init-from': ['train', *TINY, '--out', tmp_path / 'new', '--init-from', ckpts[-1]],
        'resume (unverified)': ['train', '--resume', ckpts[-1], '--no-progress'],
    }
    current = copy_run(tiny_run, tmp_path / 'current')                 # today's format, its manifest forged
    newest = current / 'checkpoints' / 'step_000020'
    plant(newest / 'optimizer.bin', marker)
    forge_manifest(newest)
    refusals['resume'] = ['train', '--resume', newest, '--no-progress']
    for name in ('final', 'best'):                                     # an export's weights swapped for a pickle
        plant(current / name / 'model' / 'diffusion_pytorch_model.safetensors', marker)
        forge_manifest(current / name)
    refusals['sample'] = ['sample', current, '--n', '50']
    for what, args in refusals.items():
        code, _, err = main_in_process(*args)
        assert code == 2 and one_error(err) and 'is damaged:' in err, (what, err)
        assert not marker.exists(), f'{what} ran the planted pickle'
    assert 'custom_checkpoint_0.pkl holds code, not data (it would call posix.system); refused unread' in \
        main_in_process('evaluate', ckpts[-1])[2]
    assert 'optimizer.bin holds code, not data' in main_in_process('train', '--resume', newest)[2]
    from rectiflow.config import ConfigError
    from rectiflow.api import load_run
    with pytest.raises(ConfigError, match='final is damaged: model cannot be read'):
        load_run(current)
    assert not marker.exists()


def test_a_checkpoint_written_before_manifests_is_still_read_with_a_warning(tiny_run, tmp_path, one_thread):
    run = copy_run(tiny_run, tmp_path / 'run')
    for ckpt in (run / 'checkpoints').glob('step_*'):               # as the previous format wrote it
        state = json.loads((ckpt / 'trainer_state.json').read_text())
        state.pop('checkpoint_format')
        (ckpt / 'trainer_state.json').write_text(json.dumps(state))
        from rectiflow.store.checkpoint import load_ema_state, load_streams
        torch.save(load_ema_state(ckpt / 'ema.safetensors'), ckpt / 'custom_checkpoint_0.pkl')
        streams = load_streams(ckpt / 'streams.safetensors')
        torch.save({'state': streams[0], 'per_rank': streams}, ckpt / 'custom_checkpoint_1.pkl')
        for name in ('ema.safetensors', 'streams.safetensors', MANIFEST): (ckpt / name).unlink()
    newest = run / 'checkpoints' / 'step_000020'
    code, out, err = main_in_process('evaluate', newest, '--json')
    assert code == 0 and 'read unverified' in err and json.loads(out)['step'] == 20, err
    (run / 'final').rename(tmp_path / 'final')                       # resumed from step 10: the run ends again
    code, _, err = main_in_process('train', '--resume', run / 'checkpoints' / 'step_000010', '--no-progress')
    assert code == 0 and 'step_000010 was written before checkpoints had manifests' in err, err
    same_run(run, tiny_run)


def test_a_run_killed_before_its_first_checkpoint_is_begun_again_by_resume(tiny_run, tmp_path, one_thread):
    run = tmp_path / 'run'
    # every checkpoint write pauses inside its temporary folder: the kill lands before the first is published
    command = ['train', *TINY, '--out', run]
    proc = start_cli(*command, env=fault_env(checkpoint_delay=1))
    deadline = time.time() + 300
    while not any((run / 'checkpoints').glob('.tmp_step_*')):
        assert proc.poll() is None and time.time() < deadline, 'the run ended before it could be killed'
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not list((run / 'checkpoints').glob('step_*')) and (run / 'config.json').exists()
    code, _, err = main_in_process(*command, '--resume', '--optim.lr', '0.5')
    assert code == 2 and one_line(err) and 'Cannot resume: optim.lr was' in err, err      # another config: refused
    code, out, err = main_in_process(*command, '--resume')                                 # the same command
    assert code == 0, err
    assert 'no checkpoint yet in' in out and 'beginning the run again from step 0' in out
    same_run(run, tiny_run)            # (a folder with no run at all: tests/run/test_resume.py starts it)


def test_a_runs_damaged_files_are_one_line_or_a_warning(tiny_run, tmp_path, one_thread):
    run = copy_run(tiny_run, tmp_path / 'run')
    (run / 'config.json').write_bytes(b'\x89PNG\r\n\x1a\n\x00\x00')
    code, _, err = main_in_process('train', '--resume', '--out', run)
    assert code == 2 and one_line(err) and 'config.json could not be parsed' in err, err
    run = copy_run(tiny_run, tmp_path / 'run2')
    for name in ('run_info.json', 'gates.jsonl', 'lr_find.jsonl', 'nfe_sweep.json'):
        (run / name).write_bytes(b'\xff\xfe\x00 not json')
    code, out, err = main_in_process('export', run, tmp_path / 'out')                   # only informative: warnings
    assert code == 0 and 'run_info.json is damaged' in err, err
    from rectiflow.tools.sweep import read_sweep
    from rectiflow.tools.lr_find import LRFindResult
    from rectiflow.config import ConfigError
    with pytest.warns(UserWarning, match='nfe_sweep.json is damaged'): assert read_sweep(run) is None
    with pytest.raises(ConfigError, match='lr_find.jsonl holds no whole range test'): LRFindResult.load(run)
    (run / 'final' / 'info.json').write_bytes(b'{"format": "rectiflow-exp')
    code, _, err = main_in_process('sample', run / 'final')
    assert code == 2 and one_line(err) and 'info.json' in err, err
