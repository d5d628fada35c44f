"""Overhead of rectiflow's trainer step over a bare PyTorch loop doing the same work.

Two cases. `digits`: the digits default's UNet, where the model's compute dominates a step. `tiny`: a 2-D MLP of width
64 on moons, batch 256, where the fixed per-step costs (the loader, accelerate's accumulation context, the host sync of
the non-finite check, the EMA's foreach update, the scheduler) are what a step is made of.

Each loop trains the case's model from the same initialisation with the same batch size. The `bare` loop does the same
work as the trainer (AdamW, the LR schedule, gradient clipping, diffusers' `EMAModel` with foreach) with its batches
indexed straight out of the training tensors and t, noise and the condition dropout drawn from its own generator. The
`plain` loop (tiny case only) is a torchcfm-style loop: AdamW and the loss, no EMA, schedule or clipping. The trainer
runs `Trainer.optimizer_steps()`. All loops run in this one process, alternating blocks of steps, so a slower moment
of the machine hits them alike; the figure is the median over block pairs of the ratio of their per-step times (the
machine's own noise, +-10% between blocks here, is why the quartiles are reported beside it).

    python benchmarks/overhead.py [--case digits|tiny] [--blocks 30] [--steps 10] [--json out.json]
"""
import argparse, json, statistics, tempfile, time
import torch
import torch.nn.functional as F
from diffusers.training_utils import EMAModel
from rectiflow.config import apply_overrides
from rectiflow.flow.objective import sample_t, interpolate, target_velocity
from rectiflow.run.schedules import schedule_lr
from rectiflow.tasks.registry import preset, make_task
from rectiflow.run.trainer import Trainer

CASES = {'digits': {'data': None, 'overrides': [], 'blocks': 30, 'steps': 10},
         'tiny': {'data': 'moons', 'overrides': ['--task.channels', '64', '--data.batch_size', '256', '--run.steps', '5000'],
                  'blocks': 25, 'steps': 200}}


def case_config(case: str):
    "The config and task of a benchmark case."
    c = CASES[case]
    cfg = apply_overrides(preset(data=c['data']), c['overrides'])
    return cfg, make_task(cfg)


def bare_loop(cfg, task, same_work: bool = True):
    "A step function of a plain PyTorch training loop: with the trainer's EMA, schedule and clipping (`same_work`), or without."
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
        idx = state['perm'][state['i']:state['i'] + bs]
        state['i'] += bs
        x1 = x[idx]
        t = sample_t(cfg.task, bs, gen)
        x0 = torch.randn(x1.shape, generator=gen)
        drop = torch.rand(bs, generator=gen) < cfg.task.cond_dropout
        c = None if cond is None else model.drop_cond(cond[idx], drop)
        v = model(interpolate(x0, x1, t), t, c)
        loss = F.mse_loss(v.float(), target_velocity(x0, x1))
        loss.backward()
        if same_work: torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
        opt.step()
        if same_work: sched.step()
        opt.zero_grad(set_to_none=True)
        if same_work: ema.step(model.parameters())
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


def quartiles(xs) -> list:
    xs = sorted(xs)
    return [xs[len(xs) // 4], xs[(3 * len(xs)) // 4]]


def measure(blocks: int | None = None, steps: int | None = None, warmup: int = 10, case: str = 'digits') -> dict:
    "Median ms/step of each loop of `case` over alternating blocks, and the trainer's ratio to the bare loop (and to the plain one)."
    blocks, steps = blocks or CASES[case]['blocks'], steps or CASES[case]['steps']
    cfg, task = case_config(case)
    with tempfile.TemporaryDirectory() as d:
        loops = {'trainer': trainer_loop(cfg, task, f'{d}/run'), 'bare': bare_loop(cfg, task)}
        if case == 'tiny': loops['plain'] = bare_loop(cfg, task, same_work=False)
        for step in loops.values(): time_block(step, warmup)
        times = {k: [] for k in loops}
        for b in range(blocks):
            order = list(loops) if b % 2 == 0 else list(loops)[::-1]     # alternate who goes first
            for k in order: times[k].append(time_block(loops[k], steps))
    med = {k: statistics.median(v) for k, v in times.items()}
    pairs = sorted(a / b for a, b in zip(times['trainer'], times['bare']))      # each block against its neighbour in time
    r = {'case': case, 'trainer_ms': med['trainer'] * 1e3, 'bare_ms': med['bare'] * 1e3, 'ratio': statistics.median(pairs),
         'ratio_quartiles': quartiles(pairs), 'blocks': blocks, 'steps_per_block': steps, 'batch_size': cfg.data.batch_size,
         'threads': torch.get_num_threads(), 'spread': {k: [min(v) * 1e3, max(v) * 1e3] for k, v in times.items()}}
    if 'plain' in med:
        plain_pairs = [a / b for a, b in zip(times['trainer'], times['plain'])]
        r.update(plain_ms=med['plain'] * 1e3, ratio_plain=statistics.median(plain_pairs), ratio_plain_quartiles=quartiles(plain_pairs))
    print(f"overhead ({case}): trainer {r['trainer_ms']:.3f} ms/step, bare PyTorch {r['bare_ms']:.3f} ms/step, ratio {r['ratio']:.3f} "
          f"(quartiles {r['ratio_quartiles'][0]:.3f}-{r['ratio_quartiles'][1]:.3f})"
          + (f"; plain loop {r['plain_ms']:.3f} ms/step, ratio {r['ratio_plain']:.3f}" if 'plain' in med else '')
          + f"; median of {blocks} alternating block pairs of {steps} steps, batch {cfg.data.batch_size}, {r['threads']} threads",
          flush=True)
    return r


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--case', choices=list(CASES), default='digits')
    ap.add_argument('--blocks', type=int)
    ap.add_argument('--steps', type=int)
    ap.add_argument('--json')
    a = ap.parse_args()
    r = measure(a.blocks, a.steps, case=a.case)
    if a.json: open(a.json, 'w').write(json.dumps(r, indent=1) + '\n')
