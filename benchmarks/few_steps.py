"""Few-step sampling on the digits default: the quality (FD) sweep against NFE, solver and time shift of the seed
runs of the quality benchmark, and of a reflow student trained from one of them, beside Euler at 100 NFE.

    python benchmarks/few_steps.py               # after `run_benchmarks.py --only quality` (its seed runs)
    python benchmarks/few_steps.py --reflow 0    # also reflow seed 0's run and sweep the student

Writes benchmarks/few_steps.json, which `run_benchmarks.py --render` turns into a table in RESULTS.md.
"""
import argparse, json, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = HERE.parent / 'runs' / 'bench'
NFES, SOLVERS, SHIFTS = (1, 2, 4, 8, 16, 32), ('euler', 'midpoint', 'heun'), (1.0, 3.0)

def sweep(run: Path) -> dict:
    "The run's sweeps, one per time shift, with how long each took."
    from rectiflow.tools.sweep import nfe_sweep
    out = {}
    for shift in SHIFTS:
        t0 = time.time()
        out[str(shift)] = {**nfe_sweep(run, NFES, SOLVERS, shift=shift, progress=False), 'seconds': round(time.time() - t0)}
        print(f"{run.name} shift {shift}: {out[str(shift)]['seconds']} s", flush=True)
    return out

def best_within(sweeps: dict, max_nfe: int) -> dict:
    "The best row at most `max_nfe` NFE over the shifts, with its shift and its ratio to the reference."
    from rectiflow.tools.sweep import best_setting
    rows = [(s, best_setting(sw, max_nfe)) for s, sw in sweeps.items()]
    shift, row = min(((s, r) for s, r in rows if r is not None), key=lambda sr: sr[1]['fd'])
    ref = sweeps[shift]['reference']['fd']
    return {'shift': float(shift), 'solver': row['solver'], 'nfe': row['nfe'], 'fd': row['fd'], 'reference': ref,
            'ratio': row['fd'] / ref}

def reflow(seed: int, pairs: int, steps: int) -> tuple[Path, float]:
    "Reflow the digits run of `seed` through the CLI; the student's run and its wall-clock seconds."
    teacher, out = RUNS / 'quality' / f'digits_seed{seed}', RUNS / 'reflow' / f'digits_seed{seed}'
    t0 = time.time()
    p = subprocess.run([sys.executable, '-m', 'rectiflow.cli', 'train', '--task', 'reflow', '--task.teacher', str(teacher),
                        '--task.pairs', str(pairs), '--steps', str(steps), '--out', str(out), '--overwrite',
                        '--no-progress', '--run.seed', str(seed)], capture_output=True, text=True)
    if p.returncode: sys.exit(p.stderr[-3000:])
    return out, time.time() - t0

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seeds', default='0,1,2')
    ap.add_argument('--reflow', default='', help='seeds whose run is reflowed and swept too (e.g. 0)')
    ap.add_argument('--pairs', type=int, default=10000)
    ap.add_argument('--steps', type=int, default=600)
    a = ap.parse_args()
    path = HERE / 'few_steps.json'
    res = json.loads(path.read_text()) if path.exists() else {}
    res['date'] = time.strftime('%Y-%m-%d')
    for s in filter(None, a.seeds.split(',')):
        sw = sweep(RUNS / 'quality' / f'digits_seed{s}')
        res[f'teacher_seed{s}'] = {'sweeps': sw, 'best4': best_within(sw, 4), 'best8': best_within(sw, 8)}
        path.write_text(json.dumps(res, indent=1) + '\n')
    for s in filter(None, a.reflow.split(',')):
        run, seconds = reflow(int(s), a.pairs, a.steps)
        final = json.loads((run / 'run_info.json').read_text())['final']
        sw = sweep(run)
        res[f'reflow_seed{s}'] = {'sweeps': sw, 'best4': best_within(sw, 4), 'best8': best_within(sw, 8),
                                  'seconds': round(seconds), 'pairs': a.pairs, 'steps': a.steps,
                                  'straightness': final['straightness'],
                                  'straightness_teacher': final['straightness_teacher']}
        path.write_text(json.dumps(res, indent=1) + '\n')
    for k, v in res.items():
        if isinstance(v, dict) and 'best4' in v:
            print(k, {n: (b['solver'], b['nfe'], b['shift'], round(b['ratio'], 3)) for n, b in (('<=4', v['best4']), ('<=8', v['best8']))})

if __name__ == '__main__':
    main()
