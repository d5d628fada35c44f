"Launchers: accelerate launch (one process) and torchrun (two processes, gloo, accelerate's MULTI_CPU)."
import json, sys
from pathlib import Path
from conftest import run_cli, TINY_MOONS, BIN
from rectiflow.train import warmup_cosine_lr

def test_accelerate_launch_runs_the_cli(tmp_path):
    p = run_cli('train', *TINY_MOONS, '--steps', '20', '--out', tmp_path / 'run',
                launcher=[str(BIN / 'accelerate'), 'launch', '--cpu', '--num_processes', '1', '--num_machines', '1',
                          '--mixed_precision', 'no', '--dynamo_backend', 'no'])
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / 'run' / 'run_info.json').read_text())['status'] == 'completed'

def test_two_processes_share_one_schedule_and_one_log(tmp_path):
    run = tmp_path / 'run'
    steps, warmup, lr, min_lr = 40, 10, 1e-3, 1e-4
    p = run_cli('train', *TINY_MOONS, '--steps', steps, '--out', run, '--schedule.warmup_steps', warmup,
                '--schedule.min_lr', min_lr, '--optim.lr', lr,
                launcher=[str(BIN / 'torchrun'), '--standalone', '--nproc_per_node', '2'])
    assert p.returncode == 0, p.stderr
    info = json.loads((run / 'run_info.json').read_text())
    assert info['num_processes'] == 2 and info['status'] == 'completed'
    recs = [json.loads(l) for l in (run / 'metrics.jsonl').read_text().splitlines()]
    assert [r['kind'] for r in recs].count('final') == 1          # rank 0 alone writes the log
    train = [r for r in recs if r['kind'] == 'train']
    assert [r['step'] for r in train] == [10, 20, 30, 40]
    # the LR after each optimizer step is the single-process schedule's: the horizon counts both processes
    for r in train:
        assert abs(r['lr'] - warmup_cosine_lr(r['step'], lr, warmup, steps, min_lr)) < 1e-12, r
    assert abs(train[-1]['lr'] - min_lr) < 1e-12
