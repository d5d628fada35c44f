"""The model cards a run writes into best/ and final/, and `rectiflow export`: the cards, read back by huggingface_hub,
say what the run's records say; the exported folder loads, samples and evaluates like the run; bad input is one line."""
import json, shutil
from pathlib import Path
from huggingface_hub import ModelCard
from conftest import cli_in_process, records
from rectiflow.store.files import check_manifest

def card(folder) -> ModelCard:
    "The model card of the export in `folder`, parsed by huggingface_hub."
    return ModelCard.load(Path(folder) / 'README.md')

def figures(c: ModelCard) -> dict:
    "The figures of card `c`'s model-index, by name."
    return {r.metric_type: r.metric_value for r in c.data.eval_results}

def final_figures(run) -> dict:
    "The quality figures and final EMA validation loss of the run's final record (what its final/ card must hold)."
    final = records(run)[-1]
    assert final['kind'] == 'final', final
    return {k: final[k] for k in ('w2', 'w2_floor', 'energy', 'energy_floor', 'val_loss_ema')}

def test_final_card_holds_the_final_record_the_gates_the_fingerprint_and_the_strip(tiny_run):
    c, final = card(tiny_run / 'final'), records(tiny_run)[-1]
    assert (c.data.library_name, c.data.license, c.data.pipeline_tag) == ('rectiflow', 'apache-2.0', None)
    assert c.data.tags == ['rectiflow', 'flow', 'points', 'moons']
    assert figures(c) == final_figures(tiny_run)
    state = json.loads((tiny_run / 'checkpoints' / 'step_000020' / 'trainer_state.json').read_text())
    info = json.loads((tiny_run / 'final' / 'info.json').read_text())
    assert state['fingerprint'] and info['fingerprint'] == state['fingerprint']
    assert c.data.rectiflow == {'export': 'final', 'task': 'flow', 'step': 20, 'status': 'completed', 'data': 'moons',
                                'data_fingerprint': state['fingerprint'], 'gates_passed': [], 'gates_failed': []}
    assert f"- W2 {final['w2']:.4f} (noise floor {final['w2_floor']:.4f})" in c.text      # the task's own summary
    assert f"| `w2` | {final['w2']:.6g} | floor {final['w2_floor']:.4g} |" in c.text
    assert '![samples at step 20](samples.png)' in c.text
    assert (tiny_run / 'final' / 'samples.png').read_bytes() == (tiny_run / 'samples' / 'step_000020.png').read_bytes()
    assert 'No gates were recorded' in c.text and 'steps: 20' in c.text                      # the whole config

def test_best_card_says_what_was_known_when_it_was_written(tiny_run):
    info, c = json.loads((tiny_run / 'best' / 'info.json').read_text()), card(tiny_run / 'best')
    val = next(r for r in records(tiny_run) if r['kind'] == 'val' and r['step'] == info['step'])
    assert figures(c) == {'val_loss_ema': info['val_loss_ema']} == {'val_loss_ema': val['val_loss_ema']}
    assert c.data.rectiflow['export'] == 'best' and c.data.rectiflow['step'] == info['step']
    assert 'status' not in c.data.rectiflow and 'not on these weights' in c.text

def test_export_writes_a_folder_that_loads_samples_and_evaluates_like_the_run(tiny_run, tmp_path):
    from rectiflow.api import load_run
    out = tmp_path / 'hub' / 'moons-tiny'
    p = cli_in_process('export', tiny_run, out, '--license', 'mit')
    assert p.returncode == 0, p.stderr
    assert f'hf upload YOUR_NAME/moons-tiny {out}' in p.stdout
    assert sorted(x.name for x in out.iterdir()) == ['README.md', 'config.json', 'info.json', 'manifest.json', 'model',
                                                     'samples.png']
    assert check_manifest(out)
    assert sorted(x.name for x in out.parent.iterdir()) == ['moons-tiny']                  # nothing left beside it
    c = card(out)
    assert (c.data.model_name, c.data.license, figures(c)) == ('moons-tiny', 'mit', final_figures(tiny_run))
    assert json.loads((out / 'config.json').read_text()) == json.loads((tiny_run / 'config.json').read_text())
    assert load_run(out).sample(64, seed=3).tolist() == load_run(tiny_run).sample(64, seed=3).tolist()
    s = cli_in_process('sample', out, '--n', '50', cwd=tmp_path)
    assert s.returncode == 0 and (tmp_path / 'samples' / 'moons-tiny_seed0.png').is_file(), s.stderr
    assert not (out / 'samples').exists()                                   # the folder to upload is left as it is
    assert not (out / '.lock').exists()                                     # a folder to upload holds no lock
    e = cli_in_process('evaluate', out, '--json')
    assert e.returncode == 0, e.stderr
    assert abs(json.loads(e.stdout)['val_loss_ema'] - records(tiny_run)[-1]['val_loss_ema']) < 1e-6

def test_export_refuses_bad_input_in_one_line_and_replaces_only_an_export(tiny_run, tmp_path):
    busy, unfinished = tmp_path / 'busy', tmp_path / 'unfinished'
    busy.mkdir()
    (busy / 'notes.txt').write_text('mine')
    unfinished.mkdir()
    shutil.copy(tiny_run / 'config.json', unfinished)
    before = sorted(str(p) for p in tiny_run.rglob('*'))
    cases = [((tmp_path / 'nope', tmp_path / 'a'), 'Run directory'), ((busy, tmp_path / 'a'), 'is not a rectiflow run'),
             ((unfinished, tmp_path / 'a'), 'holds no final/ export (status unknown: export --which best'),
             ((tiny_run, busy), 'is not empty and holds no export'), ((tiny_run, tiny_run / 'best'), 'is an export of'),
             ((tiny_run, tiny_run / 'final' / 'x'), 'overlap'), ((tiny_run, busy / 'notes.txt'), 'is a file'),
             ((tiny_run, tmp_path / 'a', '--which', 'last'), "argument --which: invalid choice: 'last'")]
    for args, words in cases:
        p = cli_in_process('export', *args)
        assert p.returncode == 2 and words in p.stderr and len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)
    assert sorted(x.name for x in tmp_path.iterdir()) == ['busy', 'unfinished']          # nothing written
    assert sorted(x.name for x in busy.iterdir()) == ['notes.txt']
    assert cli_in_process('export', tiny_run, tmp_path / 'a').returncode == 0
    p = cli_in_process('export', tiny_run, tmp_path / 'a', '--which', 'best')
    assert p.returncode == 2 and 'already holds an export; pass --overwrite' in p.stderr
    assert cli_in_process('export', tiny_run, tmp_path / 'a', '--which', 'best', '--overwrite').returncode == 0
    assert card(tmp_path / 'a').data.rectiflow['export'] == 'best'
    assert sorted(x.name for x in tmp_path.iterdir()) == ['a', 'busy', 'unfinished']
    assert sorted(str(p) for p in tiny_run.rglob('*')) == before                         # the run is only read
