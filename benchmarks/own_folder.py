"""Your own folder, as a new user trains it: `rectiflow train --data FOLDER` at the defaults, on a generated folder of
labelled RGB 32x32 images (coloured shapes, `shapes_image_folder` of 08_eval.gauge), with the quality passes the preset
turns on for data on disk (every 400 steps, 200 samples, the gauge trained on the folder's training split).

    python benchmarks/own_folder.py            # 4 shapes x 300 images, 800 steps at the defaults: ~30 min, 2 CPU cores
    python benchmarks/own_folder.py --smoke    # 2 shapes x 24 images, a few steps of a small model: under a minute
    python benchmarks/own_folder.py --steps 300 --eval.every 100 --eval.quality_every 100   # train options pass through

Reports the training time, the figures of every quality pass and the final ones, the seconds of each pass and the
passes' share of the training time, and the seconds the gauge took to train (once per folder: it is cached). Writes
benchmarks/own_folder.json (a smoke run: runs/bench/own_folder_smoke/own_folder.json, never the committed one).
The folder is written by this script (`--data-only` writes it and stops).
"""
import argparse, json, os, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIGURES = ('accuracy', 'control_gap', 'accuracy_ceiling', 'fd', 'fd_floor', 'fd_ratio')
# a few steps of a small UNet, every evaluation a quality pass on a few samples: the plumbing, not the figures
SMOKE = ['--steps', '8', '--data.batch_size', '16', '--task.channels', '16,32', '--run.log_every', '4',
         '--eval.every', '4', '--eval.quality_every', '4', '--eval.quality_samples', '8', '--eval.n_samples', '8',
         '--eval.nfe', '4', '--eval.sample_every', '8', '--eval.val_items', '16']

def make_folder(root: Path, per_class: int, shapes: int) -> Path:
    "The labelled folder of coloured shapes: `per_class` RGB 32x32 images of each of the first `shapes` shapes."
    from rectiflow.eval.gauge import SHAPES, shapes_image_folder
    if not root.is_dir(): shapes_image_folder(root, per_class=per_class, size=32, shapes=SHAPES[:shapes])
    return root

def gauge_seconds(folder: Path) -> tuple[float, bool]:
    "Train (or load) the folder's gauge as a run of it does: its seconds, and whether the cache had it."
    from rectiflow.tasks.registry import make_task, preset
    t0 = time.time()
    gauge = make_task(preset(data=str(folder))).gauge
    return round(time.time() - t0, 1), gauge.hit

def train(folder: Path, run: Path, extra: list) -> float:
    "`rectiflow train --data FOLDER` (the defaults, and `extra`) as a user runs it; its wall-clock seconds."
    t0 = time.time()
    p = subprocess.run([sys.executable, '-m', 'rectiflow.cli', 'train', '--data', str(folder), '--out', str(run),
                        '--overwrite', '--no-progress', *extra], capture_output=True, text=True)
    if p.returncode: sys.exit(p.stderr[-3000:])
    print(p.stdout, end='', flush=True)
    return round(time.time() - t0, 1)

def summary(run: Path, wall: float, gauge: tuple) -> dict:
    "Training time, the figures of each quality pass and the final ones, the passes' cost."
    recs = [json.loads(l) for l in (run / 'metrics.jsonl').read_text().splitlines()]
    passes = [{'step': r['step'], 'val_loss_ema': r['val_loss_ema'], 'seconds': r['quality_seconds'],
               **{k: r[k] for k in FIGURES if k in r}} for r in recs if r['kind'] == 'val' and 'quality_seconds' in r]
    final = next(r for r in recs if r['kind'] == 'final')
    spent = sum(p['seconds'] for p in passes)
    return {'date': time.strftime('%Y-%m-%d'), 'wall_seconds': wall, 'train_seconds': final['train_seconds'],
            'gauge_seconds': gauge[0], 'gauge_cached': gauge[1], 'passes': passes,
            'pass_seconds': round(spent / max(1, len(passes)), 1),
            'pass_share': round(spent / max(final['train_seconds'] - spent, 1e-9), 4),
            'final': {k: final[k] for k in (*FIGURES, 'n_samples', 'quality_seconds') if k in final},
            'protocol': next((r['quality_protocol'] for r in recs if r['kind'] == 'val' and 'quality_protocol' in r),
                             final.get('quality_protocol'))}

def report(res: dict):
    print(f"\ntrained in {res['train_seconds']:.0f}s (wall {res['wall_seconds']:.0f}s); "
          f"gauge {res['gauge_seconds']:.1f}s ({'cached' if res['gauge_cached'] else 'trained'}); "
          f"a quality pass {res['pass_seconds']:.1f}s, "
          f"{100 * res['pass_share']:.1f}% of the training time")
    print(f"protocol: {res['protocol']}")
    print(f"{'step':>6} {'val_ema':>8} {'acc':>6} {'gap':>6} {'fd':>9} {'floor':>8} {'ratio':>6} {'secs':>6}")
    for p in res['passes']:
        print(f"{p['step']:>6} {p['val_loss_ema']:>8.4f} {p.get('accuracy', float('nan')):>6.3f} "
              f"{p.get('control_gap', float('nan')):>6.3f} {p['fd']:>9.3f} {p['fd_floor']:>8.3f} {p['fd_ratio']:>6.2f} "
              f"{p['seconds']:>6.1f}")
    f = res['final']
    print(f"final ({f['n_samples']} samples): accuracy {f.get('accuracy', float('nan')):.3f} "
          f"(ceiling {f.get('accuracy_ceiling', float('nan')):.3f}), FD {f['fd']:.3f} vs floor {f['fd_floor']:.3f} "
          f"({f['quality_seconds']:.0f}s)")

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--smoke', action='store_true', help='a tiny folder, a few steps: checks the script, not the tool')
    ap.add_argument('--per-class', type=int, default=300, help='images per shape')
    ap.add_argument('--shapes', type=int, default=4, help='how many of the shapes (classes)')
    ap.add_argument('--data-only', action='store_true', help='write the folder and stop')
    a, train_args = ap.parse_known_args()       # any other argument goes to `rectiflow train` (e.g. --steps 300)
    per_class, shapes, extra = (24, 2, SMOKE) if a.smoke else (a.per_class, a.shapes, train_args)
    out = HERE.parent / 'runs' / 'bench' / ('own_folder_smoke' if a.smoke else 'own_folder')
    # a cache of its own: the gauge is trained here once, and its seconds measured
    os.environ['XDG_CACHE_HOME'] = str(out / 'cache')
    folder = make_folder(out / f'shapes_{shapes}x{per_class}', per_class, shapes)
    if a.data_only: return print(folder)
    gauge = gauge_seconds(folder)
    wall = train(folder, out / 'run', extra)
    res = {'folder': f'{shapes} shapes x {per_class} RGB 32x32 images', 'args': extra,
           **summary(out / 'run', wall, gauge)}
    path = out / 'own_folder.json' if a.smoke else HERE / 'own_folder.json'
    path.write_text(json.dumps(res, indent=1) + '\n')
    report(res)
    print(f"wrote {path}")

if __name__ == '__main__':
    main()
