"""The rooms a reader passes through following `cfg` from `train()` to the first optimizer step.

A moons run of a few steps is traced (`sys.setprofile`) from the call of `rectiflow.train` until torch's optimizer
takes its first step; every call into the package is attributed to the module that holds the called function. The
figures: the modules entered, the folders (rooms) they lie in, and the **entries into what is written to disk**: the
calls from a function outside the persistence modules into one inside them, counted once per (caller, callee) pair,
which is what a reader following the code meets (a loop that calls one function many times is one entry).

Which modules are persistence is `--persistence` (dotted module names or folders ending in `.`); the default is
the store folder and the trainer's checkpoint parts, so that the figure of an older layout is taken with its own
list (`--persistence run.files,run.checkpoint,run.checkpointer,run.exports,run.cards,run.guards`).

    python benchmarks/rooms.py [--persistence store.,run.checkpointer] [--json FILE] [--label NAME]
"""
import argparse, contextlib, json, sys, tempfile
from pathlib import Path

DEFAULT = 'store.,run.checkpointer'


def module_of(frame) -> str | None:
    "The package module (`run.trainer`) of `frame`'s function, None outside the package."
    name = frame.f_globals.get('__name__', '')
    return name.removeprefix('rectiflow.') if name.startswith('rectiflow.') else None


def is_persistence(mod: str | None, rooms: list[str]) -> bool:
    "Whether module `mod` is one of `rooms` (a module, or a folder given as `name.`)."
    return mod is not None and any(mod == r or (r.endswith('.') and mod.startswith(r)) for r in rooms)


def package_caller(frame):
    "The nearest frame above `frame` that runs the package's code (through contextlib, functools...), if any."
    caller = frame.f_back
    while caller is not None and module_of(caller) is None: caller = caller.f_back
    return caller


class Tracer:
    "The package's calls until the optimizer's first step: modules entered and the entries into persistence."
    def __init__(self, rooms: list[str]):
        self.rooms, self.modules, self.entries, self.done = rooms, set(), set(), False

    def __call__(self, frame, event, arg):
        if event != 'call' or self.done: return
        code = frame.f_code
        if code.co_name == 'step' and '/torch/optim/' in code.co_filename and 'lr_scheduler' not in code.co_filename:
            self.done = True
            sys.setprofile(None)
            return
        mod = module_of(frame)
        if mod is None or code.co_name == '<module>' or code.co_filename.startswith('<'): return   # imports, made code
        self.modules.add(mod)
        caller = package_caller(frame)
        here = module_of(caller) if caller is not None else None
        if is_persistence(mod, self.rooms) and not is_persistence(here, self.rooms):
            self.entries.add((f'{here}.{caller.f_code.co_name}' if caller else 'outside', f'{mod}.{code.co_name}'))


def traced_run(rooms: list[str]) -> Tracer:
    "A few steps of the moons preset in a temporary folder, traced from `train()` to the first optimizer step."
    import rectiflow
    from rectiflow.tasks.registry import preset
    cfg = preset(data='moons')
    with tempfile.TemporaryDirectory() as d:
        cfg.run.out, cfg.run.steps = str(Path(d) / 'run'), 3
        cfg.eval.every, cfg.eval.n_samples = 3, 200
        tracer = Tracer(rooms)
        sys.setprofile(tracer)
        try:
            with contextlib.redirect_stdout(sys.stderr): rectiflow.train(cfg)       # the run's lines aside
        finally: sys.setprofile(None)
    return tracer


def markdown(path: Path) -> list[str]:
    "The RESULTS.md section of the stored counts: each label's modules, folders and entries into persistence."
    if not path.exists(): return []
    runs = json.loads(path.read_text())
    lines = ['## Rooms from `train()` to the first optimizer step (`benchmarks/rooms.py`)', '',
             'A moons run traced from `rectiflow.train(cfg)` until torch\'s optimizer takes its first step: the package '
             'modules whose functions ran, the folders they lie in, and the entries into the modules that write to disk '
             '(calls from outside them into them, once per caller and callee).', '',
             '| layout | persistence modules | modules | folders | entries into persistence |', '|---|---|---|---|---|']
    lines += [f"| {label} | {r['persistence']} | {r['modules']} | {len(r['folders'])} | {r['entries']} |"
              for label, r in runs.items()]
    return lines + ['']


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--persistence', default=DEFAULT)
    ap.add_argument('--json')
    ap.add_argument('--label', default='now')
    args = ap.parse_args()
    t = traced_run(args.persistence.split(','))
    folders = sorted({m.split('.')[0] if '.' in m else m for m in t.modules})
    out = {'modules': len(t.modules), 'folders': folders, 'persistence': args.persistence,
           'entries': len(t.entries), 'entered': sorted({m for m in t.modules if is_persistence(m, t.rooms)}),
           'pairs': sorted(' -> '.join(p) for p in t.entries)}
    print(json.dumps(out, indent=1))
    if args.json:
        path = Path(args.json)
        old = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**old, args.label: out}, indent=1) + '\n')


if __name__ == '__main__':
    main()
