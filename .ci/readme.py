"Render README.md from nbs/index.ipynb (Quarto, which nbdev_readme needs, is not installable here)."
import json, re, sys
from pathlib import Path

def continuation(prev: str, src: str) -> str | None:
    """`src` as the rest of the list or table `prev` ends with, where a long one goes on in the next cell (a table's
    header repeated there left out); None where `src` starts afresh."""
    before, lines = prev.split('\n'), src.split('\n')
    if lines[0].startswith('- ') and before[-1].startswith(('- ', '  ')): return src
    if not (lines[0].startswith('|') and before[-1].startswith('|')): return None
    k = len(before)
    while k > 0 and before[k - 1].startswith('|'): k -= 1
    return '\n'.join(lines[2:]) if lines[:2] == before[k:k + 2] else src

def render(nb_path: Path) -> str:
    cells = json.loads(nb_path.read_text())['cells']
    parts = []
    for c in cells:
        src = ''.join(c['source']).strip()
        if c['cell_type'] == 'markdown':
            rest = continuation(parts[-1], src) if parts else None
            if rest is None: parts.append(src)
            else: parts[-1] += '\n' + rest
        elif c['cell_type'] == 'code' and not re.search(r'^#\|\s*(hide|export)', src, re.M):
            parts.append('```python\n' + '\n'.join(l for l in src.splitlines() if not l.startswith('#|')) + '\n```')
    text = '\n\n'.join(parts) + '\n'
    return re.sub(r'\]\((images/[^)]+)\)', r'](nbs/\1)', text)      # the notebook's images, seen from the repository root

if __name__ == '__main__':
    root = Path(__file__).resolve().parent.parent
    text = render(root / 'nbs' / 'index.ipynb')
    if '--check' in sys.argv:
        if (root / 'README.md').read_text() != text: sys.exit('README.md is stale: run `make readme` and commit it.')
    else: (root / 'README.md').write_text(text)
