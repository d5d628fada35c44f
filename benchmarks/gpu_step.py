"""One training step of an SD3-style DiT at a realistic size: step time, samples/s, peak memory and MFU,
eager and under `torch.compile`, each with and without gradient checkpointing.

The step is rectiflow's: `DiTVelocity` (diffusers `SD3Transformer2DModel` with class tokens), the
`FlowMatching` loss with CFG dropout, fused AdamW where there is CUDA, gradient clipping, and the EMA
as one foreach update, under bf16 autocast on CUDA. Model FLOPs per step are counted once with
`torch.utils.flop_counter.FlopCounterMode` (forward and backward, at a small batch, scaled linearly
by the batch); MFU divides the achieved FLOP/s by the device's dense bf16 peak.

    bash benchmarks/gpu.sh              # on a CUDA machine: the full size (about 8 minutes)
    bash benchmarks/gpu.sh --smoke      # anywhere: a tiny size on CPU, fp32, the same code paths
"""
import argparse, json, platform, time
from contextlib import nullcontext
import torch
from diffusers.training_utils import EMAModel
from rectiflow.losses import FlowMatching
from rectiflow.config import FlowConfig
from rectiflow.models import DiTVelocity, n_params
from rectiflow.speed import peak_tflops

def peak_flops(device: torch.device, override: float | None) -> float | None:
    "The dense bf16 peak in FLOP/s: --peak-tflops, else rectiflow's table of devices (06e_speed); None on a CPU."
    peak = peak_tflops(device, override or 0.0)
    return peak * 1e12 if peak else None

def build(a, device):
    torch.manual_seed(0)
    model = DiTVelocity(sample_size=a.size, in_channels=a.channels, width=a.width, layers=a.layers, heads=a.heads,
                        patch_size=2, n_classes=1000).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == 'cuda')
    ema = EMAModel(model.parameters(), decay=0.999, foreach=True)
    return model, opt, ema

def make_step(model, opt, ema, device, bf16: bool, compiled: bool, backend: str = 'inductor'):
    objective = FlowMatching(FlowConfig(cond_dropout=0.1))
    gen = torch.Generator().manual_seed(0)
    net = torch.compile(model, backend=backend) if compiled else model
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if bf16 else nullcontext
    def step(batch):
        with autocast():
            loss, _ = objective.loss(net, batch, gen)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(); opt.zero_grad(set_to_none=True)
        ema.step(model.parameters())
        return loss.detach()
    return step

def batch_of(n, a, device):
    g = torch.Generator().manual_seed(1)
    return {'x1': torch.randn(n, a.channels, a.size, a.size, generator=g).to(device),
            'cond': torch.randint(0, 1000, (n,), generator=g).to(device)}

def flops_per_item(a, device, bf16: bool) -> float:
    "Model FLOPs of one item's forward and backward (counted at a small batch)."
    from torch.utils.flop_counter import FlopCounterMode
    model, opt, ema = build(a, device)
    n = 2
    step = make_step(model, opt, ema, device, bf16, compiled=False)
    counter = FlopCounterMode(display=False)
    with counter: step(batch_of(n, a, device))
    del model, opt, ema
    return counter.get_total_flops() / n

def sync(device):
    if device.type == 'cuda': torch.cuda.synchronize(device)

def measure(a, device, bf16: bool, compiled: bool, checkpointing: bool, flops_item: float, peak: float | None) -> dict:
    model, opt, ema = build(a, device)
    if checkpointing: model.dit.enable_gradient_checkpointing()
    step, batch = make_step(model, opt, ema, device, bf16, compiled, a.compile_backend), batch_of(a.batch, a, device)
    if device.type == 'cuda': torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    for _ in range(a.warmup): step(batch)                       # compile happens here
    sync(device); warm_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(a.steps): loss = step(batch)
    sync(device); dt = (time.perf_counter() - t0) / a.steps
    r = {'compile': compiled, 'checkpointing': checkpointing, 'step_ms': dt * 1e3, 'samples_per_s': a.batch / dt,
         'warmup_s': warm_s, 'loss': float(loss), 'tflops_per_s': flops_item * a.batch / dt / 1e12,
         'peak_mem_gib': torch.cuda.max_memory_allocated(device) / 2**30 if device.type == 'cuda' else None}
    r['mfu'] = flops_item * a.batch / dt / peak if peak else None
    if not torch.isfinite(torch.tensor(r['loss'])): raise SystemExit(f"non-finite loss in {r}")
    del model, opt, ema, step
    return r

def table(res) -> str:
    lines = ['| compile | gradient checkpointing | step | samples/s | TFLOP/s | MFU | peak memory | warm-up |',
             '|---|---|---|---|---|---|---|---|']
    for r in res['runs']:
        mfu = f"{r['mfu']:.1%}" if r['mfu'] is not None else 'n/a'
        mem = f"{r['peak_mem_gib']:.1f} GiB" if r['peak_mem_gib'] is not None else 'n/a'
        lines.append(f"| {'yes' if r['compile'] else 'no'} | {'yes' if r['checkpointing'] else 'no'} | {r['step_ms']:.1f} ms | "
                     f"{r['samples_per_s']:.0f} | {r['tflops_per_s']:.2f} | {mfu} | {mem} | {r['warmup_s']:.0f} s |")
    return '\n'.join(lines)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--smoke', action='store_true', help='tiny size on CPU in fp32: checks the code paths, measures nothing useful')
    ap.add_argument('--width', type=int, default=768); ap.add_argument('--layers', type=int, default=8)
    ap.add_argument('--heads', type=int, default=12); ap.add_argument('--size', type=int, default=32)
    ap.add_argument('--channels', type=int, default=16); ap.add_argument('--batch', type=int, default=256)
    ap.add_argument('--steps', type=int, default=20); ap.add_argument('--warmup', type=int, default=3)
    ap.add_argument('--no-compile', action='store_true', help='skip the torch.compile variants')
    ap.add_argument('--compile-backend', default='inductor', help="torch.compile backend (--smoke: 'aot_eager', which traces "
                    "the same graphs without inductor's minutes of C++ code generation on a CPU)")
    ap.add_argument('--peak-tflops', type=float, help='the device\'s dense bf16 peak, where the table does not know it')
    ap.add_argument('--json', help='write the results here')
    a = ap.parse_args(argv)
    if a.smoke:
        a.width, a.layers, a.heads, a.size, a.channels, a.batch, a.steps, a.warmup = 64, 2, 4, 8, 4, 4, 2, 1
        if a.compile_backend == 'inductor': a.compile_backend = 'aot_eager'
    device = torch.device('cuda' if torch.cuda.is_available() and not a.smoke else 'cpu')
    if device.type == 'cuda': torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True
    bf16 = device.type == 'cuda'
    peak = peak_flops(device, a.peak_tflops)
    model = DiTVelocity(sample_size=a.size, in_channels=a.channels, width=a.width, layers=a.layers, heads=a.heads, n_classes=1000)
    res = {'device': torch.cuda.get_device_name(device) if device.type == 'cuda' else platform.processor() or platform.machine(),
           'torch': torch.__version__, 'params': n_params(model), 'precision': 'bf16 autocast' if bf16 else 'fp32',
           'shape': [a.channels, a.size, a.size], 'tokens': (a.size // 2) ** 2, 'batch': a.batch, 'width': a.width,
           'layers': a.layers, 'heads': a.heads, 'smoke': a.smoke, 'compile_backend': a.compile_backend, 'peak_tflops': peak / 1e12 if peak else None}
    del model
    res['gflops_per_item'] = flops_per_item(a, device, bf16) / 1e9
    print(f"{res['device']}: DiT of {res['params'] / 1e6:.1f}M parameters on {a.channels}x{a.size}x{a.size} latents "
          f"({res['tokens']} tokens), batch {a.batch}, {res['precision']}; {res['gflops_per_item']:.2f} GFLOP per item (fwd+bwd)", flush=True)
    res['runs'] = []
    for compiled in ([False] if a.no_compile else [False, True]):
        for ckpt in (False, True):
            r = measure(a, device, bf16, compiled, ckpt, res['gflops_per_item'] * 1e9, peak)
            res['runs'].append(r)
            print(f"  compile={compiled!s:5} checkpointing={ckpt!s:5} {r['step_ms']:8.1f} ms/step  {r['samples_per_s']:8.0f} samples/s  "
                  f"MFU {r['mfu'] if r['mfu'] is not None else float('nan'):.1%}  warm-up {r['warmup_s']:.0f} s", flush=True)
    print(table(res))
    if a.json: open(a.json, 'w').write(json.dumps(res, indent=1) + '\n')
    return res

if __name__ == '__main__':
    main()
