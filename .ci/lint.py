"""Lint the exported package with ruff: lines of at most 120 characters and one statement per line (E501, E702, E703);
and the notebooks' exported cells: none over 60 lines, their median at most 10 (a reader takes a cell in at a glance).

nbdev writes each module's `__all__`, wrapping the list at 120 characters and then putting `__all__ = ` in front of
its first line; that one generated line is the only one let through.

    python .ci/lint.py        # exit 1 and the findings when there are any"""
import json, statistics, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = [sys.executable, '-m', 'ruff', 'check', 'rectiflow', '--exclude', 'rectiflow/_modidx.py', '--select', 'E501,E702,E703',
        '--line-length', '120', '--output-format', 'json', '--no-cache']

def generated_all(finding: dict) -> bool:
    "Whether `finding` is E501 on nbdev's `__all__ = [...` line."
    if finding['code'] != 'E501': return False
    line = Path(finding['filename']).read_text().splitlines()[finding['location']['row'] - 1]
    return line.startswith('__all__ = [')

MAX_CELL, MAX_MEDIAN = 60, 10

def exported_cells() -> list[tuple[str, int, int]]:
    "(notebook, cell index, lines) of every exported cell: its non-blank lines, nbdev's directives left out."
    rows = []
    for nb in sorted((ROOT / 'nbs').rglob('*.ipynb')):
        for i, c in enumerate(json.loads(nb.read_text())['cells']):
            src = ''.join(c['source'])
            if c['cell_type'] != 'code' or not src.lstrip().startswith('#| export'): continue
            rows.append((str(nb.relative_to(ROOT)), i, sum(1 for l in src.splitlines() if l.strip() and not l.startswith('#|'))))
    return rows

def cell_findings() -> list[str]:
    "Exported cells over MAX_CELL lines, and a median over MAX_MEDIAN."
    rows = exported_cells()
    out = [f"{nb} cell {i}: an exported cell of {n} lines (at most {MAX_CELL}: a skeleton, then @patch cells)"
           for nb, i, n in rows if n > MAX_CELL]
    median = statistics.median(n for *_, n in rows) if rows else 0
    if median > MAX_MEDIAN: out.append(f"the median exported cell is {median} lines (at most {MAX_MEDIAN})")
    return out

def main() -> int:
    p = subprocess.run(RUFF, cwd=ROOT, capture_output=True, text=True)
    if p.returncode not in (0, 1): sys.exit(p.stderr)
    findings = [f for f in json.loads(p.stdout or '[]') if not generated_all(f)]
    for f in findings:
        where = Path(f['filename']).relative_to(ROOT)
        print(f"{where}:{f['location']['row']}:{f['location']['column']}: {f['code']} {f['message']}")
    cells = cell_findings()
    for f in cells: print(f)
    n = len(findings) + len(cells)
    if n: print(f"{n} lint finding(s): fix them in the notebooks, then nbdev_export.")
    return 1 if n else 0

if __name__ == '__main__': sys.exit(main())
