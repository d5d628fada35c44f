"""Quality benchmarks of the defaults, recorded in benchmarks/results.json and benchmarks/RESULTS.md.

Run alone on the machine (`make bench`): the timings are wall-clock seconds of training, and a
second job on two cores slows PyTorch's threads by an order of magnitude.
"""
import argparse, json, os, platform, shutil, subprocess, sys, time
from pathlib import Path
import torch

HERE = Path(__file__).resolve().parent
RUNS = HERE.parent / 'runs' / 'bench'
RECTIFLOW = [sys.executable, '-m', 'rectiflow.cli']

def run(name, *args):
    "Train one configuration through the CLI; returns its final record and config."
    out = RUNS / name
    t0 = time.time()
    p = subprocess.run([*RECTIFLOW, 'train', '--out', out, '--overwrite', '--no-progress', *map(str, args)],
                       capture_output=True, text=True)
    if p.returncode: sys.exit(f"{name} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    print(p.stdout.strip(), f"[{name}: {time.time() - t0:.0f}s wall]", sep='\n', flush=True)
    recs = [json.loads(l) for l in (out / 'metrics.jsonl').read_text().splitlines()]
    vals = [r for r in recs if r['kind'] == 'val']
    return {'final': recs[-1], 'floor': vals[0], 'last_val': vals[-1], 'config': json.loads((out / 'config.json').read_text()),
            'out': str(out)}

def digits():
    r = run('digits')
    strips = sorted((Path(r['out']) / 'samples').glob('step_*.png'))
    shutil.copy(strips[-1], HERE / 'digits_strip.png')
    return r

def toys(names, steps):
    return {f'{n}_{s}': run(f'{n}_{s}', '--data', n, '--steps', s) for n in names for s in steps}

def checkpoint(repeats=5):
    "Size and save / load time of a digits-default training checkpoint (in process, best of `repeats`)."
    import tempfile
    from rectiflow.config import preset
    from rectiflow.train import Trainer
    with tempfile.TemporaryDirectory() as d:
        cfg = preset('digits'); cfg.run.out = f'{d}/run'
        tr = Trainer(cfg, progress=False); tr.run_dir.mkdir(parents=True)
        batches = tr._batches()
        for _ in range(3): tr._micro_step(next(batches)); tr.step += 1; tr.ema.step(tr.unwrapped.parameters())  # AdamW state exists
        saves, loads = [], []
        for _ in range(repeats):
            t0 = time.perf_counter(); path = tr.save_checkpoint(); saves.append(time.perf_counter() - t0)
            t0 = time.perf_counter(); tr.load_checkpoint(path); loads.append(time.perf_counter() - t0)
        files = {p.name: p.stat().st_size for p in path.iterdir()}
    r = {'bytes': sum(files.values()), 'files': files, 'save_s': min(saves), 'load_s': min(loads)}
    print(f"checkpoint: {r['bytes'] / 1e6:.2f} MB, save {r['save_s'] * 1e3:.0f} ms, load {r['load_s'] * 1e3:.0f} ms", flush=True)
    return r

def tasks():
    "The issue-6 workloads at their presets through the CLI (`--task NAME`)."
    out = {'filler': run('filler', '--task', 'filler'), 'vae': run('vae', '--task', 'vae')}
    out['latent-digits'] = run('latent-digits', '--task', 'latent-digits', '--vae', RUNS / 'vae' / 'final',
                               '--data.latent_cache', RUNS / 'latent-cache')
    return out

def lr_sweep():
    "The LR range test against a grid sweep on the digits default (benchmarks/lr_sweep.py writes lr_sweep.json)."
    p = subprocess.run([sys.executable, str(HERE / 'lr_sweep.py')], capture_output=True, text=True)
    if p.returncode: sys.exit(f"lr_sweep failed ({p.returncode}):\n{p.stderr[-3000:]}")
    print(p.stdout.strip(), flush=True)
    return {'file': 'lr_sweep.json'}

class IgnoresInput(torch.nn.Module):
    "A broken velocity model for the overfit gate: one learned constant, whatever its input."
    def __init__(self, shape): super().__init__(); self.velocity = torch.nn.Parameter(torch.zeros(shape))
    def forward(self, x_t, t, cond=None): return self.velocity.expand_as(x_t)

def gates():
    "Each gate on the digits default (and the overfit gate on a model that ignores its input), in process, timed."
    from rectiflow.config import preset
    from rectiflow.gates import run_gate
    cfg, out = preset('digits'), {}
    runs = [('data', {}), ('overfit', {}), ('overfit (input-ignoring model)', {'model': IgnoresInput((1, 8, 8))}), ('resume', {}), ('lr', {})]
    for label, kw in runs:
        r = run_gate(label.split()[0], cfg, **kw)
        out[label] = {'passed': r.passed, 'seconds': r.seconds, 'message': r.message}
        print(f"{r}  [{r.seconds:.1f}s]", flush=True)
    return out

def machine():
    import torch
    return {'python': platform.python_version(), 'torch': torch.__version__, 'cpus': os.cpu_count(),
            'threads': torch.get_num_threads(), 'processor': platform.processor() or platform.machine()}

def sampler(cfg):
    e = cfg['eval']
    return f"{e['solver']}, {e['nfe']} NFE, CFG scale {e['cfg_scale']}"

def results_md(res) -> str:
    "The measured tables of RESULTS.md (the prose around them is kept in RESULTS.head.md)."
    m, lines = res['machine'], []
    lines += [f"Machine: {m['cpus']} CPU cores ({m['processor']}), torch {m['torch']} with {m['threads']} threads, "
              f"Python {m['python']}; nothing else running.", '']
    if 'digits' in res:
        d, c = res['digits']['final'], res['digits']['config']
        lines += ['## Digits default (`make train`)', '',
                  '| training steps | training time | sampler | samples | accuracy | controllability gap | Fréchet distance | real-data floor | ratio |',
                  '|---|---|---|---|---|---|---|---|---|',
                  f"| {c['run']['steps']} | {d['train_seconds']:.0f} s | {sampler(c)} | {d['n_samples']} (100 per class) | "
                  f"{d['accuracy']:.4f} | {d['control_gap']:.4f} | {d['fd']:.3f} | {d['fd_floor']:.3f} | {d['fd_ratio']:.2f} |", '']
        if 'floor' in res['digits']:
            fl, lv = res['digits']['floor'], res['digits']['last_val']
            lines += [f"Validation (EMA weights, fixed items, t and noise): untrained floor {fl['val_loss_ema']:.4f}, final "
                      f"{lv['val_loss_ema']:.4f}; with the class dropped {lv['val_loss_ema_uncond']:.4f}, a conditioning gap of "
                      f"{lv['cond_gap']:.4f} (untrained: {fl['cond_gap']:.4f}).", '']
        lines += ['Final sample strip (EMA weights; want / REAL / OURS / reads):', '', '![digits strip](digits_strip.png)', '']
    if 'toys' in res:
        lines += ['## 2-D distributions', '',
                  '2000 generated points against 2000 fresh target points; the floor is the same distance between two fresh target draws.', '',
                  '| data | steps | training time | W2 | W2 noise floor | energy distance | energy noise floor |', '|---|---|---|---|---|---|---|']
        for k, r in res['toys'].items():
            f, c = r['final'], r['config']
            lines.append(f"| {c['data']['name']} | {c['run']['steps']} | {f['train_seconds']:.0f} s | {f['w2']:.4f} | {f['w2_floor']:.4f} | "
                         f"{f['energy']:.5f} | {f['energy_floor']:.5f} |")
        lines.append('')
    if 'checkpoint' in res:
        c = res['checkpoint']
        lines += ['## Checkpoints (digits default)', '',
                  'One training checkpoint after 3 optimizer steps (`checkpoints/step_N/`: weights, AdamW state, scheduler, '
                  'RNG states, EMA, flow generator, trainer state), written atomically and read back in process; best of 5.', '',
                  '| size | save | load | files |', '|---|---|---|---|',
                  f"| {c['bytes'] / 1e6:.2f} MB | {c['save_s'] * 1e3:.0f} ms | {c['load_s'] * 1e3:.0f} ms | "
                  + ', '.join(f"{k} ({v / 1e3:.0f} kB)" for k, v in sorted(c['files'].items())) + ' |', '']
    if 'gates' in res:
        lines += ['## Gates (digits default)', '', 'Each gate in process on the digits default (`rectiflow gate NAME`); '
                  'the second overfit row swaps in a velocity model that ignores its input (one learned constant).', '',
                  '| gate | result | time | what it found |', '|---|---|---|---|']
        lines += [f"| {k} | {'PASS' if g['passed'] else 'FAIL'} | {g['seconds']:.1f} s | {g['message']} |" for k, g in res['gates'].items()]
        lines.append('')
    if 'tasks' in res and 'filler' in res['tasks']:
        f, c = res['tasks']['filler']['final'], res['tasks']['filler']['config']
        bands = ', '.join(f"{k[5:]} {v:.2f}" for k, v in f.items() if k.startswith('psnr_') and k[5:] in ('sharp', 'hot', 'cool', 'diffuse'))
        lines += ['## Regression filler (`--task filler`)', '',
                  'A lost band of four-band digit scenes predicted from the other three; PSNR under the exact display mapping, '
                  'per band then averaged, on all 360 validation scenes; the floor is the untrained model, the baseline the '
                  'mean of the visible bands.', '',
                  '| steps | training time | PSNR | untrained floor | gain | mean-of-visible baseline | per band |', '|---|---|---|---|---|---|---|',
                  f"| {c['run']['steps']} | {f['train_seconds']:.0f} s | {f['psnr']:.2f} dB | {f['psnr_floor']:.2f} dB | "
                  f"+{f['psnr_gain_db']:.2f} dB | {f['psnr_mean_visible']:.2f} dB | {bands} |", '']
    if 'tasks' in res and 'vae' in res['tasks']:
        v, cv = res['tasks']['vae']['final'], res['tasks']['vae']['config']
        lines += ['## Latents (`--task vae`, then `--task latent-digits`)', '',
                  'Stage 0 trains a small `AutoencoderKL` on the digits; its `final/` is gated by `recon` (the reference classifier '
                  'must read >= 95% of the reconstructed validation digits) and encodes the cached latents the flow trains on.', '',
                  '| stage | steps | training time | figures |', '|---|---|---|---|',
                  f"| vae | {cv['run']['steps']} | {v['train_seconds']:.0f} s | reconstructions read correctly {v['recon_accuracy']:.4f} "
                  f"(real {v['recon_real_accuracy']:.4f}), PSNR {v['recon_psnr']:.2f} dB, gate {'passed' if v['recon_passed'] else 'FAILED'} |"]
        if 'latent-digits' in res['tasks']:
            l, cl = res['tasks']['latent-digits']['final'], res['tasks']['latent-digits']['config']
            lines.append(f"| latent-digits | {cl['run']['steps']} | {l['train_seconds']:.0f} s | generated accuracy {l['accuracy']:.4f}, "
                         f"control gap {l['control_gap']:.4f}, FD {l['fd']:.3f} vs floor {l['fd_floor']:.3f} (ratio {l['fd_ratio']:.2f}); "
                         f"{l['n_samples']} samples, {sampler(cl)} |")
        lines.append('')
    if 'lr' in res:
        sys.path.insert(0, str(HERE)); from lr_sweep import table
        lines += ['## LR range test against a grid sweep (`benchmarks/lr_sweep.py`)', '',
                  table(json.loads((HERE / res['lr']['file']).read_text())), '']
    return '\n'.join(lines)

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--only', choices=['digits', 'toys', 'checkpoint', 'gates', 'lr', 'tasks'], default=None)
    a = ap.parse_args()
    results_path = HERE / 'results.json'
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    results['machine'] = machine()
    if a.only in (None, 'digits'): results['digits'] = digits()
    if a.only in (None, 'toys'): results['toys'] = toys(['moons', 'checkerboard', '8gaussians'], [2000, 5000])
    if a.only in (None, 'checkpoint'): results['checkpoint'] = checkpoint()
    if a.only in (None, 'gates'): results['gates'] = gates()
    if a.only in (None, 'lr'): results['lr'] = lr_sweep()
    if a.only in (None, 'tasks'): results['tasks'] = tasks()
    results_path.write_text(json.dumps(results, indent=1) + '\n')
    head = (HERE / 'RESULTS.head.md').read_text()
    (HERE / 'RESULTS.md').write_text(head.rstrip() + '\n\n' + results_md(results))
    print(f"wrote {results_path} and {HERE / 'RESULTS.md'}")
