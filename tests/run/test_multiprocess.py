"Launchers: accelerate launch and torchrun with two CPU processes (gloo, accelerate's MULTI_CPU), and two nodes on loopback."
import json, sys
from pathlib import Path
import pytest, torch
from conftest import run_cli, free_port, fault_env, TINY_MOONS, BIN, final_weights, records, cli_in_process
from ranks import workers_said
from rectiflow.run.schedules import warmup_cosine_lr

TORCHRUN = [str(BIN / 'torchrun'), '--standalone', '--nproc_per_node', '2']

def accelerate_launch() -> list[str]:
    "accelerate's --multi_gpu launcher (torchrun underneath): without CUDA the trainer runs it as MULTI_CPU (gloo)."
    return [str(BIN / 'accelerate'), 'launch', '--multi_gpu', '--num_processes', '2', '--num_machines', '1',
            '--mixed_precision', 'no', '--dynamo_backend', 'no', '--main_process_port', str(free_port())]

STEPS, WARMUP, LR, MIN_LR = 40, 10, 1e-3, 1e-4
SCHEDULE = ['--steps', STEPS, '--schedule.warmup_steps', WARMUP, '--schedule.min_lr', MIN_LR, '--optim.lr', LR]

def two_process_runs(root, *extra, launcher=None) -> tuple[Path, Path]:
    """A 40-step two-process run (through `launcher`, else torchrun), and the same run stopped at step 20 and resumed
    through torchrun: (whole, halves)."""
    whole, halves = root / 'whole', root / 'halves'
    for args, launch in (([*TINY_MOONS, *SCHEDULE, '--out', whole, *extra], launcher or TORCHRUN),
                         ([*TINY_MOONS, *SCHEDULE, '--max-steps', '20', '--out', halves, *extra], TORCHRUN),
                         (['--resume', '--out', halves, '--max-steps', '0', '--no-progress'], TORCHRUN)):
        p = run_cli('train', *args, launcher=launch)
        assert p.returncode == 0, p.stderr[-3000:]
    return whole, halves

def last_train_loss(run) -> float: return [r for r in records(run) if r['kind'] == 'train'][-1]['loss']

@pytest.fixture(scope='module')
def ddp_runs(tmp_path_factory):
    "The whole run through `accelerate launch`, the halves through torchrun: the two launchers, one run."
    return two_process_runs(tmp_path_factory.mktemp('ddp'), launcher=accelerate_launch())

def test_two_processes_share_one_schedule_and_one_log(ddp_runs):
    run = ddp_runs[0]
    info = json.loads((run / 'run_info.json').read_text())
    assert info['num_processes'] == 2 and info['status'] == 'completed'
    recs = records(run)
    assert [r['kind'] for r in recs].count('final') == 1          # rank 0 alone writes the log
    train = [r for r in recs if r['kind'] == 'train']
    assert [r['step'] for r in train] == [10, 20, 30, 40]
    # the LR after each optimizer step is the single-process schedule's: the horizon counts both processes
    for r in train:
        assert abs(r['lr'] - warmup_cosine_lr(r['step'], LR, WARMUP, STEPS, MIN_LR)) < 1e-12, r
    assert abs(train[-1]['lr'] - MIN_LR) < 1e-12

def test_a_two_process_run_resumes_bit_identically(ddp_runs):
    # each process draws from its own generator: the checkpoint keeps every process's, not rank 0's for all
    whole, halves = ddp_runs
    a, b = final_weights(whole), final_weights(halves)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert last_train_loss(whole) == last_train_loss(halves)

def test_resume_with_another_process_count_is_refused(ddp_runs):
    p = cli_in_process('train', '--resume', '--out', ddp_runs[0], '--no-progress')        # one process, of two
    assert p.returncode == 2
    assert 'rectiflow: error: Cannot resume: the checkpoint was written by 2 process(es), this run has 1' in p.stderr

def test_fsdp_shards_the_model_trains_as_ddp_exports_whole_and_resumes_bit_identically(ddp_runs, tmp_path):
    whole, halves = two_process_runs(tmp_path, '--run.fsdp', 'true')
    info = json.loads((whole / 'run_info.json').read_text())
    # each process really holds about half of every tensor (torch's fully_shard, not accelerate's DDP fallback)
    assert info['status'] == 'completed' and 0.45 < info['sharding']['local_fraction'] < 0.55, info['sharding']
    assert info['sharding']['params'] == info['n_params']
    # the export and the checkpoint are whole tensors: the same names and shapes as the DDP run's, and its values
    # up to the order of the gradient reductions
    fsdp, ddp = final_weights(whole), final_weights(ddp_runs[0])
    assert sorted(fsdp) == sorted(ddp)
    for k in ddp: assert torch.allclose(fsdp[k], ddp[k], atol=1e-6), k
    assert abs(last_train_loss(whole) - last_train_loss(ddp_runs[0])) < 1e-5
    resumed = final_weights(halves)
    assert all(torch.equal(fsdp[k], resumed[k]) for k in fsdp)
    p = cli_in_process('evaluate', whole / 'checkpoints' / 'step_000040')     # one process reads the gathered files
    assert p.returncode == 0, p.stderr

# the mean-velocity objective differentiates through the wrapped model in forward mode: its gradients are shared too
def test_two_processes_of_half_batches_equal_one_process_of_the_full_batch(tmp_path):
    import subprocess, os, torch
    script = str(Path(__file__).parent / 'ddp_step.py')
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    one, two = tmp_path / 'one', tmp_path / 'two'
    objectives = ['flow_matching', 'meanflow']          # each in turn in the same processes: one launch of each
    subprocess.run([sys.executable, script, str(one), '128', *objectives], check=True, env=env, capture_output=True)
    p = subprocess.run([str(BIN / 'torchrun'), '--standalone', '--nproc_per_node', '2', script, str(two), '64',
                        *objectives], env=env, capture_output=True, text=True)
    assert p.returncode == 0, workers_said(p)
    for objective in objectives:
        a, b = torch.load(one / f'{objective}.pt'), torch.load(two / f'{objective}.pt')
        assert (a['world'], b['world']) == (1, 2)
        assert abs(a['loss'] - b['loss']) < 1e-5, (objective, a['loss'], b['loss'])
        # Adam's first step is ~lr * sign(grad): summation-order noise in near-zero gradients shows at ~1e-6
        for x, y in zip(a['weights'], b['weights']): assert torch.allclose(x, y, atol=1e-5), objective
    assert not (one / 'run').exists() and not (two / 'run').exists()     # a single step writes no run

@pytest.mark.slow     # two launchers of one process each: the two-process runs above cover the rest
def test_two_nodes_on_loopback(tmp_path):
    import subprocess, os
    port = free_port()
    run = tmp_path / 'run'
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'MPLBACKEND': 'Agg'}
    cmd = lambda rank: [str(BIN / 'torchrun'), '--nnodes', '2', '--nproc_per_node', '1', '--node_rank', str(rank),
                        '--master_addr', '127.0.0.1', '--master_port', str(port), '-m', 'rectiflow.cli', 'train',
                        *map(str, TINY_MOONS), '--steps', '20', '--out', str(run)]
    nodes = [subprocess.Popen(cmd(r), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [n.communicate(timeout=600) for n in nodes]
    assert all(n.returncode == 0 for n in nodes), [o[1][-2000:] for o in outs]
    info = json.loads((run / 'run_info.json').read_text())
    assert info['num_processes'] == 2 and info['status'] == 'completed'
    assert 'W2' in outs[0][0] and 'W2' not in outs[1][0]                    # only global rank 0 reports

def test_a_nan_on_one_process_stops_both_with_exit_3(tmp_path):
    # rank 1 alone sees a NaN loss at step 15: the all-reduced gradients carry it to rank 0, and both stop together
    run = tmp_path / 'run'
    p = run_cli('train', *TINY_MOONS, '--steps', '40', '--out', run, env=fault_env(nan_at_step=15, nan_rank=1),
                launcher=[str(BIN / 'torchrun'), '--standalone', '--nproc_per_node', '2'], timeout=300)
    assert p.returncode != 0 and p.stderr.count('rectiflow: training stopped: Non-finite gradient norm at step 14') == 2, p.stderr[-3000:]
    info = json.loads((run / 'run_info.json').read_text())
    assert info['status'] == 'failed' and 'NonFiniteError' in info['reason']
    assert (run / 'checkpoints' / 'step_000010').is_dir()

RANKS_AND_THE_LOCK = '''
import os, sys, torch
from rectiflow.config import ConfigError
from rectiflow.processes import processes
from rectiflow.store.rundir import acquire, release, run_lock
def say(line): os.write(1, (line + '\\n').encode())    # one write per line: the two ranks share the pipe
free, held = sys.argv[1:3]
rank = processes().process_index
with run_lock(free):
    try:
        release(acquire(free))
        say(f'rank {rank}: the lock is mine')
    except ConfigError:
        say(f'rank {rank}: the lock is another process')
    processes().wait_for_everyone()
try:
    with run_lock(held): say(f'rank {rank}: took a held lock')
except ConfigError as e: say(f'rank {rank}: refused: {e}')
torch.distributed.barrier()                 # every rank done with its pairs before any tears them down
torch.distributed.destroy_process_group()
'''

def test_two_processes_hold_one_lock_on_rank_0_and_both_hear_a_refusal(tmp_path):
    import subprocess, os
    from conftest import lock_held
    script, free, held = tmp_path / 'ranks.py', tmp_path / 'free', tmp_path / 'held'
    script.write_text(RANKS_AND_THE_LOCK)
    with lock_held(held) as holder:
        p = subprocess.run([str(BIN / 'torchrun'), '--nproc_per_node', '2', '--master_port', str(free_port()), str(script),
                            str(free), str(held)], capture_output=True, text=True, timeout=300,
                           env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert p.returncode == 0, p.stderr[-3000:]
    owners = sorted(l for l in p.stdout.splitlines() if 'the lock is' in l)
    assert owners == ['rank 0: the lock is mine', 'rank 1: the lock is another process'], p.stdout   # one holder: rank 0
    refused = sorted(l for l in p.stdout.splitlines() if 'the lock is' not in l)
    assert [l.split(':')[0] for l in refused] == ['rank 0', 'rank 1'], p.stdout                       # no rank hangs
    assert all(f'refused: {held} is being written by pid {holder.pid}' in l for l in refused), p.stdout
