"""Representation alignment (REPA) on the digits default: does aligning the UNet's down path with a frozen encoder's
features speed up convergence, and what does it cost per step?

For each seed, a small ConvNeXt is trained as a digit classifier on that seed's digits training split only (never the
reference classifier the quality figures use, which would leak into them; never the validation digits) and saved
with `save_pretrained`; then the digits default trains with and without `--repa.encoder` for the same steps and
seed, both scored (EMA weights, 1000 samples) at every kept checkpoint and at the end.

    python benchmarks/repa.py             # 3 seeds x 800 steps: about 20 minutes on 2 idle cores
    python benchmarks/repa.py --smoke     # a minute: 1 seed, 20 steps, 100 samples (checks the script, no figures)

Writes benchmarks/repa.json (the smoke run: runs/bench/repa-smoke/repa.json): the encoders' validation accuracy and
training time, each run's quality curve and training seconds, and per step the mean and std over the seeds.
Run it alone on the machine: the seconds are wall-clock.
"""
import argparse, json, os, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
RUNS = HERE.parent / 'runs' / 'bench'
KEYS = ['accuracy', 'fd', 'fd_floor', 'fd_ratio']

def train_encoder(seed: int, folder: Path, epochs: int, width: int = 64, depth: int = 3) -> dict:
    """A small ConvNeXt (one stage on 2x2 patches: a 4x4 grid of `width` channels, as the UNet's down path) trained as
    a digit classifier on split `seed`'s training digits, shifted by a pixel at random; its encoder saved."""
    import torch
    from transformers import ConvNextConfig, ConvNextForImageClassification
    from rectiflow.data.embedded import digits_split
    from rectiflow.eval.metrics import shift_digits
    t0 = time.time()
    split = digits_split(seed)
    (x, y), (xv, yv) = split['train'], split['val']
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    config = ConvNextConfig(num_channels=1, patch_size=2, num_stages=1, hidden_sizes=[width], depths=[depth],
                            num_labels=10, layer_scale_init_value=1.0)
    clf = ConvNextForImageClassification(config)
    opt = torch.optim.AdamW(clf.parameters(), lr=2e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=epochs * -(-len(x) // 64))
    clf.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(x), generator=g).split(64):
            loss = clf(pixel_values=shift_digits(x[idx], g), labels=y[idx]).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    clf.eval()
    with torch.no_grad(): acc = (clf(pixel_values=xv).logits.argmax(1) == yv).float().mean().item()
    clf.convnext.save_pretrained(folder)        # the encoder alone: AutoModel loads it as a ConvNextModel
    return {'kind': 'ConvNeXt classifier', 'val_accuracy': acc, 'seconds': round(time.time() - t0, 1),
            'epochs': epochs, 'width': width, 'depth': depth, 'train_items': len(x)}

def train_run(out: Path, seed: int, steps: int, every: int, extra: list, smoke: bool) -> dict:
    "The digits default through the CLI (checkpoints every `every` steps, all kept); its final record."
    cmd = [sys.executable, '-m', 'rectiflow.cli', 'train', '--out', str(out), '--overwrite', '--no-progress',
           '--run.seed', str(seed), '--run.steps', str(steps), '--checkpoint.save_every', str(every),
           '--checkpoint.keep_last', '50', *extra]
    if smoke: cmd += ['--eval.every', str(every), '--eval.sample_every', str(steps), '--run.log_every', '5',
                      '--eval.n_samples', '100']
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, 'MPLBACKEND': 'Agg'})
    if p.returncode: sys.exit(f"{' '.join(cmd)}\n{p.stderr[-3000:]}")
    recs = [json.loads(l) for l in (out / 'metrics.jsonl').read_text().splitlines()]
    return {'out': str(out), 'final': next(r for r in reversed(recs) if r['kind'] == 'final'), 'records': recs}

def summary(runs: dict, seeds: list) -> dict:
    "Per step, mean and std over the seeds of each figure and of the training seconds, for both arms; and the ratios."
    from perf import mean_std
    rows = {}
    for arm, by_seed in runs.items():
        curves = [by_seed[str(s)]['curve'] for s in seeds]
        rows[arm] = [{'step': pts[0]['step'], **{k: mean_std([p[k] for p in pts]) for k in ['seconds', *KEYS]}}
                     for pts in zip(*curves)]
    plain_final = {s: runs['plain'][str(s)]['curve'][-1]['fd_ratio'] for s in seeds}
    reach = {s: next((p['step'] for p in runs['repa'][str(s)]['curve'] if p['fd_ratio'] <= plain_final[s]), None)
             for s in seeds}
    seconds = {arm: mean_std([runs[arm][str(s)]['train_seconds'] for s in seeds]) for arm in runs}
    return {'rows': rows, 'train_seconds': seconds, 'time_ratio': seconds['repa'][0] / seconds['plain'][0],
            'repa_reaches_plain_final_fd_ratio_at_step': {str(s): r for s, r in reach.items()}}

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seeds', default='0,1,2')
    ap.add_argument('--steps', type=int, default=800)
    ap.add_argument('--every', type=int, default=200, help='steps between the scored checkpoints')
    ap.add_argument('--weight', type=float, default=0.5)
    ap.add_argument('--until', type=float, default=1.0)
    ap.add_argument('--projector-dim', type=int, default=256)
    ap.add_argument('--epochs', type=int, default=30, help="the encoder's training epochs")
    ap.add_argument('--smoke', action='store_true', help='1 seed, 20 steps, 100 samples: checks that it works')
    a = ap.parse_args()
    if a.smoke: a.seeds, a.steps, a.every, a.epochs = '0', 20, 10, 2
    root = RUNS / ('repa-smoke' if a.smoke else 'repa')
    path = root / 'repa.json' if a.smoke else HERE / 'repa.json'
    import torch, accelerate, diffusers, transformers
    from perf import quality_curve
    seeds = [int(s) for s in a.seeds.split(',') if s]
    res = {'date': time.strftime('%Y-%m-%d'), 'torch': torch.__version__, 'threads': torch.get_num_threads(),
           'diffusers': diffusers.__version__, 'accelerate': accelerate.__version__,
           'transformers': transformers.__version__, 'cpus': os.cpu_count(), 'smoke': a.smoke,
           'settings': {'steps': a.steps, 'every': a.every, 'weight': a.weight, 'until': a.until,
                        'projector_dim': a.projector_dim, 'seeds': seeds, 'layer': 'default (unet.down_blocks.1)'},
           'encoders': {}, 'runs': {'plain': {}, 'repa': {}}}
    for s in seeds:
        encoder = root / f'encoder_seed{s}'
        res['encoders'][str(s)] = train_encoder(s, encoder, a.epochs)
        print(f"seed {s}: encoder val accuracy {res['encoders'][str(s)]['val_accuracy']:.4f} "
              f"({res['encoders'][str(s)]['seconds']} s)", flush=True)
        repa = ['--repa.encoder', str(encoder), '--repa.weight', str(a.weight), '--repa.until', str(a.until),
                '--repa.projector_dim', str(a.projector_dim), '--repa.image_size', '8']
        for arm, extra in (('plain', []), ('repa', repa)):
            r = train_run(root / f'{arm}_seed{s}', s, a.steps, a.every, extra, a.smoke)
            curve = quality_curve(r, KEYS)
            terms = [(x['step'], x['repa_loss']) for x in r['records'] if 'repa_loss' in x]
            res['runs'][arm][str(s)] = {'curve': curve, 'train_seconds': r['final']['train_seconds'],
                                        'val_loss_ema': r['final']['val_loss_ema'], 'repa_loss': terms}
            print(f"seed {s} {arm}: " + ', '.join(f"step {p['step']} FD ratio {p['fd_ratio']:.2f}" for p in curve)
                  + f"; {r['final']['train_seconds']} s", flush=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(res, indent=1) + '\n')
    res['summary'] = summary(res['runs'], seeds)
    path.write_text(json.dumps(res, indent=1) + '\n')
    sm = res['summary']
    for arm in ('plain', 'repa'):
        rows = sm['rows'][arm]
        print(arm + ': ' + '; '.join(f"step {r['step']}: FD ratio {r['fd_ratio'][0]:.2f}±{r['fd_ratio'][1]:.2f}, "
                                     f"accuracy {r['accuracy'][0]:.4f}" for r in rows))
    print(f"training time: REPA {sm['time_ratio']:.2f}x the plain run's; REPA reaches the plain run's final FD ratio "
          f"at steps {sm['repa_reaches_plain_final_fd_ratio_at_step']}; wrote {path}")

if __name__ == '__main__':
    main()
