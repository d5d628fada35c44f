"""The run directory's guards, end to end: one live writer per run directory (a second one of any kind refuses in one
line, exit 2, and the first run's records stay its own), write faults that lose nothing (one line, exit 5, no temporary
folder, the earlier checkpoints intact, `--resume` bit-identical once there is room), the pre-flight space check, and
the memory figures in the records."""
import json, os, subprocess, time
import pytest
from conftest import main_in_process, start_cli, copy_run, lock_held, records, fault_env, TINY_MOONS, one_line, same_run
from rectiflow.store.checkpoint import checkpoint_dirs, check_checkpoint, RESUME_PARTS
from rectiflow.store.rundir import read_holder
import rectiflow.tools.gates, rectiflow.tools.lr_find, rectiflow.tasks.registry     # imported now: the refusals below race a live run  # noqa: F401

TINY = [*TINY_MOONS, '--steps', '20', '--checkpoint.save_every', '10']      # the settings of the tiny_run fixture



def temporaries(run) -> list[str]:
    return sorted(str(p.relative_to(run)) for p in run.rglob('.tmp*'))




def test_a_second_writer_of_each_kind_refuses_while_a_run_trains(tmp_path):
    run = tmp_path / 'run'
    first = start_cli('train', *TINY_MOONS, '--steps', '40', '--checkpoint.save_every', '10', '--out', run,
                      env=fault_env(checkpoint_delay=2))
    deadline = time.time() + 300
    while not (run / 'checkpoints' / 'step_000010').exists():
        assert first.poll() is None and time.time() < deadline, first.communicate()[1][-2000:]
        time.sleep(0.05)
    code, out, err = main_in_process('evaluate', run / 'checkpoints' / 'step_000010', '--json')   # a reader: no lock
    assert code == 0 and json.loads(out)['step'] == 10, err
    writers = {
        'train --overwrite': ['train', *TINY, '--out', run, '--overwrite'],
        'train --resume': ['train', '--resume', '--out', run, '--no-progress'],
        'gate': ['gate', 'data', '--data', 'moons', '--out', run],
        'lr-find': ['lr-find', '--data', 'moons', '--out', run, '--range-steps', '5', '--no-progress'],
    }
    for name, args in writers.items():
        code, _, err = main_in_process(*args)
        assert code == 2 and one_line(err) and f'is being written by pid {first.pid} on ' in err, (name, err)
    code, _, err = main_in_process('train', *TINY, '--out', run)            # refused by a look, before the lock
    assert code == 2 and one_line(err) and 'already holds a run; pass --overwrite' in err, err
    assert first.poll() is None, 'the first run ended before every second writer had tried'
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-2000:]
    steps = [r['step'] for r in records(run)]
    assert steps == sorted(steps) and [r['kind'] for r in records(run)].count('final') == 1
    assert [r['step'] for r in records(run) if r['kind'] == 'train'] == [10, 20, 30, 40]

def test_sample_and_encode_refuse_a_directory_another_process_writes_and_take_it_once_it_is_gone(tiny_run, tmp_path):
    run, shards = copy_run(tiny_run, tmp_path / 'run'), tmp_path / 'shards'
    with lock_held(run, shards) as holder:
        code, _, err = main_in_process('sample', run, '--n', '100')
        assert code == 2 and one_line(err) and f'pid {holder.pid}' in err and 'the other writer' in err, err
        code, _, err = main_in_process('encode', '--vae', tmp_path / 'vae', '--data', tmp_path, '--out', shards)
        assert code == 2 and one_line(err) and f'{shards} is being written by pid {holder.pid}' in err, err
        code, _, err = main_in_process('sample', run, '--n', '100', '--out', tmp_path / 'elsewhere.png')
        assert code == 0, err                                             # written outside the run: no lock needed
    assert read_holder(run)['pid'] == holder.pid                           # killed: its lock went with it
    code, _, err = main_in_process('sample', run, '--n', '100')
    assert code == 0 and (run / 'samples' / 'grid_seed0.png').exists(), err
    assert read_holder(run)['pid'] == os.getpid()

@pytest.mark.parametrize('knob,what', [
    ('fail_checkpoint_at', 'could not write checkpoint step_000020 ('),
    ('fail_export_at', 'could not write the '),                         # best/ (if step 20 is a new best) or final/
    ('fail_record_at', 'could not write the record of step 20 ('),
])
def test_a_write_fault_is_one_line_exit_5_and_resume_ends_bit_identical(tiny_run, tmp_path, one_thread, knob, what):
    run = tmp_path / 'run'
    code, _, err = main_in_process('train', *TINY, '--out', run, faults={knob: 20})
    assert code == 5 and one_line(err) and err.startswith('rectiflow: write failed: ' + what), err
    assert 'No space left on device' in err and 'free there' in err
    assert temporaries(run) == [] and json.loads((run / 'run_info.json').read_text())['status'] == 'failed'
    ckpts = checkpoint_dirs(run)
    assert ckpts and ckpts[0].name == 'step_000010' and all(check_checkpoint(c, RESUME_PARTS) for c in ckpts)
    code, _, err = main_in_process('train', '--resume', '--out', run, '--no-progress')
    assert code == 0, err
    same_run(run, tiny_run)

def test_a_full_tmpfs_is_one_line_exit_5_and_resume_after_freeing_space_ends_bit_identical(tiny_run, tmp_path,
                                                                                            one_thread):
    disk = tmp_path / 'small'
    disk.mkdir()
    try: p = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=9m', 'tmpfs', str(disk)], capture_output=True, text=True)
    except OSError as e: pytest.skip(f'no mount command here ({e}); the injected faults test the same path')
    if p.returncode: pytest.skip(f'mounting a tmpfs is not allowed here ({p.stderr.strip()}); the injected faults '
                                 'test the same path')
    try:
        run = disk / 'run'                 # 9 MB: one checkpoint (5.6 MB) and the exports fit, the second does not
        code, _, err = main_in_process('train', *TINY, '--out', run, faults={'free_bytes': 1e9})
        assert code == 5 and one_line(err) and 'No space left on device' in err, err
        assert temporaries(run) == []
        ckpts = checkpoint_dirs(run)
        assert ckpts and all(check_checkpoint(c, RESUME_PARTS) for c in ckpts)
        subprocess.run(['mount', '-o', 'remount,size=64m', str(disk)], check=True)           # space freed
        code, _, err = main_in_process('train', '--resume', '--out', run, '--no-progress')
        assert code == 0, err
        same_run(run, tiny_run)
    finally: subprocess.run(['umount', '-l', str(disk)], capture_output=True)

def test_a_disk_too_small_for_the_run_is_refused_before_training(tmp_path):
    run = tmp_path / 'run'
    code, _, err = main_in_process('train', *TINY, '--out', run, faults={'free_bytes': 1e6})
    assert code == 2 and one_line(err) and 'Not enough disk space: this run needs about' in err, err
    assert '976.6 KB is free' in err and 'lower checkpoint.keep_last' in err
    assert not (run / 'metrics.jsonl').exists() and not (run / 'checkpoints').exists()

def test_the_records_and_the_heartbeat_carry_the_memory_figures(tiny_run):
    train = [r for r in records(tiny_run) if r['kind'] == 'train']
    assert train and all(r['host_free_mb'] > 0 and r['rss_mb'] > 0 for r in train)
    beat = json.loads((tiny_run / 'heartbeat.json').read_text())
    assert beat['rss_mb'] > 0 and beat['host_free_mb'] > 0
