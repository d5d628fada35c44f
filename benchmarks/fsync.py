"""What flushing a checkpoint and an export to the disk before publishing them costs, on the digits default.

A checkpoint (and the final/ and best/ exports) is written aside and renamed into place; before the rename its files
and folders are fsync'd, and after it the run folder, so that a power cut never leaves a "whole" checkpoint whose
tensors did not reach the disk while the older ones were already deleted. This script times a digits-default
checkpoint save and a final/ export with the flushes and without them (the flushes replaced by no-ops), in
alternating blocks in one process, in a folder on the disk the runs use (not a tmpfs), and reports the medians.

    python benchmarks/fsync.py [--repeats 15] [--where runs/bench] [--json benchmarks/fsync.json]
"""
import argparse, json, statistics, tempfile, time
from contextlib import contextmanager, nullcontext
from pathlib import Path
import rectiflow.store.files as files
from run_benchmarks import stepped_digits_trainer

@contextmanager
def no_flushes():
    "The flushes made no-ops for the block."
    tree, folder = files.fsync_tree, files.fsync_dir
    files.fsync_tree = files.fsync_dir = lambda *a, **k: None
    try: yield
    finally: files.fsync_tree, files.fsync_dir = tree, folder

def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeats', type=int, default=15)
    ap.add_argument('--where', default=str(Path(__file__).resolve().parent.parent / 'runs' / 'bench'))
    ap.add_argument('--json', default=None)
    a = ap.parse_args()
    Path(a.where).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=a.where) as d:
        tr = stepped_digits_trainer(f'{d}/run')
        t = {'checkpoint': ([], []), 'export': ([], [])}
        for _ in range(a.repeats):
            for flushed in (True, False):
                with no_flushes() if not flushed else nullcontext():
                    t['checkpoint'][not flushed].append(timed(tr.save_checkpoint))
                    t['export'][not flushed].append(timed(lambda: tr.checkpointer.export(tr, 'final')))
    r = {k: {'flushed_ms': 1e3 * statistics.median(v[0]), 'unflushed_ms': 1e3 * statistics.median(v[1])}
         for k, v in t.items()}
    for k, v in r.items():
        print(f"{k}: {v['flushed_ms']:.1f} ms flushed, {v['unflushed_ms']:.1f} ms without "
              f"(+{v['flushed_ms'] - v['unflushed_ms']:.1f} ms)")
    r['date'], r['repeats'] = time.strftime('%Y-%m-%d'), a.repeats
    if a.json: Path(a.json).write_text(json.dumps(r, indent=2) + '\n')

def markdown(path: Path) -> list[str]:
    "The RESULTS.md section of the stored measurement, where there is one."
    if not path.exists(): return []
    r = json.loads(path.read_text())
    rows = [f"| {k} | {v['flushed_ms']:.1f} ms | {v['unflushed_ms']:.1f} ms | +{v['flushed_ms'] - v['unflushed_ms']:.1f} ms |"
            for k, v in r.items() if isinstance(v, dict)]
    return ['## Flushing checkpoints and exports to the disk (`benchmarks/fsync.py`)', '',
            f"_Measured {r.get('date', '')}, digits default, median of {r.get('repeats', '')} alternating saves in a "
            "folder on the runs' disk._", '',
            'What fsyncing a checkpoint (and an export) before the rename publishes it, and the folder after, costs.', '',
            '| write | flushed | without | cost |', '|---|---|---|---|', *rows, '']

if __name__ == '__main__': main()
