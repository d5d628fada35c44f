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
    return run_record(out)

def run_record(out: Path) -> dict:
    "A finished run's final record, untrained floor, last validation and config."
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

def stepped_digits_trainer(out):
    "A digits-default trainer writing to `out`, three optimizer steps in: its AdamW and EMA state exist."
    from rectiflow.tasks.registry import preset
    from rectiflow.api import task_trainer
    cfg = preset()
    cfg.run.out = str(out)
    tr = task_trainer(cfg)
    tr.run_dir.mkdir(parents=True)
    steps = tr.optimizer_steps()
    for _ in range(3): next(steps)
    return tr

def checkpoint(repeats=5):
    """Size and save / load time of a digits-default training checkpoint (in process, best of `repeats`), and what
    its manifest costs: hashing every file when it is written, and again when it is checked before a read."""
    import tempfile
    from rectiflow.store.files import write_manifest, check_manifest
    with tempfile.TemporaryDirectory() as d:
        tr = stepped_digits_trainer(f'{d}/run')
        saves, loads, manifests, checks = [], [], [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            path = tr.save_checkpoint()
            saves.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            tr.checkpointer.load(tr, path)
            loads.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            write_manifest(path)                                # what save_checkpoint spent on it, again
            manifests.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            check_manifest(path)
            checks.append(time.perf_counter() - t0)
        files = {p.name: p.stat().st_size for p in path.iterdir()}
    r = {'bytes': sum(files.values()), 'files': files, 'save_s': min(saves), 'load_s': min(loads),
         'manifest_s': min(manifests), 'check_s': min(checks)}
    print(f"checkpoint: {r['bytes'] / 1e6:.2f} MB, save {r['save_s'] * 1e3:.0f} ms (manifest {r['manifest_s'] * 1e3:.1f} ms), "
          f"load {r['load_s'] * 1e3:.0f} ms (check {r['check_s'] * 1e3:.1f} ms)", flush=True)
    return r

def tasks():
    "The built-in workloads at their presets through the CLI (`--task NAME`)."
    out = {'filler': run('filler', '--task', 'filler'), 'vae': run('vae', '--task', 'vae')}
    out['latent-digits'] = run('latent-digits', '--task', 'latent-digits', '--vae', RUNS / 'vae' / 'final',
                               '--task.latent_cache', RUNS / 'latent-cache')
    out['lines'] = run('lines', '--task', 'lines')
    out['sequences'] = run('sequences', '--task', 'sequences')
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
    from rectiflow.tasks.registry import preset
    from rectiflow.tools.gates import run_gate
    cfg, out = preset(), {}
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

def data_name(cfg: dict) -> str:
    "The dataset a recorded run config trained on (records older than the task section name it in data.name)."
    return (cfg.get('task') or {}).get('data') or cfg['data']['name']

def sampler(cfg):
    e = cfg['eval']
    return f"{e['solver']}, {e['nfe']} NFE, CFG scale {e['cfg_scale']}"

def meta(res, key) -> list[str]:
    "The line that says when and on what section `key` was measured."
    m = res.get(key, {}).get('meta')
    if not m: return []
    return [f"_Measured {m['date']}: {m['cpus']} CPU cores ({m['processor']}), torch {m['torch']} ({m['threads']} threads), "
            f"diffusers {m['diffusers']}, accelerate {m['accelerate']}, Python {m['python']}._", '']

def pm(v, fmt='.3f') -> str:
    "mean ± std"
    return f"{v[0]:{fmt}} ± {v[1]:{fmt}}"

def overhead_row(name: str, o: dict, goal: str) -> str:
    "One case of the trainer-overhead table."
    q = o.get('ratio_quartiles', [float('nan')] * 2)
    plain = f"{o['plain_ms']:.2f} ms/step ({o['ratio_plain']:.2f}x)" if 'plain_ms' in o else '-'
    return (f"| {name} | {o['trainer_ms']:.2f} ms/step | {o['bare_ms']:.2f} ms/step | {o['ratio']:.3f} | {q[0]:.3f}-{q[1]:.3f} | "
            f"{goal} | {plain} | {o['blocks']} x {o['steps_per_block']} |")

def overhead_md(res) -> list[str]:
    "The trainer-overhead table: the digits UNet, and the tiny MLP where the fixed per-step costs dominate."
    o = res['overhead']
    rows = [overhead_row('digits UNet, batch 128', o, '<= 1.03')]
    if 'tiny' in o:
        threads = f", {o['tiny']['threads']} thread(s)" if 'threads' in o['tiny'] else ''
        rows.append(overhead_row(f'2-D MLP of width 64, batch 256{threads}', o['tiny'], '<= 1.10'))
    return ['## Trainer overhead (`benchmarks/overhead.py`)', '', *meta(res, 'overhead'),
            "The trainer's optimizer step (`Trainer.optimizer_steps`: loader, accumulation context, weighted loss share, "
            'clipping, the non-finite check, AdamW, schedule, EMA) against a bare PyTorch loop doing the same work (the same '
            'model, batch size, AdamW, schedule, clipping and EMA, its batches indexed straight from the tensors), in one '
            "process, alternating blocks of steps. The ratio is the median over block pairs of each pair's ratio; the "
            "machine's own block-to-block noise is about +-10%, hence the quartiles. The tiny case also times a "
            'torchcfm-style plain loop (AdamW and the loss only: no EMA, schedule or clipping); the gap to it is the price '
            'of that work, not of the trainer.', '',
            '| case | trainer | bare PyTorch | ratio (median of pairs) | quartiles | goal | plain loop | block pairs x steps |',
            '|---|---|---|---|---|---|---|---|', *rows, '', *([o['note'], ''] if o.get('note') else []),
            *([o['tiny']['note'], ''] if o.get('tiny', {}).get('note') else [])]

def perf_md(res) -> list[str]:
    "The tables of the performance suite."
    lines = []
    if 'overhead' in res: lines += overhead_md(res)
    if 'quality' in res:
        q = res['quality']
        lines += ['## Quality at budget, 3 seeds', '', *meta(res, 'quality'),
                  f"The defaults trained with seeds {', '.join(map(str, q['digits']['seeds']))}, scored (EMA weights) at kept "
                  'checkpoints and at the end; mean ± std over the seeds. Training time includes the periodic validation and strips.', '']
        d = q['digits']; c = d['config']['eval']
        lines += [f"**Digits** ({c['solver']}, {c['nfe']} NFE, CFG scale {c['cfg_scale']}; 1000 samples; the goal: FD <= 1.5x the "
                  'real-data floor within 3 minutes of CPU training):', '',
                  '| step | training time | accuracy | Fréchet distance | FD / real-data floor |', '|---|---|---|---|---|']
        lines += [f"| {r['step']} | {pm(r['seconds'], '.0f')} s | {pm(r['accuracy'], '.4f')} | {pm(r['fd'])} | {pm(r['fd_ratio'], '.2f')} |"
                  for r in d['rows']]
        m = q['moons']
        lines += ['', '**Moons** (2000 generated against 2000 fresh points; floors: two fresh draws):', '',
                  '| step | training time | W2 | W2 floor | energy distance | energy floor |', '|---|---|---|---|---|---|']
        lines += [f"| {r['step']} | {pm(r['seconds'], '.0f')} s | {pm(r['w2'], '.4f')} | {pm(r['w2_floor'], '.4f')} | "
                  f"{pm(r['energy'], '.5f')} | {pm(r['energy_floor'], '.5f')} |" for r in m['rows']]
        lines.append('')
    if 'samplers' in res:
        sm = res['samplers']
        lines += ['## Samplers (digits default, seed-0 model)', '', *meta(res, 'samplers'),
                  f"{sm['n_samples']} samples at CFG scale {sm['cfg_scale']}; NFE counts the conditional and unconditional passes "
                  'separately (a guided Heun step costs 4). The last column compares FD with Euler at 100 NFE (the goal: a '
                  '<= 10-NFE setting within 5%).', '',
                  '| solver | NFE | accuracy | FD | FD / floor | time per sample | FD vs Euler-100 |', '|---|---|---|---|---|---|---|']
        for r in sm['rows']:
            if 'error' in r: lines.append(f"| {r['solver']} | {r['nfe']} | - | - | - | - | too small for one step |"); continue
            lines.append(f"| {r['solver']} | {r['nfe']} | {r['accuracy']:.4f} | {r['fd']:.3f} | {r['fd_ratio']:.2f} | "
                         f"{r['ms_per_sample']:.2f} ms | {r['fd_vs_euler_max']:+.1%} |")
        ok = [r for r in sm['rows'] if 'fd' in r]
        for budget, how in ((10, 'counting both passes'), (20, 'counting a batched guided evaluation as one, i.e. <= 10 of those')):
            best = min((r for r in ok if r['nfe'] <= budget), key=lambda r: r['fd'])
            lines += ['', f"Best setting within {budget} NFE ({how}): {best['solver']} at {best['nfe']}, FD {best['fd_vs_euler_max']:+.1%} "
                          f"against Euler at {max(r['nfe'] for r in ok)} ({'within' if best['fd_vs_euler_max'] <= 0.05 else 'outside'} the 5% goal)."]
        lines.append('')
    if 'data' in res and 'rows' in res['data']:
        d = res['data']
        c = d.get('consumed_items_per_s')
        lines += ['## Data loading', '', *meta(res, 'data'),
                  f"Items per second each loader delivers (in this process, the trainer's batch sampler and collate), against the "
                  f"{c or float('nan'):.0f} items/s a digits-default training step consumes (batch {d['batch_size']}, from the overhead "
                  'benchmark). The PNG folder is random 64x64 grayscale images read through `rectiflow.data.files` (opened and decoded per '
                  'batch, batches of 32).', '',
                  '| data | loader delivers | headroom over a training step |', '|---|---|---|']
        lines += [f"| {x['data']} | {x['items_per_s']:.0f} items/s | {x['headroom'] or float('nan'):.1f}x |" for x in d['rows']]
        m = d['memory']
        lines += ['', f"Resident memory over one epoch of that folder ({m['items']} images, {m['batches']} batches, {m['data_mb']:.1f} MB "
                  f"decoded in all): {m['rss_start_mb']:.1f} MB after two batches, peak {m['rss_peak_mb']:.1f} MB, growth "
                  f"{m['growth_mb']:.2f} MB (`tests/data/test_own_data.py` requires < 16 MB and < 1/4 of the decoded size).", '']
    if 'optimisations' in res:
        e, c = res['optimisations']['ema'], res['optimisations']['channels_last']
        lines += ['## Optimisations, before and after', '', *meta(res, 'optimisations'),
                  '| what | before | after |', '|---|---|---|',
                  f"| EMA update of the digits UNet ({e['n_tensors']} tensors) | per-tensor loop {e['loop']:.3f} ms | one foreach update "
                  f"{e['foreach']:.3f} ms |",
                  f"| UNet forward+backward, batch 128 | contiguous {c['contiguous']:.2f} ms | channels_last {c['channels_last']:.2f} ms |", '']
    return lines

def results_md(res) -> str:
    "The measured tables of RESULTS.md (the prose around them is kept in RESULTS.head.md)."
    m, lines = res['machine'], []
    lines += [f"Machine: {m['cpus']} CPU cores ({m['processor']}), torch {m['torch']} with {m['threads']} threads, "
              f"Python {m['python']}; nothing else running.", '']
    if 'digits' in res:
        d, c = res['digits']['final'], res['digits']['config']
        lines += ['## Digits default (`make train`)', '', *meta(res, 'digits'),
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
        lines += ['## 2-D distributions', '', *meta(res, 'toys'),
                  '2000 generated points against 2000 fresh target points; the floor is the same distance between two fresh target draws.', '',
                  '| data | steps | training time | W2 | W2 noise floor | energy distance | energy noise floor |', '|---|---|---|---|---|---|---|']
        for k, r in res['toys'].items():
            if k == 'meta': continue
            f, c = r['final'], r['config']
            lines.append(f"| {data_name(c)} | {c['run']['steps']} | {f['train_seconds']:.0f} s | {f['w2']:.4f} | {f['w2_floor']:.4f} | "
                         f"{f['energy']:.5f} | {f['energy_floor']:.5f} |")
        lines.append('')
    if 'checkpoint' in res:
        c = res['checkpoint']
        lines += ['## Checkpoints (digits default)', '', *meta(res, 'checkpoint'),
                  'One training checkpoint after 3 optimizer steps (`checkpoints/step_N/`: weights, AdamW state, scheduler, '
                  'RNG states, EMA, flow generator, trainer state, manifest), written atomically and read back in process; '
                  'best of 5. The manifest column is the part of the save spent hashing every file (and its share of the '
                  'save); the check column is what verifying it costs before a read.', '',
                  '| size | save | manifest | load | check | files |', '|---|---|---|---|---|---|',
                  f"| {c['bytes'] / 1e6:.2f} MB | {c['save_s'] * 1e3:.0f} ms | "
                  + (f"{c['manifest_s'] * 1e3:.1f} ms ({100 * c['manifest_s'] / c['save_s']:.0f}%)" if 'manifest_s' in c else 'n/a')
                  + f" | {c['load_s'] * 1e3:.0f} ms | "
                  + (f"{c['check_s'] * 1e3:.1f} ms" if 'check_s' in c else 'n/a') + ' | '
                  + ', '.join(f"{k} ({v / 1e3:.0f} kB)" for k, v in sorted(c['files'].items())) + ' |', '']
    if 'gates' in res:
        lines += ['## Gates (digits default)', '', *meta(res, 'gates'), 'Each gate in process on the digits default (`rectiflow gate NAME`); '
                  'the second overfit row swaps in a velocity model that ignores its input (one learned constant).', '',
                  '| gate | result | time | what it found |', '|---|---|---|---|']
        lines += [f"| {k} | {'PASS' if g['passed'] else 'FAIL'} | {g['seconds']:.1f} s | {g['message']} |" for k, g in res['gates'].items()]
        lines.append('')
    if 'tasks' in res and 'filler' in res['tasks']:
        f, c = res['tasks']['filler']['final'], res['tasks']['filler']['config']
        bands = ', '.join(f"{k[5:]} {v:.2f}" for k, v in f.items() if k.startswith('psnr_') and k[5:] in ('sharp', 'hot', 'cool', 'diffuse'))
        lines += ['## Regression filler (`--task filler`)', '', *meta(res, 'tasks'),
                  'A lost band of four-band digit scenes predicted from the other three; PSNR under the exact display mapping, '
                  'per band then averaged, on all 360 validation scenes; the floor is the untrained model, the baseline the '
                  'mean of the visible bands.', '',
                  '| steps | training time | PSNR | untrained floor | gain | mean-of-visible baseline | per band |', '|---|---|---|---|---|---|---|',
                  f"| {c['run']['steps']} | {f['train_seconds']:.0f} s | {f['psnr']:.2f} dB | {f['psnr_floor']:.2f} dB | "
                  f"+{f['psnr_gain_db']:.2f} dB | {f['psnr_mean_visible']:.2f} dB | {bands} |", '']
    if 'tasks' in res and 'vae' in res['tasks']:
        v, cv = res['tasks']['vae']['final'], res['tasks']['vae']['config']
        lines += ['## Latents (`--task vae`, then `--task latent-digits`)', '', *meta(res, 'tasks'),
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
    if 'tasks' in res and 'lines' in res['tasks']:
        f, c = res['tasks']['lines']['final'], res['tasks']['lines']['config']
        lines += ['## Lines of digits (`--task lines`)', '', *meta(res, 'tasks'),
                  f"Rows of 1-8 digits by seeded synthetic writers; {f['n_lines'] if 'n_lines' in f else c['eval']['n_samples']} fixed "
                  'validation lines generated (EMA weights) and read back glyph by glyph by the reference classifier. CER against the '
                  'requested string; the gap is CER against a random other string minus CER against the requested one (goals: '
                  'CER <= 0.15, gap >= 0.5).', '',
                  '| steps | training time | sampler | CER | gap | unguided CER | real lines CER | real lines gap |', '|---|---|---|---|---|---|---|---|',
                  f"| {c['run']['steps']} | {f['train_seconds']:.0f} s | {sampler(c)} | {f['cer']:.4f} | {f['gap']:.3f} | "
                  f"{f['cer_unguided']:.4f} | {f['cer_real']:.4f} | {f['gap_real']:.3f} |", '']
    if 'tasks' in res and 'sequences' in res['tasks']:
        f, c = res['tasks']['sequences']['final'], res['tasks']['sequences']['config']
        lines += ['## Variable-length sequences (`--task sequences`)', '', *meta(res, 'tasks'),
                  'Frame sequences of a toy language generated from their token alignment under a frame budget of '
                  f"{c['data']['batch_size']} frames; read back by the exact template reader; the floor is the untrained model, "
                  '"real" a second real rendering of the same texts.', '',
                  '| steps | training time | figure | trained | untrained floor | real |', '|---|---|---|---|---|---|']
        for k, name in (('frame_acc', 'frame accuracy'), ('ter', 'token error rate'), ('template_rmse', 'template RMSE'),
                        ('residual_fd', 'residual FD'), ('style_fd', 'style FD')):
            lines.append(f"| {c['run']['steps']} | {f['train_seconds']:.0f} s | {name} | {f[k]:.4g} | {f[k + '_floor']:.4g} | {f[k + '_real']:.4g} |")
        lines.append('')
    if 'lr' in res:
        sys.path.insert(0, str(HERE)); from lr_sweep import table
        lines += ['## LR range test against a grid sweep (`benchmarks/lr_sweep.py`)', '', *meta(res, 'lr'),
                  table(json.loads((HERE / res['lr']['file']).read_text())), '']
    lines += perf_md(res)
    lines += few_steps_md(HERE / 'few_steps.json')
    sys.path.insert(0, str(HERE))
    import one_step
    lines += one_step.markdown(HERE / 'one_step.json')
    lines += repa_md(HERE / 'repa.json')
    lines += own_folder_md(HERE / 'own_folder.json')
    sys.path.insert(0, str(HERE))
    import import_time, threads, fsync
    lines += import_time.markdown(HERE / 'import_time.json') + threads.markdown(HERE)
    lines += fsync.markdown(HERE / 'fsync.json')
    import rooms
    lines += rooms.markdown(HERE / 'rooms.json')
    lines += gpu_md(HERE / 'gpu_results.json')
    return '\n'.join(lines)

def repa_md(path: Path) -> list[str]:
    "REPA against the plain digits default (`benchmarks/repa.py`): the FD ratio per scored step, mean over seeds."
    if not path.exists(): return []
    r = json.loads(path.read_text())
    st, sm = r['settings'], r['summary']
    enc = r['encoders'].values()
    lines = ['## Representation alignment (digits default, `benchmarks/repa.py`)', '',
             f"_Measured {r['date']} on this machine: the digits default for {st['steps']} steps with and without "
             f"REPA (weight {st['weight']}, until {st['until']}, projector {st['projector_dim']}, layer "
             f"{st['layer']}), seeds {', '.join(map(str, st['seeds']))}; the encoder a small ConvNeXt trained on each "
             f"seed's training digits only (validation accuracy {min(e['val_accuracy'] for e in enc):.3f}-"
             f"{max(e['val_accuracy'] for e in enc):.3f}), never the reference classifier; FD of 1000 samples over "
             'its real-data floor, mean ± std over the seeds._', '',
             '| step | plain FD ratio | REPA FD ratio | plain accuracy | REPA accuracy |', '|---|---|---|---|---|']
    for a, b in zip(sm['rows']['plain'], sm['rows']['repa']):
        lines.append(f"| {a['step']} | {a['fd_ratio'][0]:.2f} ± {a['fd_ratio'][1]:.2f} | {b['fd_ratio'][0]:.2f} ± "
                     f"{b['fd_ratio'][1]:.2f} | {a['accuracy'][0]:.4f} | {b['accuracy'][0]:.4f} |")
    reach = sm['repa_reaches_plain_final_fd_ratio_at_step']
    return lines + ['', f"Training time: REPA {sm['time_ratio']:.2f}x the plain run's "
                    f"({sm['train_seconds']['repa'][0]:.0f} s against {sm['train_seconds']['plain'][0]:.0f} s). "
                    f"Step at which REPA first reaches the plain run's final FD ratio, per seed: "
                    f"{', '.join(f'{s}: {v}' for s, v in reach.items())}.", '']

def own_folder_md(path: Path) -> list[str]:
    "An own-folder run with its quality passes (`benchmarks/own_folder.py`): figures per pass and their cost."
    if not path.exists(): return []
    r = json.loads(path.read_text())
    f = r['final']
    lines = ['## Your own folder: quality during training (`benchmarks/own_folder.py`)', '',
             f"_Measured {r['date']} on this machine: `rectiflow train --data FOLDER` on {r['folder']} (generated "
             f"by the script), {' '.join(r['args']) or 'at the defaults'}; protocol: {r['protocol']}._", '',
             '| step | val loss (EMA) | accuracy | control gap | FD | FD floor | FD / floor | pass seconds |',
             '|---|---|---|---|---|---|---|---|']
    for p in r['passes']:
        lines.append(f"| {p['step']} | {p['val_loss_ema']:.4f} | {p.get('accuracy', float('nan')):.3f} | "
                     f"{p.get('control_gap', float('nan')):.3f} | {p['fd']:.2f} | {p['fd_floor']:.2f} | "
                     f"{p['fd_ratio']:.2f} | {p['seconds']:.1f} |")
    args = dict(zip(r['args'][::2], r['args'][1::2]))
    steps = int(args.get('--steps', 800))
    step_seconds = (r['train_seconds'] - r['pass_seconds'] * len(r['passes'])) / steps
    at_defaults = 3 * r['pass_seconds'] / (800 * step_seconds)     # 800 steps, passes at 0, 400 and 800
    return lines + ['', f"Training {r['train_seconds']:.0f} s; a quality pass {r['pass_seconds']:.1f} s, "
                    f"{100 * r['pass_share']:.1f}% of the training time here ({len(r['passes'])} passes in {steps} "
                    f"steps of {step_seconds:.2f} s); at the defaults (800 steps, a pass every 400) "
                    f"{100 * at_defaults:.1f}%. The gauge trained once in "
                    f"{r['gauge_seconds']:.0f} s. Final ({f['n_samples']} samples): accuracy {f['accuracy']:.3f} "
                    f"(the gauge's ceiling on real images {f['accuracy_ceiling']:.3f}), FD {f['fd']:.2f} against "
                    f"the floor {f['fd_floor']:.2f}.", '']

def few_steps_md(path: Path) -> list[str]:
    "The few-step table (`benchmarks/few_steps.py`): the best setting within 4 and 8 NFE against Euler at 100 NFE."
    if not path.exists(): return []
    r = json.loads(path.read_text())
    lines = ['## Few-step sampling (digits default, `benchmarks/few_steps.py`)', '',
             f"_Measured {r['date']} on this machine: the seed runs of the quality benchmark (and a reflow student "
             'trained from one), swept over NFE 1-32, solvers euler / midpoint / heun and time shift 1 / 3; FD of 1000 '
             'samples, guided passes counted separately (CFG 1.2 for the teachers; the student samples unguided)._', '',
             '| model | best at <= 4 NFE | FD | vs Euler-100 | best at <= 8 NFE | FD | vs Euler-100 | Euler-100 FD |',
             '|---|---|---|---|---|---|---|---|']
    for name, v in r.items():
        if not isinstance(v, dict) or 'best4' not in v: continue
        b4, b8 = v['best4'], v['best8']
        say = lambda b: f"{b['solver']} {b['nfe']} NFE, shift {b['shift']:g}"
        lines.append(f"| {name.replace('_', ' ')} | {say(b4)} | {b4['fd']:.3f} | {b4['ratio']:.2f}x | {say(b8)} | "
                     f"{b8['fd']:.3f} | {b8['ratio']:.2f}x | {b4['reference']:.3f} |")
    for name, v in r.items():
        if isinstance(v, dict) and 'straightness' in v:
            teacher = r.get(name.replace('reflow', 'teacher'), {}).get('best4', {}).get('reference')
            against = (f"; its best at <= 4 NFE is {v['best4']['fd'] / teacher:.2f}x the teacher's Euler-100 FD "
                       f"({teacher:.3f})" if teacher else '')
            lines += ['', f"{name.replace('_', ' ')}: {v['pairs']} couplings and {v['steps']} steps in {v['seconds']} s "
                      f"(couplings included); straightness {v['straightness']:.4g} against the teacher's "
                      f"{v['straightness_teacher']:.4g}{against}."]
    return lines + ['', 'Goals: the best setting at <= 4 NFE within 10% of Euler-100 and at <= 8 NFE within 5%.', '']

GPU_GOALS = ('Goals (a benchmark, never a test): MFU >= 40% bf16 on the DiT step on an H100/H200-class device; '
             'regional compile >= 1.3x eager; checkpointing <= 0.5x peak memory at <= 1.35x step time.')

def gpu_md(path: Path) -> list[str]:
    "The GPU check's table (`bash benchmarks/gpu.sh`, written by gpu_train.py), or that it was not yet measured."
    lines = ['## GPU: `rectiflow train` on the device (`bash benchmarks/gpu.sh`)', '']
    if not path.exists():
        return lines + ['Not yet measured: no GPU has been lent to this project since the check was written. '
                        '`bash benchmarks/gpu.sh --smoke` runs the same code paths on a CPU in `make test`.', '',
                        GPU_GOALS, '']
    sys.path.insert(0, str(HERE)); from gpu_train import table
    r = json.loads(path.read_text())
    return lines + [f"Measured {r['date']} on {r['device']}, torch {r['torch']}, compile backend {r['compile_backend']}. "
                    'MFU is against the dense bf16 peak of the device table (989 TFLOP/s for an H100/H200; a bf16 '
                    'matrix product measured about 790 on the lent H200).', '', table(r['rows']), '', GPU_GOALS, '']

PERF = ['overhead', 'quality', 'samplers', 'data', 'optimisations']
ALL = ['digits', 'toys', 'checkpoint', 'gates', 'lr', 'tasks', *PERF]

def stamp() -> dict:
    "When, on what and with which versions a section was measured."
    import accelerate, diffusers
    return {'date': time.strftime('%Y-%m-%d'), **machine(), 'diffusers': diffusers.__version__, 'accelerate': accelerate.__version__}

def measure(name: str, results: dict):
    "Run benchmark `name`, storing its result (with its stamp) in `results`."
    import perf
    if name == 'digits': r = digits()
    elif name == 'toys': r = toys(['moons', 'checkerboard', '8gaussians'], [2000, 5000])
    elif name == 'checkpoint': r = checkpoint()
    elif name == 'gates': r = gates()
    elif name == 'lr': r = lr_sweep()
    elif name == 'tasks': r = tasks()
    elif name == 'overhead':
        from overhead import measure as overhead
        r = {**overhead(case='digits'), 'tiny': overhead(case='tiny')}
    elif name == 'quality':
        r = perf.quality_at_budget(run)
        results['digits'] = {**quality_run('digits', 0), 'meta': stamp()}     # seed 0 is the digits default's run
    elif name == 'samplers': r = perf.samplers(RUNS / 'quality' / 'digits_seed0')
    elif name == 'data': r = perf.data(results.get('overhead', {}).get('trainer_ms'))
    elif name == 'optimisations': r = {'ema': perf.ema_update(), 'channels_last': perf.channels_last()}
    results[name] = {**r, 'meta': stamp()}

def quality_run(name: str, seed: int) -> dict:
    "A quality run's record in the form `digits()` returns (its strip copied for RESULTS.md)."
    out = RUNS / 'quality' / f'{name}_seed{seed}'
    if name == 'digits': shutil.copy(sorted((out / 'samples').glob('step_*.png'))[-1], HERE / 'digits_strip.png')
    return run_record(out)

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--only', choices=ALL, action='append', help='run only these (repeatable)')
    ap.add_argument('--suite', choices=['perf', 'all'], default='perf',
                    help="perf (make bench, ~13 min): overhead, quality at budget, samplers, data, optimisations; all: also the rest")
    ap.add_argument('--render', action='store_true', help='only write RESULTS.md again from the stored results')
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    results_path = HERE / 'results.json'
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    if a.render:
        (HERE / 'RESULTS.md').write_text((HERE / 'RESULTS.head.md').read_text().rstrip() + '\n\n' + results_md(results))
        print(f"wrote {HERE / 'RESULTS.md'}")
        sys.exit(0)
    results['machine'] = machine()
    t0 = time.time()
    for name in a.only or (PERF if a.suite == 'perf' else ALL):
        t1 = time.time(); measure(name, results)
        print(f"[{name}: {time.time() - t1:.0f}s]", flush=True)
        results_path.write_text(json.dumps(results, indent=1) + '\n')
    results['wall_seconds'] = round(time.time() - t0)
    results_path.write_text(json.dumps(results, indent=1) + '\n')
    head = (HERE / 'RESULTS.head.md').read_text()
    (HERE / 'RESULTS.md').write_text(head.rstrip() + '\n\n' + results_md(results))
    print(f"wrote {results_path} and {HERE / 'RESULTS.md'} ({time.time() - t0:.0f}s)")
