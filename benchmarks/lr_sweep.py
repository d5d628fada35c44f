"""Does the LR range test's suggestion land near the best LR of a grid sweep with the same step budget?

On the digits default: (1) the range test from --lo to --hi over --steps steps; (2) a constant-LR run of
--steps optimizer steps at each LR of --lrs, from the same initial weights, scored by the final
EMA-free validation loss (`Evaluation.validation_loss`: fixed items, fixed t and noise); the best LR is the
lowest; (3) for each heuristic, the ratio between its suggestion and the best LR, and whether it is within 3x.
Writes benchmarks/lr_sweep.json and prints a markdown table.  Usage: python benchmarks/lr_sweep.py [--seeds 0,1]
"""
import os
os.environ.setdefault('OMP_NUM_THREADS', '1')      # before torch is imported; the CPU is shared
import argparse, json, math, platform, tempfile, time
from pathlib import Path
import torch
from rectiflow.config import apply_overrides
from rectiflow.tasks.registry import preset
from rectiflow.api import task_trainer
from rectiflow.run.trainer import NonFiniteError
from rectiflow.tools.lr_find import lr_find

def sweep_run(lr: float, steps: int, warmup: int, seed: int) -> dict:
    "Train the digits default `steps` steps at constant `lr`; the final validation losses and the mean of the last 20% of training losses."
    cfg = apply_overrides(preset(), ['--optim.lr', str(lr), '--schedule.kind', 'constant', '--schedule.warmup_steps', str(warmup),
                                             '--schedule.min_lr', '0', '--run.seed', str(seed)])
    with tempfile.TemporaryDirectory() as d:
        cfg.run.out = d
        tr, losses, t0 = task_trainer(cfg), [], time.time()
        try:
            for _, (loss, _) in zip(range(steps), tr.optimizer_steps()): losses.append(loss.item())
            val = tr.evaluation.validation_loss()
            with tr.ema_weights() as m: val_ema = tr.evaluation.validation_loss(m)
        except NonFiniteError: val = val_ema = math.inf
        tail = losses[-max(1, steps // 5):]
        return {'lr': lr, 'seed': seed, 'val_loss': val, 'val_loss_ema': val_ema, 'train_tail': sum(tail) / len(tail),
                'seconds': round(time.time() - t0, 1)}

def ratio(a, b): return max(a / b, b / a) if a and b else math.inf

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--lo', type=float, default=1e-5); p.add_argument('--hi', type=float, default=1.0)
    p.add_argument('--steps', type=int, default=200, help='range-test steps, and the steps of each sweep run')
    p.add_argument('--lrs', default='1e-4,3e-4,1e-3,3e-3,1e-2,3e-2,1e-1')
    p.add_argument('--warmup', type=int, default=10, help='linear warmup steps of each sweep run')
    p.add_argument('--seeds', default='0', help='comma-separated run seeds (init, data order, draws)')
    p.add_argument('--out', default=str(Path(__file__).with_name('lr_sweep.json')))
    a = p.parse_args()
    lrs, seeds, t_all = [float(x) for x in a.lrs.split(',')], [int(s) for s in a.seeds.split(',')], time.time()
    out = {'settings': {**vars(a), 'data': 'digits', 'torch': torch.__version__, 'threads': torch.get_num_threads(),
                        'machine': platform.machine(), 'cpus': os.cpu_count()}, 'seeds': []}
    for seed in seeds:
        cfg = apply_overrides(preset(), ['--run.seed', str(seed)])
        t0 = time.time()
        res = lr_find(cfg, lo=a.lo, hi=a.hi, steps=a.steps, progress=False)
        rt = {**res.summary(), 'seconds': round(time.time() - t0, 1), 'steps_taken': len(res.lrs)}
        print(f"seed {seed}: range test {rt['seconds']}s: steepest {res.steepest:.3g}  valley {res.valley:.3g}  "
              f"diverged at {res.diverged_at}", flush=True)
        runs = []
        for lr in lrs:
            runs.append(sweep_run(lr, a.steps, a.warmup, seed))
            print(f"  lr {lr:.0e}: val {runs[-1]['val_loss']:.4f}  ({runs[-1]['seconds']}s)", flush=True)
        best = min(runs, key=lambda r: r['val_loss'])['lr']
        best_tail = min(runs, key=lambda r: r['train_tail'])['lr']
        verdict = {m: {'lr': getattr(res, m), 'ratio': ratio(getattr(res, m), best), 'within_3x': ratio(getattr(res, m), best) <= 3}
                   for m in ('valley', 'steepest')}
        out['seeds'].append({'seed': seed, 'range_test': rt, 'curve': {'lrs': res.lrs, 'losses': res.losses, 'smoothed': res.smoothed},
                             'sweep': runs, 'best_lr': best, 'best_lr_by_train_tail': best_tail, 'suggestions': verdict})
    out['total_seconds'] = round(time.time() - t_all, 1)
    Path(a.out).write_text(json.dumps(out, indent=1) + '\n')
    print(table(out))

def table(out) -> str:
    s = out['settings']
    lines = [f"Digits default, range test {s['lo']:g}..{s['hi']:g} over {s['steps']} steps; sweep: {s['steps']} steps per LR, constant "
             f"LR after {s['warmup']} warmup steps, scored by the final EMA-free validation loss. {s['threads']} thread(s); "
             f"total {out['total_seconds']:.0f}s.", '']
    for r in out['seeds']:
        rt = r['range_test']
        lines += [f"**seed {r['seed']}**: range test {rt['seconds']:.0f}s, {rt['steps_taken']} steps, diverged at "
                  f"{rt['diverged_at'] and format(rt['diverged_at'], '.2g')}", '',
                  '| LR | val loss | val loss (EMA) | train loss, last 20% | seconds |', '| --- | --- | --- | --- | --- |']
        lines += [f"| {x['lr']:.0e}{' **best**' if x['lr'] == r['best_lr'] else ''} | {x['val_loss']:.4f} | {x['val_loss_ema']:.4f} | "
                  f"{x['train_tail']:.4f} | {x['seconds']:.0f} |" for x in r['sweep']]
        lines += ['', '| heuristic | suggestion | ratio to best | within 3x |', '| --- | --- | --- | --- |']
        lines += [f"| {m}{' (default)' if m == rt['method'] else ''} | {v['lr']:.2g} | {v['ratio']:.2f} | {'yes' if v['within_3x'] else 'no'} |"
                  for m, v in r['suggestions'].items()]
        lines.append('')
    return '\n'.join(lines)

if __name__ == '__main__': main()
