"""Hugging Face datasets as `--data hf:PATH` (06_data.hf): a tiny run from a saved dataset with a bad row skipped, a resume that
checks the data's fingerprint, group splits in every form, bad rows and columns refused in one line."""
import json, shutil
from pathlib import Path
import pytest
import datasets
from conftest import cli_in_process, main_in_process, copy_run

from rectiflow.data.batches import fingerprint
from rectiflow.data.hf import digits_hf, hf_datasets, HFImageOptions
from rectiflow.tasks.registry import load_config, make_task

# A few steps of a small UNet on 8x8 digits, a checkpoint at the end, samples of 4 NFE and no quality pass before the
# final one: these tests check the plumbing, not the quality.
TINY = ['--no-progress', '--steps', '8', '--data.batch_size', '32', '--task.channels', '16,32', '--run.log_every', '4',
        '--eval.every', '8', '--eval.sample_every', '8', '--eval.val_items', '64', '--eval.n_samples', '20',
        '--eval.nfe', '4', '--eval.quality_every', '0', '--checkpoint.save_every', '8']
BAD_ROW = 7

@pytest.fixture(scope='module', autouse=True)
def scratch_hf_cache(tmp_path_factory):
    "`load_dataset`'s Arrow copies in a scratch folder rather than the user's cache; no progress bars."
    mp, bars_off = pytest.MonkeyPatch(), datasets.utils.are_progress_bars_disabled()
    mp.setattr(datasets.config, 'HF_DATASETS_CACHE', tmp_path_factory.mktemp('hf_cache'))
    datasets.disable_progress_bars()
    yield
    mp.undo()
    if not bars_off: datasets.enable_progress_bars()

def rewrite(src, dst, row, image=None, label=None) -> Path:
    "A copy of the saved dataset `src` at `dst` with row `row`'s image bytes or label replaced."
    ds = datasets.load_from_disk(str(src)).cast_column('image', datasets.Image(decode=False))
    def change(r, i):
        if i != row: return r
        return {**r, **({'image': {'bytes': image, 'path': None}} if image is not None else {}),
                **({'label': label} if label is not None else {})}
    ds = ds.map(change, with_indices=True, load_from_cache_file=False)
    ds.cast_column('image', datasets.Image()).save_to_disk(str(dst))
    return Path(dst)

@pytest.fixture(scope='module')
def hf_run(tmp_path_factory):
    "A saved digits dataset of ten writers with one corrupt row, and a tiny run on it that skips the row."
    tmp = tmp_path_factory.mktemp('hf')
    data = rewrite(digits_hf(tmp / 'clean', 'saved', n=300), tmp / 'digits', BAD_ROW, image=b'not an image')
    run = tmp / 'run'
    p = cli_in_process('train', '--data', f'hf:{data}', *TINY, '--task.group_column', 'writer', '--task.skip_bad', 'true',
                       '--out', run)
    assert p.returncode == 0, p.stderr
    return data, run, p

def test_a_saved_dataset_trains_with_a_group_disjoint_split_and_the_bad_row_skipped(hf_run, tmp_path):
    data, run, p = hf_run
    assert (run / 'final' / 'model' / 'diffusion_pytorch_model.safetensors').exists()
    d = json.loads((run / 'run_info.json').read_text())['data']
    assert d['name'] == f'hf:{data}' and d['source'] == 'hf' and d['kind'] == 'image' and d['shape'] == [1, 8, 8]
    assert d['n_classes'] == 10 and d['columns'] == {'image': 'image', 'label': 'label', 'text': 'text', 'group': 'writer'}
    assert d['skipped']['count'] == 1 and f'[train] row {BAD_ROW}: cannot read image' in d['skipped']['first'][0]
    assert 'skipped 1 bad item(s)' in p.stderr                                      # never silent
    assert d['group_leaks'] == {} and d['groups']['train'] >= 6 and d['groups']['val'] >= 1
    tr, va, _ = make_task(load_config(run / 'config.json')).data                     # the splits, rebuilt from the config
    assert type(tr).__name__ == 'HFImages' and len(tr) + len(va) == 299
    assert not tr.group_set & va.group_set and len(tr.group_set | va.group_set) == 10
    g = cli_in_process('gate', 'data', '--data', f'hf:{data}', '--out', tmp_path / 'gates', '--data.batch_size', '32',
                       '--task.group_column', 'writer', '--task.skip_bad', 'true')
    assert g.returncode == 0, g.stdout + g.stderr
    assert 'disjoint groups' in g.stdout

def test_a_resume_sees_the_same_fingerprint_and_refuses_a_changed_dataset(hf_run, tmp_path):
    data, run, _ = hf_run
    run = copy_run(run, tmp_path / 'run')
    state = json.loads((run / 'checkpoints' / 'step_000008' / 'trainer_state.json').read_text())
    opts = HFImageOptions(group_column='writer', skip_bad=True)
    assert state['fingerprint'] == fingerprint(hf_datasets(f'hf:{data}', opts)[0]['train'])
    p = cli_in_process('train', '--resume', '--out', run, '--steps', '10', '--no-progress')
    assert p.returncode == 0, p.stderr
    assert json.loads((run / 'checkpoints' / 'step_000010' / 'trainer_state.json').read_text())['step'] == 10
    kept = data.with_name('digits.kept')
    data.rename(kept)
    try:
        rewrite(kept, data, 0, label=(datasets.load_from_disk(str(kept))[0]['label'] + 1) % 10)    # one label changed
        code, _, err = main_in_process('train', '--resume', '--out', run, '--steps', '12', '--no-progress')
        lines = err.strip().splitlines()                       # the run skips the bad row, and says so first
        assert code == 2 and len(lines) == 2 and 'skipped 1 bad item(s)' in lines[0], err
        assert "Cannot resume: the training data differ from the checkpoint's (fingerprint mismatch)." in lines[1]
    finally:
        shutil.rmtree(data)
        kept.rename(data)

@pytest.mark.parametrize('form', ['parquet', 'imagefolder'])
def test_a_given_test_split_is_kept_and_val_is_carved_from_train_by_writer(tmp_path, form):
    data = digits_hf(tmp_path / form, form, n=200, test_writers=2, metadata='csv')
    ds, info, _ = hf_datasets(f'hf:{data}', HFImageOptions(group_column='writer'))
    assert info.extra['hf_splits'] == {'train': 'train', 'test': 'test', 'val': 'train'}
    assert ds['test'].group_set == {'w08', 'w09'} and info.group_leaks == {}
    sets = [d.group_set for d in ds.values()]
    assert all(not a & b for i, a in enumerate(sets) for b in sets[i + 1:]) and len(set().union(*sets)) == 10
    assert info.n_classes == 10 and sum(info.splits.values()) == 200

def test_given_splits_that_share_a_writer_are_used_as_given_and_the_gate_reports_it(tmp_path):
    rows = datasets.load_from_disk(str(digits_hf(tmp_path / 'all', 'saved', n=200)))
    dd = datasets.DatasetDict({'train': rows.filter(lambda r: r['writer'] != 'w09'),
                               'validation': rows.filter(lambda r: r['writer'] in ('w09', 'w00'))})
    dd.save_to_disk(str(tmp_path / 'dd'))
    g = cli_in_process('gate', 'data', '--data', f"hf:{tmp_path / 'dd'}", '--out', tmp_path / 'gates',
                       '--data.batch_size', '32', '--task.group_column', 'writer')
    assert g.returncode == 1 and "group(s) in both training and validation (e.g. 'w00')" in g.stdout

@pytest.mark.parametrize('extra, message', [
    ([], f'[train] row {BAD_ROW}: cannot read image (UnidentifiedImageError'),
    (['--task.group_column', 'speaker'], "has no column 'speaker' (task.group_column); its columns: image, label, writer, text."),
    (['--task.group_pattern', r'w\d+'], 'task.group_pattern reads groups from file names'),
])
def test_bad_rows_and_columns_are_one_line_exit_2(hf_run, tmp_path, extra, message):
    data, _, _ = hf_run
    code, _, err = main_in_process('train', '--data', f'hf:{data}', *TINY, *extra, '--out', tmp_path / 'run')
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / 'run').exists()

def test_an_hf_path_that_does_not_exist_is_one_line_exit_2(tmp_path):
    code, _, err = main_in_process('train', '--data', f"hf:{tmp_path / 'nowhere'}", '--out', tmp_path / 'run')
    assert code == 2 and len(err.strip().splitlines()) == 1 and 'invalid choice' in err
