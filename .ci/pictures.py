"""Keep the pictures of the notebooks' cheap cells as committed outputs, so a reader on the web sees them.

Runs each notebook as `nbdev_test` does (the same skipped cells: `slow`, `gpu`, `eval: false`), timing every cell;
a cell that showed a picture (a PNG: plots, strips, grids) in under `--max-seconds` keeps those images as its outputs,
and every other output is dropped. Text and widget outputs are never kept: they change from run to run (timings,
paths) or need a live kernel.

    python .ci/pictures.py [NOTEBOOK ...] [--max-seconds 10]      # then nbdev_clean; default: every notebook in nbs/"""
import argparse, os, sys, time
from pathlib import Path
from execnb.nbio import read_nb, write_nb
from execnb.shell import CaptureShell
from fastcore.foundation import working_directory
from nbdev.process import NBProcessor
from nbdev.frontmatter import FrontmatterProc

ROOT = Path(__file__).resolve().parent.parent
SKIP_FLAGS = {'slow', 'gpu'}

def skipped(cell) -> bool:
    "Whether `nbdev_test` skips `cell` (not code, a flagged cell, `eval: false`)."
    if cell.cell_type != 'code': return True
    directives = getattr(cell, 'directives_', {}) or {}
    if directives.get('eval:', [''])[0].lower() == 'false': return True
    return bool(SKIP_FLAGS & directives.keys())

def pictures(outputs) -> list:
    "The PNG images among a cell's outputs, as display outputs without their text forms."
    keep = []
    for o in outputs or []:
        data = o.get('data', {}) if hasattr(o, 'get') else {}
        if 'image/png' in data and all(k['data']['image/png'] != data['image/png'] for k in keep):
            keep.append({'output_type': 'display_data', 'metadata': {}, 'data': {'image/png': data['image/png']}})
    return keep

def run_timed(path: Path, max_seconds: float) -> tuple[dict, int]:
    "Run the notebook at `path`; the pictures of each cheap picture cell by cell id, and the cells run."
    nb = NBProcessor(path, procs=FrontmatterProc, process=True).nb
    shell, kept, ran = CaptureShell(path, mpl_format='png'), {}, 0
    with working_directory(path.parent):
        for i, cell in enumerate(nb.cells):
            if skipped(cell): continue
            t0 = time.time()
            shell.cell(cell)
            ran += 1
            if shell.exc: raise RuntimeError(f"{path.name}, cell {i}: {shell.exc!r}")
            images = pictures(getattr(cell, 'outputs', []))
            if images and time.time() - t0 < max_seconds: kept[cell.id] = images
    return kept, ran

def keep_pictures(path: Path, max_seconds: float) -> int:
    "Rewrite the notebook at `path` with only its cheap cells' pictures as outputs; how many cells keep one."
    kept, _ = run_timed(path, max_seconds)
    nb = read_nb(path)
    for cell in nb.cells:
        if cell.cell_type == 'code': cell.outputs = kept.get(cell.id, [])
    write_nb(nb, path)
    return len(kept)

def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('notebooks', nargs='*')
    ap.add_argument('--max-seconds', type=float, default=10.0)
    a = ap.parse_args()
    os.environ['IN_TEST'] = '1'                  # as nbdev_test: widgets start no background threads
    paths = [Path(p) for p in a.notebooks] or sorted((ROOT / 'nbs').glob('**/*.ipynb'))
    for path in paths:
        t0 = time.time()
        n = keep_pictures(path.resolve(), a.max_seconds)
        print(f"{path.name}: {n} picture cell(s) kept ({time.time() - t0:.0f}s)", flush=True)
    return 0

if __name__ == '__main__': sys.exit(main())
