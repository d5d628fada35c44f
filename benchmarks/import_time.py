"""How long the `rectiflow` command takes to answer what needs no training: --help, and a refusal of bad input.

Each case runs in a fresh interpreter, as a user runs it (the console script `rectiflow` beside this Python), from an
empty temporary folder; the figure is the median wall time of `--repeats` runs (the machine's load moves single runs
by tens of percent), with the fastest and slowest beside it. A second, separate run of each case through
`rectiflow.cli.main` lists the heavy libraries it imported: what the time goes to (`python -X importtime` says more).
The load average is recorded before and after, with a note of what else ran (`--note`); each `--label` is kept beside
the others in the JSON, and `--md` prints them as the section of RESULTS.md.

    python benchmarks/import_time.py [--repeats 5] [--label after] [--note '...'] [--json benchmarks/import_time.json]
    python benchmarks/import_time.py --md
"""
import argparse, json, os, platform, statistics, subprocess, sys, tempfile, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECTIFLOW = str(Path(sys.executable).parent / 'rectiflow')
HEAVY = ('torch', 'diffusers', 'transformers', 'peft', 'accelerate', 'datasets', 'scipy', 'sklearn', 'matplotlib')
CASES = {'rectiflow --help': [RECTIFLOW, '--help'],
         'rectiflow train --help': [RECTIFLOW, 'train', '--help'],
         'train --task nosuch': [RECTIFLOW, 'train', '--task', 'nosuch'],
         'train --run.steps -3': [RECTIFLOW, 'train', '--run.steps', '-3'],
         'sample --solver rk4 RUN': [RECTIFLOW, 'sample', '--solver', 'rk4', 'RUN'],
         'import rectiflow.cli': [sys.executable, '-c', 'import rectiflow.cli']}
PROBE = """import sys
from rectiflow.cli import main
if sys.argv[1:]:
    try: main(sys.argv[1:])
    except SystemExit: pass
print('heavy:' + ','.join(m for m in {heavy!r} if m in sys.modules), file=sys.__stderr__)"""

def wall(cmd: list[str], cwd: str) -> float:
    "Seconds `cmd` took, start to exit."
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0

def heavy_imports(cmd: list[str], cwd: str) -> str:
    "The heavy libraries a case imported: its arguments through `main` in a fresh interpreter (none: the import)."
    args = cmd[1:] if cmd[0] == RECTIFLOW else []
    p = subprocess.run([sys.executable, '-c', PROBE.format(heavy=HEAVY), *args], cwd=cwd, capture_output=True,
                       text=True)
    return next((l[len('heavy:'):] for l in reversed(p.stderr.splitlines()) if l.startswith('heavy:')), '?')

def measure(repeats: int) -> dict:
    "Each case's median, fastest and slowest wall seconds over `repeats` fresh runs, and what it imported."
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for name, cmd in CASES.items():
            wall(cmd, d)                                   # warm the file cache: every later run finds it warm too
            times = [wall(cmd, d) for _ in range(repeats)]
            out[name] = {'median_s': round(statistics.median(times), 3), 'min_s': round(min(times), 3),
                         'max_s': round(max(times), 3), 'heavy': heavy_imports(cmd, d)}
            print(f"{name:<26} {out[name]['median_s']:6.2f} s  [{min(times):.2f}, {max(times):.2f}]  "
                  f"{out[name]['heavy'] or '-'}", flush=True)
    return out

def markdown(path: Path) -> list[str]:
    "The RESULTS.md section of the stored figures: each label's medians; what the first and the last label imported."
    if not path.exists(): return []
    runs = json.loads(path.read_text())
    first, last = list(runs)[0], list(runs)[-1]
    when = '; '.join(f"{k}: {r['when']}, load average (1 min) {r['load_before'][0]:.2f} before and "
                     f"{r['load_after'][0]:.2f} after" + (f", {r['note']}" if r.get('note') else '')
                     for k, r in runs.items())
    lines = ["## The command's answer without training (`benchmarks/import_time.py`)", '',
             f"Wall seconds from start to exit, the median of {runs[last]['repeats']} fresh processes each (the "
             "console script `rectiflow`, and a bare import), and the heavy libraries each case imported. Goal: "
             "under 1.5 s for `--help`, `train --help` and a refusal of bad input, on this 2-core machine. "
             f"{when}. The measurement's own process makes a load of about 1.", '',
             '| case | ' + ' | '.join(runs) + f' | imported {first} | imported {last} |',
             '|---|' + '---|' * (len(runs) + 2)]
    for case in runs[last]['cases']:
        times = [f"{r['cases'][case]['median_s']:.2f} s" if case in r['cases'] else '-' for r in runs.values()]
        heavy = [runs[k]['cases'].get(case, {}).get('heavy', '-').replace(',', ', ') or 'none' for k in (first, last)]
        lines.append(f"| `{case}` | {' | '.join(times + heavy)} |")
    return lines + ['']

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeats', type=int, default=5)
    ap.add_argument('--label', default='current', help='the key these figures are kept under in the JSON')
    ap.add_argument('--json', default=str(HERE / 'import_time.json'))
    ap.add_argument('--note', default='', help='what else the machine was doing, for the record')
    ap.add_argument('--md', action='store_true', help="only print the stored figures' RESULTS.md section")
    a = ap.parse_args()
    if a.md: return print('\n'.join(markdown(Path(a.json))))
    load_before = os.getloadavg()
    print(f"{'case':<26} {'median':>8}  [min, max]  heavy libraries imported")
    cases = measure(a.repeats)
    record = {'cases': cases, 'repeats': a.repeats, 'load_before': [round(x, 2) for x in load_before],
              'load_after': [round(x, 2) for x in os.getloadavg()], 'cpus': os.cpu_count(),
              'python': platform.python_version(), 'when': time.strftime('%Y-%m-%d %H:%M'), 'note': a.note}
    print(f"load average (1, 5, 15 min): before {record['load_before']}, after {record['load_after']}")
    path = Path(a.json)
    saved = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps({**saved, a.label: record}, indent=1) + '\n')
    print(f"wrote {path} ({a.label})")

if __name__ == '__main__': main()
