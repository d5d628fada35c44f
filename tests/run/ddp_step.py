"""One optimizer step on frozen draws for each objective named, for test_multiprocess: run under torchrun (N processes)
or plain python (1). Arguments: the output folder, the batch size, then the objectives (task.objective values)."""
import os, sys, torch
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parents[1]))
from ranks import ranks_ended
from rectiflow.config import apply_overrides
from rectiflow.tasks.registry import preset, make_task
from rectiflow.run.trainer import Trainer, FrozenDraws

out, batch = sys.argv[1], int(sys.argv[2])
def one_step_each(objectives):
    "One step of each objective in turn, in these processes; rank 0 saves each one's loss and weights."
    for objective in objectives:
        cfg = apply_overrides(preset(data='moons'), ['--run.out', f'{out}/run', '--run.steps', '1', '--task.n_train', '1024',
                                                     '--task.n_val', '64', '--data.batch_size', str(batch),
                                                     '--schedule.warmup_steps', '0', '--task.objective', objective])
        task = make_task(cfg)
        tr = Trainer(cfg, task, datasets=(FrozenDraws(task.train_ds), task.val_ds, task.info), progress=False)
        loss, _ = tr.micro_step(next(tr.batches()))
        mean = tr.accelerator.reduce(loss.reshape(1), 'mean')
        if tr.is_main:
            os.makedirs(out, exist_ok=True)
            torch.save({'loss': mean.item(), 'world': tr.accelerator.num_processes,
                        'weights': [p.detach().clone() for p in tr.unwrapped.parameters()]}, f'{out}/{objective}.pt')

with ranks_ended(): one_step_each(sys.argv[3:])
