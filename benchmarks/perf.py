"""Performance benchmarks: quality at budget over seeds, samplers, data throughput, and the
before/after figures of the optimisations. `run_benchmarks.py` calls these and renders the tables;
`overhead.py` measures the trainer against a bare loop.
"""
import json, statistics, tempfile, time
from dataclasses import replace
from pathlib import Path
import torch

HERE = Path(__file__).resolve().parent


def mean_std(xs) -> tuple[float, float]:
    xs = [float(x) for x in xs]
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def step_times(run_dir) -> dict:
    "Wall seconds since the start of training at each logged step of a run."
    recs = [json.loads(l) for l in (Path(run_dir) / 'metrics.jsonl').read_text().splitlines()]
    return {r['step']: r['time'] for r in recs if r['kind'] == 'train'}


def quality_curve(run_result, keys) -> list[dict]:
    "Quality figures `keys` at each kept step checkpoint of a finished run and at its end (the final record)."
    from rectiflow.store.checkpoint import checkpoint_dirs
    from rectiflow.api import evaluate_checkpoint
    out, times = Path(run_result['out']), step_times(run_result['out'])
    final = run_result['final']
    points = []
    for ckpt in checkpoint_dirs(out):
        step = int(ckpt.name.split('_')[-1])
        if step >= final['step']: continue                  # the final record already scores the last weights
        q = evaluate_checkpoint(ckpt, quality=True)
        points.append({'step': step, 'seconds': times.get(step), **{k: q[k] for k in keys}})
    points.append({'step': final['step'], 'seconds': final['train_seconds'], **{k: final[k] for k in keys}})
    return points


def quality_at_budget(run, seeds=(0, 1, 2)) -> dict:
    "The digits default and the moons default, each trained with `seeds`, scored along the way (EMA weights)."
    res = {}
    for name, args, keys, every in (('digits', [], ['accuracy', 'fd', 'fd_floor', 'fd_ratio'], 200),
                                    ('moons', ['--data', 'moons'], ['w2', 'w2_floor', 'energy', 'energy_floor'], 500)):
        curves = []
        for s in seeds:
            r = run(f'quality/{name}_seed{s}', *args, '--run.seed', s, '--checkpoint.save_every', every, '--checkpoint.keep_last', 50)
            curves.append(quality_curve(r, keys))
        steps = [p['step'] for p in curves[0]]
        rows = []
        for i, step in enumerate(steps):
            pts = [c[i] for c in curves]
            rows.append({'step': step, **{k: mean_std([p[k] for p in pts]) for k in ['seconds', *keys]}})
        res[name] = {'seeds': list(seeds), 'rows': rows, 'curves': curves, 'config': r['config']}
        print(f"quality at budget, {name}: " + '; '.join(f"step {row['step']}: " + ', '.join(
            f"{k} {row[k][0]:.4g}±{row[k][1]:.2g}" for k in keys[:3]) for row in rows), flush=True)
    return res


def samplers(model_dir, nfes=(4, 8, 16, 32, 100), solvers=('euler', 'heun', 'midpoint'), threads: int | None = None) -> dict:
    "Digits quality and time per sample of each solver at each NFE budget, from one trained digits-default model."
    from rectiflow.api import load_run
    run = Path(model_dir)
    loaded = load_run(run)
    cfg, task, model = loaded.cfg, loaded.task, loaded.model
    rows = []
    for nfe in nfes:
        for solver in solvers:
            e = replace(cfg.eval, solver=solver, nfe=nfe)
            try:
                t0 = time.perf_counter(); q = task.final_quality(model, e); dt = time.perf_counter() - t0
            except ValueError as err:                        # the budget does not fit one step of this solver
                rows.append({'solver': solver, 'nfe': nfe, 'error': str(err)}); continue
            rows.append({'solver': solver, 'nfe': nfe, 'nfe_used': q.get('nfe', nfe), 'accuracy': q['accuracy'], 'fd': q['fd'],
                         'fd_ratio': q['fd_ratio'], 'ms_per_sample': dt / q['n_samples'] * 1e3})
            print(f"sampler {solver:8} NFE {nfe:3}: accuracy {q['accuracy']:.4f}, FD {q['fd']:.3f} ({q['fd_ratio']:.2f}x floor), "
                  f"{rows[-1]['ms_per_sample']:.2f} ms/sample", flush=True)
    ref = next(r for r in rows if r['solver'] == 'euler' and r['nfe'] == max(nfes))
    for r in rows:
        if 'fd' in r: r['fd_vs_euler_max'] = r['fd'] / ref['fd'] - 1
    return {'cfg_scale': cfg.eval.cfg_scale, 'n_samples': cfg.eval.n_samples, 'rows': rows, 'model': str(run / 'final')}


def loader_throughput(ds, batch_size: int, seconds: float = 3.0, **loader_kw) -> float:
    "Items per second a DataLoader over `ds` (the trainer's batch sampler and collate) delivers, for about `seconds`."
    from rectiflow.data.batches import EpochBatchSampler, make_loader
    sampler = EpochBatchSampler(len(ds), batch_size, seed=0)
    items, t0, epoch = 0, time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        sampler.set_position(epoch, 0)
        for b in make_loader(ds, sampler, **loader_kw):
            items += len(b['x1'])
            if time.perf_counter() - t0 >= seconds: break
        epoch += 1
    return items / (time.perf_counter() - t0)


class OneByOne(torch.utils.data.Dataset):
    "`ds` without its batched fetch (`__getitems__`): the loader takes items one by one and stacks them (the before figure)."
    def __init__(self, ds): self.ds = ds
    def __len__(self): return len(self.ds)
    def __getitem__(self, i): return self.ds[i]


def write_png_folder(root: Path, n: int, size: int = 64, groups: int = 50):
    "`n` random grayscale PNGs of `size` px in `groups` group folders."
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(0)
    for i in range(n):
        d = root / f"g{i % groups:02d}"; d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (size, size), dtype=np.uint8), mode='L').save(d / f"{i:05d}.png", compress_level=1)


def data(step_ms: float | None, n_files: int = 3000) -> dict:
    "Loader throughput against what a training step consumes: the digits default (batched and one-by-one fetch), and a folder of PNG files decoded on demand (0 and 2 workers) with its resident memory over an epoch."
    from rectiflow.tasks.registry import preset, make_task
    from rectiflow.data.files import ImageOptions, image_datasets, epoch_memory
    cfg = preset()
    train = make_task(cfg).train_ds
    bs = cfg.data.batch_size
    r = {'batch_size': bs, 'consumed_items_per_s': bs / (step_ms / 1e3) if step_ms else None, 'rows': []}
    def row(what, items_per_s):
        r['rows'].append({'data': what, 'items_per_s': items_per_s,
                          'headroom': items_per_s / r['consumed_items_per_s'] if step_ms else None})
        print(f"data: {what}: {items_per_s:.0f} items/s" + (f" ({r['rows'][-1]['headroom']:.1f}x what a step consumes)" if step_ms else ''), flush=True)
    row('digits, batched fetch (`TensorItems.__getitems__`)', loader_throughput(train, bs))
    row('digits, one by one + stack (before)', loader_throughput(OneByOne(train), bs))
    with tempfile.TemporaryDirectory() as d:
        write_png_folder(Path(d) / 'png', n_files)
        ds = image_datasets(Path(d) / 'png', ImageOptions(height=64, val_fraction=0.02))[0]['train']
        for workers in (0, 2):
            row(f'{n_files} PNG files 64x64, decoded on demand, {workers} workers', loader_throughput(ds, 32, num_workers=workers))
        r['memory'] = epoch_memory(ds, batch_size=32)
    m = r['memory']
    print(f"data: an epoch over {m['items']} files ({m['data_mb']:.1f} MB decoded) grew resident memory by {m['growth_mb']:.2f} MB", flush=True)
    return r


def _time(fn, repeats: int = 30, warmup: int = 3) -> float:
    for _ in range(warmup): fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def ema_update() -> dict:
    "One EMA update of the digits default model's parameters: a Python loop over tensors against one foreach update."
    from diffusers.training_utils import EMAModel
    from rectiflow.tasks.registry import preset, make_task
    cfg = preset()
    model = make_task(cfg).make_model()
    r = {}
    for foreach in (False, True):
        ema = EMAModel(model.parameters(), decay=cfg.ema.decay, foreach=foreach)
        r['foreach' if foreach else 'loop'] = _time(lambda: ema.step(model.parameters()), repeats=200) * 1e3
    r['n_tensors'] = sum(1 for _ in model.parameters())
    print(f"EMA update: per-tensor loop {r['loop']:.3f} ms, foreach {r['foreach']:.3f} ms ({r['n_tensors']} tensors)", flush=True)
    return r


def channels_last() -> dict:
    "Forward + backward of the digits default UNet on a training batch, default memory format against channels_last."
    from rectiflow.tasks.registry import preset, make_task
    cfg = preset()
    torch.manual_seed(0)
    model = make_task(cfg).make_model()
    x, t, c = torch.randn(cfg.data.batch_size, 1, 8, 8), torch.rand(cfg.data.batch_size), torch.randint(0, 10, (cfg.data.batch_size,))
    def step(m, xx):
        m(xx, t, c).float().pow(2).mean().backward(); m.zero_grad(set_to_none=True)
    r = {'contiguous': _time(lambda: step(model, x)) * 1e3}
    model = model.to(memory_format=torch.channels_last)
    xl = x.contiguous(memory_format=torch.channels_last)
    r['channels_last'] = _time(lambda: step(model, xl)) * 1e3
    print(f"UNet step: contiguous {r['contiguous']:.2f} ms, channels_last {r['channels_last']:.2f} ms", flush=True)
    return r
