"""Faults outside the training loop: a full disk or a read-only file system under every command that writes, and
Ctrl-C: one line, the command's exit code (5, 130), the file it would have replaced intact, nothing half-written."""
import json, shutil, signal, subprocess, time
from pathlib import Path
import pytest
from conftest import run_cli, start_cli, copy_run, one_line, TINY_MOONS

CONFIG = [a for a in TINY_MOONS if a != '--no-progress']      # gate takes no progress flag

def _mount(where: Path, *options: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    return subprocess.run(['mount', '-t', 'tmpfs', '-o', ','.join(options), 'tmpfs', str(where)],
                          capture_output=True).returncode == 0

@pytest.fixture
def disk(tmp_path):
    "A small file system of its own (a tmpfs: mounting one needs root, as CI has), unmounted after the test."
    where = tmp_path / 'disk'
    if not _mount(where, 'size=16m'): pytest.skip('mounting a small file system needs root')
    yield where
    subprocess.run(['umount', '-l', str(where)], capture_output=True)

def fill(disk: Path):
    "Take every free byte of `disk` (a file of its own), so the next write fails with ENOSPC."
    with open(disk / 'filler', 'wb') as f:
        try:
            while True: f.write(bytes(1 << 16))
        except OSError: pass
        try: f.flush()
        except OSError: pass

def leftovers(folder: Path) -> list[str]:
    "Temporary or empty files under `folder`: what a failed write must not leave."
    return sorted(str(p.relative_to(folder)) for p in folder.rglob('*')
                  if p.is_file() and p.name not in ('filler', '.lock') and (p.name.endswith('.tmp') or p.stat().st_size == 0
                                                                          or p.name.startswith('.tmp_')))

def assert_write_failed(p, disk):
    assert p.returncode == 5, (p.returncode, p.stderr[-3000:])
    last = p.stderr.strip().splitlines()[-1]               # after a progress bar, if it had one
    assert last.startswith('rectiflow: write failed: could not write ') and 'Traceback' not in p.stderr, p.stderr
    assert 'No space left on device' in p.stderr or 'Read-only file system' in p.stderr, p.stderr
    assert leftovers(disk) == []

@pytest.fixture
def run_on_disk(disk, tiny_run):
    "A finished tiny run on the small disk, with a sample grid of its own already there."
    run = copy_run(tiny_run, disk / 'run')
    assert run_cli('sample', run, '--n', '20').returncode == 0
    return run

def test_sample_on_a_full_disk_keeps_the_grid_it_would_replace(disk, run_on_disk):
    grid = run_on_disk / 'samples' / 'grid_seed0.png'
    before = grid.read_bytes()
    fill(disk)
    assert_write_failed(run_cli('sample', run_on_disk, '--n', '20'), disk)
    assert grid.read_bytes() == before
    assert_write_failed(run_cli('sample', run_on_disk, '--n', '20', '--out', disk / 'figs' / 'grid.png'), disk)

def test_export_and_evaluate_on_a_full_disk_are_one_line_exit_5(disk, run_on_disk):
    fill(disk)
    assert_write_failed(run_cli('export', run_on_disk, disk / 'hub'), disk)
    assert not (disk / 'hub').exists() or not any((disk / 'hub').iterdir())
    assert_write_failed(run_cli('evaluate', run_on_disk, '--nfe', '1,2', '--solvers', 'euler'), disk)
    assert not (run_on_disk / 'nfe_sweep.json').exists()

def test_gate_and_lr_find_on_a_full_disk_keep_their_earlier_records(disk):
    out = disk / 'gates-run'
    p = run_cli('gate', 'data', *CONFIG, '--out', out)
    assert p.returncode == 0, p.stderr
    gates = (out / 'gates.jsonl').read_bytes()
    p = run_cli('lr-find', *TINY_MOONS, '--out', out, '--range-steps', '10')
    assert p.returncode in (0, 1), p.stderr
    ramp = (out / 'lr_find.jsonl').read_bytes()
    fill(disk)
    assert_write_failed(run_cli('gate', 'data', *CONFIG, '--out', out), disk)
    assert (out / 'gates.jsonl').read_bytes() == gates
    assert_write_failed(run_cli('lr-find', *TINY_MOONS, '--out', out, '--range-steps', '10'), disk)
    assert (out / 'lr_find.jsonl').read_bytes() == ramp

def test_a_read_only_file_system_is_a_write_failure(tmp_path, tiny_run):
    disk = tmp_path / 'ro'
    if not _mount(disk, 'size=16m'): pytest.skip('mounting a small file system needs root')
    try:
        run = copy_run(tiny_run, disk / 'run')
        assert subprocess.run(['mount', '-o', 'remount,ro', str(disk)]).returncode == 0
        for args in (['sample', run, '--n', '20'], ['train', *TINY_MOONS, '--steps', '20', '--out', disk / 'new']):
            p = run_cli(*args)
            assert p.returncode == 5 and one_line(p.stderr) and 'Read-only file system' in p.stderr, (args, p.stderr)
    finally: subprocess.run(['umount', '-l', str(disk)], capture_output=True)

def _interrupt(proc, ready, seconds=300):
    "Send SIGINT (Ctrl-C) to `proc` once `ready()` holds; its stderr."
    deadline = time.time() + seconds
    while not ready():
        assert proc.poll() is None and time.time() < deadline, 'it ended before it could be interrupted'
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    return proc.stderr.read()

def test_ctrl_c_outside_the_loop_is_one_line_exit_130_and_tears_nothing(tmp_path):
    out = tmp_path / 'run'
    out.mkdir()
    (out / 'lr_find.jsonl').write_text('{"the": "last test"}\n')
    proc = start_cli('lr-find', *TINY_MOONS, '--out', out, '--range-steps', '100000', '--hi', '1e-3')
    err = _interrupt(proc, lambda: (out / '.lr_find.jsonl.tmp').exists() and (out / '.lr_find.jsonl.tmp').stat().st_size)
    assert proc.returncode == 130 and err.strip() == 'rectiflow: interrupted', (proc.returncode, err[-2000:])
    assert (out / 'lr_find.jsonl').read_text() == '{"the": "last test"}\n'
    assert sorted(p.name for p in out.iterdir()) == ['.lock', '.lock_holder.json', 'lr_find.jsonl']
    gates = tmp_path / 'gates'
    proc = start_cli('gate', 'overfit', *CONFIG, '--out', gates, '--steps', '100000')
    err = _interrupt(proc, lambda: (gates / '.lock_holder.json').exists())
    assert proc.returncode == 130 and err.strip() == 'rectiflow: interrupted', (proc.returncode, err[-2000:])
    assert not (gates / 'gates.jsonl').exists()

def test_a_bug_is_its_traceback_and_exit_70_never_a_gates_exit_1(tmp_path):
    (tmp_path / 'buggy.py').write_text(
        'from rectiflow import Callback\n'
        'class Buggy(Callback):\n'
        '    def on_fit_start(self, tr): raise RuntimeError("a bug in my callback")\n')
    p = run_cli('train', *TINY_MOONS, '--steps', '20', '--out', tmp_path / 'run', '--callbacks', 'buggy:Buggy',
                cwd=tmp_path)
    assert p.returncode == 70, (p.returncode, p.stderr[-2000:])
    assert 'Traceback' in p.stderr and 'RuntimeError: a bug in my callback' in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith('rectiflow: internal error (RuntimeError)')
