"""Seconds per training step of small and built-in models at one torch thread, at all cores and at what
`run.threads auto` chooses (`24_run.throughput`): where a second thread pays for its synchronisation, on an idle
machine and on one where another process keeps a core busy (an editor, a notebook kernel, a second run: what a laptop
usually is). The goal: `auto` within 1.1x of the best fixed choice, idle and beside the busy process, for each model.
Each thread count is measured in alternating blocks (the median over blocks of a block's median step); `auto` is
decided once per model as a run decides it, on the load of that moment, and its step is the step of the count it
chose.
Run alone: `python benchmarks/threads.py [--loaded]`; writes threads.json (threads_loaded.json). `--dry` runs two
models for a few steps and writes nothing: a check that the script runs, not a measurement."""
import argparse, json, os, subprocess, sys, time
from pathlib import Path
import torch

GOAL = 1.1          # auto's step time over the best fixed choice's, at most

def presets(names=('moons mlp', 'digits unet', 'digits dit')):
    "(name, cfg, task) of the presets measured: the 2-D MLP, the digits UNet, the digits DiT."
    from rectiflow.tasks.registry import preset, make_task
    out = []
    for name, data, model in (('moons mlp', 'moons', None), ('digits unet', 'digits', None), ('digits dit', 'digits', 'dit')):
        if name not in names: continue
        cfg = preset(data=data)
        if model: cfg.task.model = model
        out.append((name, cfg, make_task(cfg)))
    return out

def step_seconds(task, cfg, threads: int, steps: int = 20, warmup: int = 5) -> float:
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
    for _ in range(steps + warmup):
        t0 = time.perf_counter()
        loss, _ = objective.loss(model, batch, g)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    return sorted(times[warmup:])[len(times[warmup:]) // 2]

BLOCKS = 7          # alternating blocks of each setting: a slower moment of the machine hits them alike

def interleaved(task, cfg, settings, steps: int, warmup: int, blocks: int = BLOCKS) -> list[float]:
    "The median over alternating blocks of each thread count in `settings` of its median step seconds."
    times = {n: [] for n in settings}
    for _ in range(blocks):
        for n in settings: times[n].append(step_seconds(task, cfg, n, steps, warmup))
    return [sorted(t)[len(t) // 2] for t in times.values()]

def mlps(sizes=((64, 2, 128), (128, 2, 256), (256, 3, 256))):
    "(name, cfg, task) of smaller 2-D MLPs than the preset's: the models a user's first task often has."
    from rectiflow.tasks.registry import preset, make_task
    out = []
    for hidden, layers, batch in sizes:
        cfg = preset(data='moons')
        cfg.task.channels, cfg.task.layers, cfg.data.batch_size = (hidden,), layers, batch
        out.append((f'mlp {hidden}x{layers}', cfg, make_task(cfg)))
    return out

def counted_step_flops(task, cfg) -> float:
    "Training FLOPs of one step, as the run counts them (`24_run.throughput`): 3x the counted forward."
    from rectiflow.run.throughput import forward_flops
    torch.manual_seed(0)
    model, objective = task.make_model(), task.make_objective()
    ds = task.train_ds
    batch = task.collate([ds[i % len(ds)] for i in range(cfg.data.batch_size)])
    return 3.0 * forward_flops(lambda: objective.loss(model, batch, torch.Generator().manual_seed(0)))

def auto_threads(flops: float) -> tuple[int, str]:
    "What `run.threads auto` takes for a step of `flops` on this machine now (the environment's OMP_NUM_THREADS aside)."
    from rectiflow.run.throughput import choose_threads
    return choose_threads('auto', flops, env={})

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument('--loaded', action='store_true', help='beside one process that keeps a core busy')
    p.add_argument('--dry', action='store_true', help='two models, a few steps, nothing written: a check it runs')
    args = p.parse_args()
    busy = subprocess.Popen([sys.executable, '-c', 'while True: pass']) if args.loaded else None
    try:
        if busy: time.sleep(1.0)                    # the busy loop running before anything is measured
        measure(args.loaded, args.dry)
    finally:
        if busy: busy.kill()

def measure(loaded: bool, dry: bool = False):
    cores = os.cpu_count()
    models = mlps(((64, 2, 128),)) + presets(('moons mlp',)) if dry else mlps() + presets()
    steps, warmup = (2, 1) if dry else (20, 5)
    rows = []
    for name, cfg, task in models:
        params = sum(p.numel() for p in task.make_model().parameters())
        flops = counted_step_flops(task, cfg)
        auto, why = auto_threads(flops)             # decided as a run decides it: at its start, on the load now
        one, many = interleaved(task, cfg, (1, cores), steps, warmup, blocks=1 if dry else BLOCKS)
        at_auto = one if auto == 1 else many       # auto sets exactly that many threads: its step is that step
        best = min(one, many)
        rows.append({'model': name, 'params': params, 'batch': cfg.data.batch_size, 'step_flops': flops,
                     's_per_step_1': round(one, 5), f's_per_step_{cores}': round(many, 5),
                     'speedup': round(one / many, 3), 'auto_threads': auto, 'auto_why': why,
                     's_per_step_auto': round(at_auto, 5), 'auto_vs_best': round(at_auto / best, 3)})
        print(f"{name:12s} {params:>10,d} params  batch {cfg.data.batch_size:4d}  {flops:.2g} FLOPs  "
              f"1 thread {one * 1e3:8.2f} ms  {cores} threads {many * 1e3:8.2f} ms  x{one / many:.2f}  "
              f"auto {auto} {at_auto * 1e3:8.2f} ms ({at_auto / best:.2f}x the best; {why})", flush=True)
    run = {'cores': cores, 'loaded': loaded, 'rows': rows, 'date': time.strftime('%Y-%m-%d'), 'cpu': cpu_kind(),
           'torch': torch.__version__}
    if dry:
        print('A dry run (two models, a few steps): the table as it would be, its figures no measurement.')
        print('\n'.join(table([run])))
        return
    name = 'threads_loaded.json' if loaded else 'threads.json'
    Path(__file__).with_name(name).write_text(json.dumps(run, indent=1))

def cpu_kind() -> str:
    "The processor's vector instructions that matter to torch's kernels here: AVX512 or AVX2."
    try: flags = Path('/proc/cpuinfo').read_text()
    except OSError: return 'unknown'
    return 'AVX512' if 'avx512f' in flags else 'AVX2' if 'avx2' in flags else 'neither AVX2 nor AVX512'

def table(runs: list[dict]) -> list[str]:
    "The RESULTS.md section of measurements `runs` (idle, and beside a busy process)."
    from rectiflow.run.throughput import SMALL_STEP_FLOPS
    cores = runs[0]['cores']
    where = lambda r: ' (busy)' if r['loaded'] else ''
    measured = [f"_Measured {r['date']}{' (busy)' if r['loaded'] else ''}: {r['cores']} cores, {r['cpu']}, "
                f"torch {r['torch']}._" for r in runs if 'date' in r]
    lines = ["## CPU threads for the work (`benchmarks/threads.py`)", '', *measured, *([''] if measured else []),
             f"Median milliseconds of one training step (forward, backward, AdamW; the preset's batch) at one thread, "
             f"at all {cores} cores and at what `run.threads auto` chose (threads in brackets; decided as a run "
             "decides it, on the load at its start), on an idle machine and beside one process that keeps a core "
             f"busy. `auto` takes one thread below {SMALL_STEP_FLOPS:.0e} training FLOPs a step (counted as the run "
             "counts them), else the cores free of other work. The ratio is auto's step time over the best fixed "
             f"choice's; the goal is at most {GOAL} in both, for each model.", '',
             '| model | params | batch | FLOPs a step | ' + ' | '.join(
                 f"1 thread{where(r)} | {cores} threads{where(r)} | auto{where(r)} | ratio{where(r)}" for r in runs)
             + ' |', '|---|---|---|---|' + '---|---|---|---|' * len(runs)]
    for i, row in enumerate(runs[0]['rows']):
        cells = []
        for r in runs:
            x = r['rows'][i]
            auto = (f"{x['s_per_step_auto'] * 1e3:.1f} ({x['auto_threads']}) | {x['auto_vs_best']:.2f}"
                    if 's_per_step_auto' in x else '- | -')
            cells.append(f"{x['s_per_step_1'] * 1e3:.1f} | {x[f's_per_step_{cores}'] * 1e3:.1f} | {auto}")
        lines.append(f"| {row['model']} | {row['params']:,} | {row['batch']} | {row['step_flops']:.2g} | "
                     f"{' | '.join(cells)} |")
    lines.append('')
    for r in runs:
        ratios = {x['model']: x['auto_vs_best'] for x in r['rows'] if 'auto_vs_best' in x}
        missed = [f"{m} ({v:.2f}x)" for m, v in ratios.items() if v > GOAL]
        kind = 'beside a busy process' if r['loaded'] else 'idle'
        if len(ratios) < len(r['rows']): verdict = 'not measured (stored before auto was timed)'
        else: verdict = f"missed for {', '.join(missed)}" if missed else f'met for all {len(ratios)} models'
        lines.append(f"- {kind}: auto within {GOAL}x of the best fixed choice: {verdict}.")
    return lines + ['']

def markdown(here: Path) -> list[str]:
    "The RESULTS.md section of the stored measurements (idle, and beside a busy process), where there are any."
    runs = [json.loads(p.read_text()) for p in (here / 'threads.json', here / 'threads_loaded.json') if p.exists()]
    return table(runs) if runs else []

if __name__ == '__main__': main()
