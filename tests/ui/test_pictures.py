"""The chapters keep pictures of what their widgets and plots show, as committed outputs (`.ci/pictures.py`), so a
reader of a notebook on the web sees them without a kernel."""
import json
from pathlib import Path
import pytest

NBS = Path(__file__).resolve().parents[2] / 'nbs'

# chapter: what the cell with the picture runs
PICTURES = {'11_flow.sampling': 'generate(ring', '13_flow.meanflow': "'1 mean step'",
            '33_run.trainer': 'LossCurves(watched)', '43_tools.lr_find': 'LRFinder(', '45_tools.gates': 'GateBoard(',
            '46_ui.widgets': 'lc._repr_mimebundle_()',
            # the task chapters and the tutorials: what they train (reflow's, in a slow cell: the couplings it trains on)
            '34_tasks.flow': 'fig = run.figure(run.sample(500), run.batch(500))', '35_tasks.latents': 'fig = run.figure(run.sample(seed=3)',
            '36_tasks.filler': 'fig = run.figure(run.sample(8), run.batch(8))',
            '37_tasks.lines': 'fig = run.figure(run.sample(3), run.batch(3))',
            '38_tasks.sequences': 'fig = run.figure(run.sample(3), run.batch(3))',
            '40_tasks.reflow': "label='its sample x1'", 'tutorials/digits': 'SampleGrid(out)',
            'tutorials/own_data': 'held-out writers above, 40-step model below',
            'tutorials/your_task': 'fig = s.figure(x, batch)'}

def picture_cells(chapter: str) -> list[str]:
    "The sources of the chapter's code cells whose committed outputs hold a PNG."
    nb = json.loads((NBS / f'{chapter}.ipynb').read_text())
    return [''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'code'
            and any('image/png' in o.get('data', {}) for o in c.get('outputs', []))]

@pytest.mark.parametrize('chapter', list(PICTURES))
def test_the_chapter_keeps_a_picture_of_its_widget(chapter):
    assert any(PICTURES[chapter] in src for src in picture_cells(chapter)), picture_cells(chapter)

def test_only_pictures_are_kept():
    for path in NBS.glob('**/*.ipynb'):
        for c in json.loads(path.read_text())['cells']:
            for o in c.get('outputs', []):
                assert set(o.get('data', {})) == {'image/png'}, (path.name, c['id'], list(o.get('data', {})))
