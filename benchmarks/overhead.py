"""Overhead of rectiflow's trainer step over a bare PyTorch loop doing the same work.

Both loops train the digits default's model from the same initialisation with the same batch size,
AdamW settings, LR schedule, gradient clipping and EMA (diffusers' `EMAModel`, foreach). The bare
loop indexes its batches straight out of the training tensors and draws t, noise and the condition
dropout from its own generator; the trainer runs `Trainer.optimizer_steps()`: its data loader and
batch sampler, accelerate's accumulation context, the weighted loss share, the non-finite checks,
the scheduler and the EMA. Both run in this one process, alternating blocks of steps, so a slower
moment of the machine hits both alike; the figure is the median over block pairs of the ratio of their per-step times (the machine's own
noise, +-10% between blocks here, is why the quartiles are reported beside it).

    python benchmarks/overhead.py [--blocks 12] [--steps 20] [--json out.json]
"""
import argparse, json, statistics, tempfile, time
import torch
import torch.nn.functional as F
from diffusers.training_utils import EMAModel
from rectiflow.losses import sample_t, interpolate, target_velocity
from rectiflow.schedules import schedule_lr
from rectiflow.tasks import preset, make_task
from rectiflow.train import Trainer


def bare_loop(cfg, task):
    "A step function of a plain PyTorch training loop with the trainer's model, optimizer, schedule and EMA."
    torch.manual_seed(cfg.run.seed)
    model, train_ds = task.make_model(), task.train_ds
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr, betas=(cfg.optim.beta1, cfg.optim.beta2),
                            weight_decay=cfg.optim.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: schedule_lr(s, cfg.schedule, cfg.optim.lr, cfg.run.steps) / cfg.optim.lr)
    ema = EMAModel(model.parameters(), decay=cfg.ema.decay, use_ema_warmup=cfg.ema.warmup,
                   inv_gamma=cfg.ema.inv_gamma, power=cfg.ema.power, foreach=True)
    x, cond, bs = train_ds.x1, train_ds.cond, cfg.data.batch_size
    gen, state = torch.Generator().manual_seed(1), {'perm': torch.randperm(len(x)), 'i': 0}

    def step():
        if state['i'] + bs > len(x): state['perm'], state['i'] = torch.randperm(len(x)), 0
        idx = state['perm'][state['i']:state['i'] + bs]; state['i'] += bs
        x1, c = x[idx], cond[idx]
        t = sample_t(cfg.task, bs, gen)
        x0 = torch.randn(x1.shape, generator=gen)
        drop = torch.rand(bs, generator=gen) < cfg.task.cond_dropout
        v = model(interpolate(x0, x1, t), t, model.drop_cond(c, drop))
        loss = F.mse_loss(v.float(), target_velocity(x0, x1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
        opt.step(); sched.step(); opt.zero_grad(set_to_none=True)
        ema.step(model.parameters())
        return loss.detach()
    return step


def trainer_loop(cfg, task, out):
    "A step function that advances a `Trainer` by one optimizer step."
    cfg.run.out = out
    tr = Trainer(cfg, task, progress=False)
    steps = tr.optimizer_steps()
    return lambda: next(steps)[0]


def time_block(step, n: int) -> float:
    "Seconds per step over `n` steps."
    t0 = time.perf_counter()
    for _ in range(n): step()
    return (time.perf_counter() - t0) / n


def measure(blocks: int = 30, steps: int = 10, warmup: int = 10) -> dict:
    cfg = preset()
    task = make_task(cfg)
    with tempfile.TemporaryDirectory() as d:
        loops = {'trainer': trainer_loop(cfg, task, f'{d}/run'), 'bare': bare_loop(cfg, task)}
        for step in loops.values(): time_block(step, warmup)
        times = {k: [] for k in loops}
        for b in range(blocks):
            order = list(loops) if b % 2 == 0 else list(loops)[::-1]     # alternate who goes first
            for k in order: times[k].append(time_block(loops[k], steps))
    med = {k: statistics.median(v) for k, v in times.items()}
    pairs = sorted(a / b for a, b in zip(times['trainer'], times['bare']))      # each block against its neighbour in time
    r = {'trainer_ms': med['trainer'] * 1e3, 'bare_ms': med['bare'] * 1e3, 'ratio': statistics.median(pairs),
         'ratio_quartiles': [pairs[len(pairs) // 4], pairs[(3 * len(pairs)) // 4]],
         'blocks': blocks, 'steps_per_block': steps, 'batch_size': cfg.data.batch_size, 'threads': torch.get_num_threads(),
         'spread': {k: [min(v) * 1e3, max(v) * 1e3] for k, v in times.items()}}
    print(f"overhead: trainer {r['trainer_ms']:.2f} ms/step, bare PyTorch {r['bare_ms']:.2f} ms/step, ratio {r['ratio']:.3f} "
          f"(quartiles {r['ratio_quartiles'][0]:.3f}-{r['ratio_quartiles'][1]:.3f}; median of {blocks} alternating block pairs of {steps} steps, batch {cfg.data.batch_size}, {r['threads']} threads)", flush=True)
    return r


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--blocks', type=int, default=30)
    ap.add_argument('--steps', type=int, default=10)
    ap.add_argument('--json')
    a = ap.parse_args()
    r = measure(a.blocks, a.steps)
    if a.json: open(a.json, 'w').write(json.dumps(r, indent=1) + '\n')
