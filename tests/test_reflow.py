"""Reflow from the command line: a student trained on a short teacher run's couplings has straighter paths and a
better one-step sample; the coupling generation, killed, resumes at the first chunk missing."""
import json, os, signal, subprocess, sys, time
from pathlib import Path
import torch
from safetensors.torch import load_file
from conftest import run_cli

MOONS = ['--data', 'moons', '--no-progress', '--task.n_train', '4096', '--task.n_val', '256', '--data.batch_size', '256',
         '--run.log_every', '100', '--eval.every', '100', '--eval.sample_every', '300', '--eval.n_samples', '500']
REFLOW = ['--task', 'reflow', '--no-progress', '--data.batch_size', '256', '--run.log_every', '100', '--eval.every', '100',
          '--eval.sample_every', '300', '--eval.n_samples', '500']

def one_step_w2(run) -> float:
    p = run_cli('evaluate', run, '--nfe', '1', '--solvers', 'euler', '--json')
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)['rows'][0]['w2']

def test_reflow_straightens_a_short_teacher_run(tmp_path):
    teacher, student = tmp_path / 'teacher', tmp_path / 'reflow'
    p = run_cli('train', *MOONS, '--steps', '300', '--out', teacher)
    assert p.returncode == 0, p.stderr
    p = run_cli('train', *REFLOW, '--task.teacher', teacher, '--task.pairs', '8192', '--task.cache', tmp_path / 'cache',
                '--steps', '300', '--out', student)
    assert p.returncode == 0, p.stderr
    final = json.loads((student / 'run_info.json').read_text())['final']
    # the mean squared deviation of each model's own ODE path from the line between its ends, from the same noise
    assert final['straightness'] <= 0.7 * final['straightness_teacher'], final
    assert one_step_w2(student) < one_step_w2(teacher)

def chunks(cache: Path) -> dict:
    files = cache.rglob('chunk_*.safetensors')
    return {str(p.relative_to(cache)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in files}

def test_coupling_generation_resumes_after_a_kill_and_keeps_the_teachers_classes(tmp_path):
    teacher, cache = tmp_path / 'teacher', tmp_path / 'cache'
    p = run_cli('train', '--out', teacher, '--no-progress', '--steps', '20', '--run.log_every', '10', '--eval.every', '20',
                '--eval.sample_every', '20', '--eval.n_samples', '20')
    assert p.returncode == 0, p.stderr
    args = ['train', *REFLOW, '--task.teacher', str(teacher), '--task.pairs', '320', '--task.val_pairs', '64',
            '--task.chunk', '32', '--task.cache', str(cache), '--steps', '10', '--eval.n_samples', '20',
            '--data.batch_size', '32', '--out', str(tmp_path / 'reflow')]
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'MPLBACKEND': 'Agg'}
    proc = subprocess.Popen([sys.executable, '-m', 'rectiflow.cli', *args, '--task.delay', '1.0'], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while len(chunks(cache)) < 3 and time.time() < deadline and proc.poll() is None: time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = chunks(cache)
    assert 3 <= len(before) < 10, before                      # killed part-way through the training couplings
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    after = chunks(cache)
    assert len(after) == 10 + 2 and all(after[n] == before[n] for n in before)   # the chunks written stayed as they were
    labels = torch.cat([load_file(str(f))['cond'] for f in sorted(cache.rglob('chunk_*.safetensors'))])
    assert set(labels.tolist()) == set(range(10))             # the digits teacher's classes
    info = json.loads((tmp_path / 'reflow' / 'run_info.json').read_text())
    assert info['status'] == 'completed' and info['data']['n_classes'] == 10 and 'fd' in info['final']
