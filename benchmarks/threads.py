"""Seconds per training step of small and built-in models at one torch thread and at all cores: where a second
thread pays for its synchronisation, on an idle machine and on one where another process keeps a core busy (an
editor, a notebook kernel, a second run: what a laptop usually is). Run alone:
`python benchmarks/threads.py [--loaded]`; writes threads.json (threads_loaded.json)."""
import json, os, subprocess, sys, time
from pathlib import Path
import torch

def presets():
    "(name, task) of the presets measured: the 2-D MLP, the digits UNet, the digits DiT."
    from rectiflow.tasks.registry import preset, make_task
    out = []
    for name, data, model in (('moons mlp', 'moons', None), ('digits unet', 'digits', None), ('digits dit', 'digits', 'dit')):
        cfg = preset(data=data)
        if model: cfg.task.model = model
        out.append((name, cfg, make_task(cfg)))
    return out

def step_seconds(task, cfg, threads: int, steps: int = 20) -> float:
    "Median seconds of one forward, backward and AdamW step on a batch of the preset's size at `threads` threads."
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = task.make_model()
    objective = task.make_objective()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ds = task.train_ds
    batch = task.collate([ds[i % len(ds)] for i in range(cfg.data.batch_size)])
    g = torch.Generator().manual_seed(0)
    times = []
    for _ in range(steps + 5):
        t0 = time.perf_counter()
        loss, _ = objective.loss(model, batch, g)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    return sorted(times[5:])[len(times[5:]) // 2]

def mlps():
    "(name, cfg, task) of smaller 2-D MLPs than the preset's: the models a user's first task often has."
    from rectiflow.tasks.registry import preset, make_task
    out = []
    for hidden, layers, batch in ((64, 2, 128), (128, 2, 256), (256, 3, 256)):
        cfg = preset(data='moons')
        cfg.task.channels, cfg.task.layers, cfg.data.batch_size = (hidden,), layers, batch
        out.append((f'mlp {hidden}x{layers}', cfg, make_task(cfg)))
    return out

def counted_step_flops(task, cfg) -> float:
    "Training FLOPs of one step, as the run counts them (`21_run.throughput`): 3x the counted forward."
    from rectiflow.run.throughput import forward_flops
    torch.manual_seed(0)
    model, objective = task.make_model(), task.make_objective()
    ds = task.train_ds
    batch = task.collate([ds[i % len(ds)] for i in range(cfg.data.batch_size)])
    return 3.0 * forward_flops(lambda: objective.loss(model, batch, torch.Generator().manual_seed(0)))

def main():
    loaded = '--loaded' in sys.argv
    busy = subprocess.Popen([sys.executable, '-c', 'while True: pass']) if loaded else None
    try: measure(loaded)
    finally:
        if busy: busy.kill()

def measure(loaded: bool):
    cores = os.cpu_count()
    rows = []
    for name, cfg, task in mlps() + presets():
        params = sum(p.numel() for p in task.make_model().parameters())
        one, many = step_seconds(task, cfg, 1), step_seconds(task, cfg, cores)
        flops = counted_step_flops(task, cfg)
        rows.append({'model': name, 'params': params, 'batch': cfg.data.batch_size, 'step_flops': flops,
                     's_per_step_1': round(one, 5),
                     f's_per_step_{cores}': round(many, 5), 'speedup': round(one / many, 3)})
        print(f"{name:12s} {params:>10,d} params  batch {cfg.data.batch_size:4d}  {flops:.2g} FLOPs  1 thread {one * 1e3:8.2f} ms  "
              f"{cores} threads {many * 1e3:8.2f} ms  x{one / many:.2f}", flush=True)
    name = 'threads_loaded.json' if loaded else 'threads.json'
    Path(__file__).with_name(name).write_text(json.dumps({'cores': cores, 'loaded': loaded, 'rows': rows}, indent=1))

if __name__ == '__main__': main()

def markdown(here: Path) -> list[str]:
    "The RESULTS.md section of the stored measurements (idle, and beside a busy process), where there are any."
    from rectiflow.run.throughput import SMALL_STEP_FLOPS
    runs = [json.loads(p.read_text()) for p in (here / 'threads.json', here / 'threads_loaded.json') if p.exists()]
    if not runs: return []
    cores = runs[0]['cores']
    lines = ["## CPU threads for the work (`benchmarks/threads.py`)", '',
             f"Median milliseconds of one training step (forward, backward, AdamW; the preset's batch) at one thread "
             f"and at all {cores} cores, on an idle machine and beside one process that keeps a core busy. "
             f"`run.threads auto` takes one thread below {SMALL_STEP_FLOPS:.0e} training FLOPs a step (counted as the "
             "run counts them).", '',
             '| model | params | batch | FLOPs a step | ' + ' | '.join(
                 f"1 thread{' (busy)' if r['loaded'] else ''} | {cores} threads{' (busy)' if r['loaded'] else ''}"
                 for r in runs) + ' | auto |', '|---|---|---|---|' + '---|---|' * len(runs) + '---|']
    for i, row in enumerate(runs[0]['rows']):
        cells = [f"{r['rows'][i]['s_per_step_1'] * 1e3:.1f} | {r['rows'][i][f's_per_step_{cores}'] * 1e3:.1f}"
                 for r in runs]
        auto = 1 if row['step_flops'] < SMALL_STEP_FLOPS else cores
        lines.append(f"| {row['model']} | {row['params']:,} | {row['batch']} | {row['step_flops']:.2g} | "
                     f"{' | '.join(cells)} | {auto} |")
    return lines + ['']
