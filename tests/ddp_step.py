"One optimizer step on frozen draws, for test_multiprocess: run under torchrun (N processes) or plain python (1)."
import os, sys, torch
from rectiflow.config import preset, apply_overrides
from rectiflow.data import make_datasets
from rectiflow.train import Trainer, FrozenDraws

out, batch = sys.argv[1], int(sys.argv[2])
cfg = apply_overrides(preset('moons'), ['--run.out', f'{out}/run', '--run.steps', '1', '--data.n_train', '1024',
                                        '--data.n_val', '64', '--data.batch_size', str(batch), '--schedule.warmup_steps', '0'])
train_ds, val_ds, info = make_datasets(cfg.data)
tr = Trainer(cfg, datasets=(FrozenDraws(train_ds), val_ds, info), progress=False)
loss, _ = tr._micro_step(next(tr._batches()))
mean = tr.accelerator.reduce(loss.reshape(1), 'mean')
if tr.is_main:
    os.makedirs(out, exist_ok=True)
    torch.save({'loss': mean.item(), 'world': tr.accelerator.num_processes,
                'weights': [p.detach().clone() for p in tr.unwrapped.parameters()]}, f'{out}/result.pt')
