"""The GPU check: the real `rectiflow train`, eager, regionally compiled, and compiled with gradient checkpointing,
on the digits default and on a DiT over synthetic 16x32x32 latent shards (~170M parameters); one table row per run.

Each run is the CLI as a user starts it, for a fixed number of steps; its figures are read back from its own
`metrics.jsonl` (the train records after the first, so compilation is not in them): step time, items/s,
TFLOP/s and MFU (rectiflow's own counting, against the dense bf16 peak of the device table in `24_run.throughput`),
the device's peak memory and the graphs dynamo compiled. No VAE can be downloaded on the GPU machine: the
latents are synthetic (class-dependent patterns plus noise) and their decoder a small randomly initialised
`AutoencoderKL`, saved beside them, that only the sample strips use.

    bash benchmarks/gpu.sh            # on a CUDA machine: writes benchmarks/gpu_results.json row by row
    bash benchmarks/gpu.sh --smoke    # anywhere: tiny sizes, a few steps, the same code paths (aot_eager on a CPU)
"""
import argparse, json, platform, subprocess, sys, time
from pathlib import Path
import torch

HERE = Path(__file__).resolve().parent
VARIANTS = {'eager': [], 'regional': ['--run.compile', 'regional'],
            'regional + checkpointing': ['--run.compile', 'regional', '--run.gradient_checkpointing', 'true']}

def write_latent_shards(out: Path, n_train: int, n_val: int, channels: int, size: int, classes: int = 10) -> Path:
    "Synthetic latent shards at `out` (a class-dependent pattern plus noise per item) and the VAE that decodes them."
    from diffusers import AutoencoderKL
    from rectiflow.data.shards import ShardWriter, StatsAccumulator, latent_manifest, write_shards_manifest
    from rectiflow.flow.vae import encoder_fingerprint
    torch.manual_seed(0)
    # three downsamplings: latents of size s decode to images of 8s, as the SD VAEs do
    vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=channels, block_out_channels=(8, 8, 8, 8),
                        down_block_types=('DownEncoderBlock2D',) * 4, up_block_types=('UpDecoderBlock2D',) * 4,
                        layers_per_block=1, norm_num_groups=8, sample_size=8 * size)
    vae.save_pretrained(out / 'vae')
    g = torch.Generator().manual_seed(0)
    patterns = torch.randn(classes, channels, size, size, generator=g)
    splits, stats = {}, StatsAccumulator()
    for split, n in (('train', n_train), ('val', n_val)):
        w = ShardWriter(out, split, 4096, 'safetensors')
        for lo in range(0, n, 1024):
            cond = torch.randint(0, classes, (min(1024, n - lo),), generator=g)
            z = patterns[cond] + 0.5 * torch.randn(len(cond), channels, size, size, generator=g)
            if split == 'train': stats.add(z)
            w.add(latents=z, cond=cond)
        splits[split] = {**w.close(), 'groups': None}
    manifest = latent_manifest(splits, [channels, size, size], stats.stats(), 'safetensors', [str(c) for c in range(classes)],
                               vae=str((out / 'vae').resolve()), encoder=encoder_fingerprint(vae),
                               source={'synthetic': 'class patterns plus noise (benchmarks/gpu_train.py)'})
    write_shards_manifest(out, manifest)
    return out

def train(out: Path, args: list, steps: int, log_every: int) -> float:
    "One `rectiflow train` of `steps` steps into `out`; its wall-clock seconds."
    cadence = ['--steps', steps, '--run.log_every', log_every, '--eval.every', steps, '--eval.sample_every', steps,
               '--checkpoint.save_every', steps]
    cmd = [sys.executable, '-m', 'rectiflow.cli', 'train', '--out', out, '--overwrite', '--no-progress', *cadence, *args]
    t0 = time.time()
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode: sys.exit(f"{out.name} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return time.time() - t0

def row(name: str, variant: str, out: Path, wall: float) -> dict:
    "The figures of the run at `out`: its steady train records (all but the first), its size, its wall time."
    recs = [json.loads(l) for l in (out / 'metrics.jsonl').read_text().splitlines()]
    train = [r for r in recs if r['kind'] == 'train'][1:]
    if not train: sys.exit(f"{out}: too few train records to leave out the compiling first one; raise --steps")
    mean = lambda k: sum(r[k] for r in train) / len(train) if all(r.get(k) is not None for r in train) else None
    info = json.loads((out / 'run_info.json').read_text())
    peaks = [r['device_peak_mb'] for r in train if 'device_peak_mb' in r]
    return {'workload': name, 'variant': variant, 'params_m': info['n_params'] / 1e6, 'steps': train[-1]['step'],
            'step_ms': 1e3 / mean('steps_per_s'), 'items_per_s': mean('items_per_s'), 'tflops': mean('tflops'),
            'mfu': mean('mfu'), 'peak_mem_mb': max(peaks) if peaks else None,
            'compiled_graphs': train[-1].get('compiled_graphs', 0), 'wall_s': round(wall, 1),
            'precision': info['mixed_precision']}

def fmt(v, spec: str, unit: str = '') -> str: return 'n/a' if v is None else f'{v:{spec}}{unit}'

def table(rows: list[dict]) -> str:
    "The markdown table of `rows`, with each workload's speed and memory against its eager run."
    lines = ['| workload | variant | params | step | vs eager | items/s | TFLOP/s | MFU | peak memory | vs eager | graphs | wall |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|']
    eager = {r['workload']: r for r in rows if r['variant'] == 'eager'}
    for r in rows:
        e = eager.get(r['workload'])
        speed = e['step_ms'] / r['step_ms'] if e else None
        mem = r['peak_mem_mb'] / e['peak_mem_mb'] if e and r['peak_mem_mb'] and e['peak_mem_mb'] else None
        lines.append(f"| {r['workload']} | {r['variant']} | {r['params_m']:.1f}M | {r['step_ms']:.1f} ms | "
                     f"{fmt(speed, '.2f', 'x')} | {r['items_per_s']:.0f} | {fmt(r['tflops'], '.1f')} | "
                     f"{fmt(r['mfu'], '.1%')} | {fmt(r['peak_mem_mb'] and r['peak_mem_mb'] / 1024, '.1f', ' GiB')} | "
                     f"{fmt(mem, '.2f', 'x')} | {r['compiled_graphs']} | {r['wall_s']:.0f} s |")
    return '\n'.join(lines)

WORKLOADS = {'digits': 'digits default', 'dit': 'DiT on 16x32x32 latents'}

def workloads(a, work: Path) -> dict:
    "The chosen workloads' CLI arguments (the smoke sizes are tiny)."
    if a.smoke:
        shards = write_latent_shards(work / 'latents', 64, 32, 4, 8)
        digits = ['--data.batch_size', '32', '--eval.n_samples', '20', '--eval.val_items', '64']
        dit = ['--data', shards, '--model', 'dit', '--task.channels', '64', '--task.layers', '2', '--task.heads', '4',
               '--data.batch_size', '8', '--eval.val_items', '16', '--eval.n_samples', '8']
    else:
        shards = write_latent_shards(work / 'latents', 8192, 512, 16, 32)
        digits = []
        dit = ['--data', shards, '--model', 'dit', '--task.channels', '768', '--task.layers', '8', '--task.heads', '12',
               '--data.batch_size', '256', '--eval.n_samples', '100']
    args = {'digits default': digits, 'DiT on 16x32x32 latents': dit}
    return {WORKLOADS[w]: args[WORKLOADS[w]] for w in a.workloads.split(',')}

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--smoke', action='store_true', help='tiny sizes and a few steps: the code paths, no figures')
    ap.add_argument('--work', default='runs/gpu', help='where the runs and the synthetic latents go')
    ap.add_argument('--json', help='the results file (default benchmarks/gpu_results.json; --smoke: WORK/gpu_results.json)')
    ap.add_argument('--steps', type=int, help='steps per run (default 300 for the digits, 60 for the DiT; --smoke: 4)')
    ap.add_argument('--compile-backend', help="torch.compile's backend (default inductor; --smoke: aot_eager)")
    ap.add_argument('--workloads', default='digits,dit', help='comma-separated: digits, dit (default both)')
    a = ap.parse_args(argv)
    unknown = set(a.workloads.split(',')) - set(WORKLOADS)
    if unknown: ap.error(f"unknown workload {sorted(unknown)[0]!r}; choose from {', '.join(WORKLOADS)}")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    path = Path(a.json) if a.json else work / 'gpu_results.json' if a.smoke else HERE / 'gpu_results.json'
    backend = a.compile_backend or ('aot_eager' if a.smoke else 'inductor')
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or platform.machine()
    res = {'date': time.strftime('%Y-%m-%d'), 'device': device, 'torch': torch.__version__, 'smoke': a.smoke,
           'compile_backend': backend, 'rows': []}
    steps = {'digits default': a.steps or (4 if a.smoke else 300), 'DiT on 16x32x32 latents': a.steps or (4 if a.smoke else 60)}
    for name, args in workloads(a, work).items():
        for variant, extra in VARIANTS.items():
            out = work / f"{name.split()[0].lower()}-{variant.replace(' + ', '-')}"
            log_every = max(1, steps[name] // 6)
            wall = train(out, [*args, *extra, '--run.compile_backend', backend], steps[name], log_every)
            res['rows'].append(row(name, variant, out, wall))
            path.write_text(json.dumps(res, indent=1) + '\n')        # row by row: a cut-off run keeps what it measured
            print(table(res['rows'][-1:]).splitlines()[-1], flush=True)
    print(table(res['rows']))
    return res

if __name__ == '__main__':
    main()
