"""Frame-weighted accumulation across processes (38_tasks.sequences): two ranks whose micro-batches hold different numbers of
target frames take, together, exactly the one-process optimizer step over the union of their items.

Run as a script (plain python for one process, torchrun for two) it takes that one step and saves the result."""
import os, sys, subprocess
from pathlib import Path
import numpy as np
import torch

BIN = Path(sys.executable).parent
sys.path.insert(0, str(Path(__file__).parents[1]))
from ranks import ranks_ended, workers_said

def micro_batches(lengths) -> list:
    "Per rank, two micro-batches of the sequences task's training items, every one with its own frame count."
    order = np.argsort(lengths, kind='stable').tolist()
    return [[order[:10], order[-1:]],            # rank 0: many short items, then one long one
            [order[100:104], order[-4:-1]]]      # rank 1: a few middling items, then three long ones

def take_step(out: Path, mode: str):
    "One optimizer step of the sequences task on frozen draws: `one` process over the union, or `two` ranks of two micro-batches."
    from rectiflow.config import ScheduleConfig
    from rectiflow.tasks.sequences import SequencesTask, FrozenSequenceDraws, ListBatches
    from rectiflow.run.trainer import Trainer
    cfg = SequencesTask.preset()
    cfg.task.n_train, cfg.task.n_val, cfg.optim.grad_clip = 200, 20, 1e6     # no clipping: Adam's moment is the gradient
    cfg.schedule, cfg.run.out = ScheduleConfig(kind='constant', warmup_steps=0), str(out / 'run')

    class FixedBatches(SequencesTask):
        def batch_sampler(self, ds, batch_size, seed, rank=0, world=1):
            assert world == len(per_rank), (world, len(per_rank))
            return ListBatches(per_rank[rank])

    task = FixedBatches(SequencesTask.validate(cfg))
    lengths = task.train_ds.lengths
    per_rank = micro_batches(lengths)
    if mode == 'one': per_rank = [[sum((b for r in per_rank for b in r), [])]]
    cfg.optim.grad_accum = len(per_rank[0])

    tr = Trainer(cfg, task, datasets=(FrozenSequenceDraws(task.train_ds), task.val_ds, task.info), progress=False)
    loss, _ = next(tr.optimizer_steps())
    acc = tr.accelerator
    frames = float(sum(lengths[b].sum() for b in per_rank[acc.process_index]))
    total = acc.reduce(torch.tensor([loss.item() * frames, frames]), 'sum')           # the step's loss over all its frames
    params = list(tr.unwrapped.parameters())
    if acc.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        torch.save({'world': acc.num_processes, 'loss': (total[0] / total[1]).item(),
                    'frames': [[int(lengths[b].sum()) for b in r] for r in per_rank],
                    'weights': [p.detach().clone() for p in params],
                    'moments': [tr.optimizer.state[p]['exp_avg'].clone() for p in params]}, out / 'result.pt')

def test_two_ranks_of_different_frame_counts_take_the_one_process_step_of_their_union(tmp_path):
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'MPLBACKEND': 'Agg'}
    one = subprocess.run([sys.executable, __file__, str(tmp_path / 'one'), 'one'], env=env, capture_output=True, text=True, timeout=600)
    assert one.returncode == 0, workers_said(one)
    two = subprocess.run([str(BIN / 'torchrun'), '--standalone', '--nproc_per_node', '2', __file__, str(tmp_path / 'two'), 'two'],
                         env=env, capture_output=True, text=True, timeout=600)
    assert two.returncode == 0, workers_said(two)
    a, b = torch.load(tmp_path / 'one' / 'result.pt'), torch.load(tmp_path / 'two' / 'result.pt')
    assert (a['world'], b['world']) == (1, 2)
    # the premise: four micro-batches of four different frame counts, the ranks holding unequal shares, and one batch of them all
    micro = [n for rank in b['frames'] for n in rank]
    assert len(set(micro)) == 4 and sum(b['frames'][0]) != sum(b['frames'][1]), b['frames']
    assert a['frames'] == [[sum(micro)]]
    assert abs(a['loss'] - b['loss']) < 1e-5 * abs(a['loss']), (a['loss'], b['loss'])
    # Adam's first moment after one step is (1 - beta1) x the gradient: the gradients agree to float error ...
    scale = max(m.abs().max().item() for m in a['moments'])
    for x, y in zip(a['moments'], b['moments']): assert torch.allclose(x, y, rtol=1e-4, atol=1e-6 * scale), (x - y).abs().max()
    # ... and so do the weights (Adam's first step is ~lr x sign(grad): summation-order noise in near-zero gradients shows at ~1e-6)
    for x, y in zip(a['weights'], b['weights']): assert torch.allclose(x, y, atol=1e-5), (x - y).abs().max()
    assert not (tmp_path / 'one' / 'run').exists() and not (tmp_path / 'two' / 'run').exists()    # one bare step writes no run

if __name__ == '__main__':
    with ranks_ended(): take_step(Path(sys.argv[1]), sys.argv[2])
