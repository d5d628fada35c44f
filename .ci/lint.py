"""Lint the exported package with ruff: lines of at most 120 characters and one statement per line (E501, E702, E703).

nbdev writes each module's `__all__`, wrapping the list at 120 characters and then putting `__all__ = ` in front of
its first line; that one generated line is the only one let through.

    python .ci/lint.py        # exit 1 and the findings when there are any"""
import json, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = [sys.executable, '-m', 'ruff', 'check', 'rectiflow', '--exclude', 'rectiflow/_modidx.py', '--select', 'E501,E702,E703',
        '--line-length', '120', '--output-format', 'json', '--no-cache']

def generated_all(finding: dict) -> bool:
    "Whether `finding` is E501 on nbdev's `__all__ = [...` line."
    if finding['code'] != 'E501': return False
    line = Path(finding['filename']).read_text().splitlines()[finding['location']['row'] - 1]
    return line.startswith('__all__ = [')

def main() -> int:
    p = subprocess.run(RUFF, cwd=ROOT, capture_output=True, text=True)
    if p.returncode not in (0, 1): sys.exit(p.stderr)
    findings = [f for f in json.loads(p.stdout or '[]') if not generated_all(f)]
    for f in findings:
        where = Path(f['filename']).relative_to(ROOT)
        print(f"{where}:{f['location']['row']}:{f['location']['column']}: {f['code']} {f['message']}")
    if findings: print(f"{len(findings)} lint finding(s): fix them in the notebooks, then nbdev_export.")
    return 1 if findings else 0

if __name__ == '__main__': sys.exit(main())
