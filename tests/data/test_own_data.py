"Your own data end to end (04_data.files): image folders and manifests from the CLI, group-disjoint splits, latent shards from a saved AutoencoderKL, every bad-data case, and bounded memory over a large folder and a Hugging Face dataset."
import json, os, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
import torch
from PIL import Image
from conftest import run_cli, main_in_process, cli_in_process

from rectiflow.data.files import ImageOptions, digits_image_folder
from rectiflow.tasks.registry import load_config, make_task, preset

# A few dozen steps of a small UNet: these tests check the plumbing, not the quality.
TINY = ['--no-progress', '--steps', '24', '--data.batch_size', '32', '--task.channels', '16,32', '--run.log_every', '8',
        '--eval.every', '12', '--eval.sample_every', '24', '--eval.val_items', '64', '--eval.n_samples', '20']

def run_info(run): return json.loads((Path(run) / 'run_info.json').read_text())

def flow_data(path, **options):
    "The flow task's (train, val, info) for the data at `path` with task `options`."
    cfg = preset(data=str(path))
    for k, v in options.items(): setattr(cfg.task, k, v)
    return make_task(cfg).data

def split_groups(run):
    "The groups of each split of a finished run, rebuilt from its saved config."
    tr, va, _ = make_task(load_config(Path(run) / 'config.json')).data
    return tr.group_set, va.group_set

@pytest.fixture(scope='module')
def digits_dir(tmp_path_factory):
    "300 digits as 8x8 PNGs in class folders from ten writers (groups), with a manifest beside them."
    return digits_image_folder(tmp_path_factory.mktemp('data') / 'my_digits', n=300, groups=10)

def _trains_group_disjoint(data, tmp, *extra):
    run = tmp / 'run'
    p = run_cli('train', '--data', data, *TINY, '--out', run, *extra)
    assert p.returncode == 0, p.stderr
    assert (run / 'final' / 'model' / 'diffusion_pytorch_model.safetensors').exists()
    d = run_info(run)['data']
    assert d['kind'] == 'image' and d['n_classes'] == 10 and d['shape'] == [1, 8, 8]
    assert d['group_leaks'] == {} and d['groups']['train'] >= 6 and d['groups']['val'] >= 1
    tr, va = split_groups(run)
    assert tr and va and not tr & va and len(tr | va) == 10
    g = cli_in_process('gate', 'data', '--data', data, '--out', tmp / 'gates', '--data.batch_size', '32', *extra)
    assert g.returncode == 0, g.stdout + g.stderr
    assert 'disjoint groups' in g.stdout
    return run

def test_image_folder_trains_from_the_cli_with_a_group_disjoint_split(digits_dir, tmp_path):
    # no manifest: labels from the class folders, groups from the file names
    plain = tmp_path / 'plain'; plain.mkdir()
    for p in digits_dir.rglob('*.png'): (plain / p.parent.name).mkdir(exist_ok=True); (plain / p.parent.name / p.name).write_bytes(p.read_bytes())
    _trains_group_disjoint(plain, tmp_path, '--task.group_pattern', r'/(w\d+)_')

def test_manifest_trains_from_the_cli_with_a_group_disjoint_split(digits_dir, tmp_path):
    _trains_group_disjoint(digits_dir / 'manifest.jsonl', tmp_path)

def test_explicit_split_manifests_are_used_as_given_and_the_gate_reports_a_leak(digits_dir, tmp_path):
    lines = (digits_dir / 'manifest.jsonl').read_text().splitlines()
    ex = tmp_path / 'ex'; ex.mkdir()
    rel = lambda l: json.dumps({**json.loads(l), 'path': str(digits_dir / json.loads(l)['path'])})
    (ex / 'train.jsonl').write_text('\n'.join(rel(l) for l in lines if json.loads(l)['group'] != 'w09'))
    (ex / 'val.jsonl').write_text('\n'.join(rel(l) for l in lines if json.loads(l)['group'] in ('w09', 'w00')))
    g = cli_in_process('gate', 'data', '--data', ex, '--out', tmp_path / 'gates', '--data.batch_size', '32')
    assert g.returncode == 1 and "group(s) in both training and validation (e.g. 'w00')" in g.stdout

def test_encode_with_a_saved_autoencoderkl_then_train_on_the_shards_and_decode(digits_dir, tmp_path):
    from diffusers import AutoencoderKL
    torch.manual_seed(0)
    AutoencoderKL(in_channels=1, out_channels=1, down_block_types=('DownEncoderBlock2D',) * 2, up_block_types=('UpDecoderBlock2D',) * 2,
                  block_out_channels=(16, 32), layers_per_block=1, latent_channels=4, norm_num_groups=16,
                  sample_size=8).save_pretrained(tmp_path / 'vae')
    shards = tmp_path / 'latents'
    p = run_cli('encode', '--vae', tmp_path / 'vae', '--data', digits_dir, '--out', shards, '--shard-items', '100')
    assert p.returncode == 0, p.stderr
    m = json.loads((shards / 'shards.json').read_text())
    assert m['shape'] == [4, 4, 4] and m['vae'] == str((tmp_path / 'vae').resolve()) and len(m['stats']['mean']) == 4
    assert sum(s['items'] for s in m['splits'].values()) == 300 and 'train on them with: rectiflow train --data' in p.stdout
    assert not set(m['splits']['train']['groups']) & set(m['splits']['val']['groups'])
    run = tmp_path / 'run'
    p = cli_in_process('train', '--data', shards, *TINY, '--out', run)
    assert p.returncode == 0, p.stderr
    d = run_info(run)['data']
    assert d['kind'] == 'latent' and d['shape'] == [4, 4, 4] and d['encoder'] == m['encoder']
    # samples are decoded by the VAE the shards record: by `rectiflow sample`, and in process
    p = cli_in_process('sample', run, '--n', '20')
    assert p.returncode == 0, p.stderr
    assert (run / 'samples' / 'grid_seed0.png').stat().st_size > 1000
    from rectiflow.api import load_run
    from rectiflow.flow.vae import ShardDecoder
    z = load_run(run).sample(cond=torch.arange(10), seed=0)
    assert z.shape == (10, 4, 4, 4)
    x = ShardDecoder(shards)(z)
    assert x.shape == (10, 1, 8, 8) and torch.isfinite(x).all() and x.abs().max() <= 1

# ---- bad data: one line naming the file (exit 2), or skipped and counted with --task.skip_bad true ----

def _good(tmp, n=40):
    for i in range(n): Image.fromarray(np.full((8, 8), (6 * i) % 256, np.uint8), mode='L').save(tmp / f'ok{i:02d}.png')

def _folder(tmp, name, make):
    d = tmp / name; d.mkdir(); _good(d); make(d); return d

BAD = {
    'corrupt image': (lambda d: (d / 'bad.png').write_bytes(b'this is not a png'), 'bad.png: cannot read image'),
    'truncated image': (lambda d: (d / 'cut.png').write_bytes((d / 'ok01.png').read_bytes()[:-30]), 'cut.png: cannot read image'),
    'wrong mode': (lambda d: Image.new('RGB', (8, 8)).save(d / 'rgb.png'), "rgb.png: image mode RGB: the dataset's images are L"),
    'missing file': (lambda d: (d / 'm.jsonl').write_text(''.join(json.dumps({'path': p}) + '\n' for p in
                     [*(f'ok{i:02d}.png' for i in range(20)), 'gone.png', *(f'ok{i:02d}.png' for i in range(20, 40))])),
                     'm.jsonl:21: file gone.png does not exist'),
    'manifest line not JSON': (lambda d: (d / 'm.jsonl').write_text(''.join(json.dumps({'path': f'ok{i:02d}.png'}) + '\n' for i in range(30))
                               + '{"path": ok30.png}\n' + ''.join(json.dumps({'path': f'ok{i:02d}.png'}) + '\n' for i in range(30, 40))),
                               'm.jsonl:31: not valid JSON'),
}

def _data_path(d): return d / 'm.jsonl' if (d / 'm.jsonl').exists() else d

@pytest.mark.parametrize('case', sorted(BAD))
def test_bad_data_is_one_line_exit_2_naming_the_file(tmp_path, case):
    make, message = BAD[case]
    d = _folder(tmp_path, 'data', make)
    code, _, err = main_in_process('train', '--data', _data_path(d), *TINY, '--out', tmp_path / 'run')
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and '--task.skip_bad true' in lines[0], err
    assert not (tmp_path / 'run').exists()
    # ... and skipped and counted when asked
    tr, va, info = flow_data(_data_path(d), skip_bad=True)
    assert info.skipped['count'] == 1 and message.split(':')[0].split('/')[-1] in info.skipped['first'][0]
    assert len(tr) + len(va) == 40                             # every good item kept

def test_skipped_bad_items_are_counted_in_the_run_records(tmp_path):
    d = tmp_path / 'data'; d.mkdir(); _good(d, 80)
    for case in ('corrupt image', 'truncated image', 'wrong mode'): BAD[case][0](d)
    run = tmp_path / 'run'
    p = run_cli('train', '--data', d, *TINY, '--out', run, '--task.skip_bad', 'true')
    assert p.returncode == 0, p.stderr
    skipped = run_info(run)['data']['skipped']
    assert skipped['count'] == 3 and any('bad.png' in s for s in skipped['first'])
    assert 'skipped 3 bad item(s)' in p.stderr                 # never silent

def test_an_empty_folder_is_one_line_exit_2(tmp_path):
    (tmp_path / 'empty' / 'sub').mkdir(parents=True); (tmp_path / 'empty' / 'notes.txt').write_text('no images here')
    code, _, err = main_in_process('train', '--data', tmp_path / 'empty', *TINY, '--out', tmp_path / 'run')
    assert code == 2 and len(err.strip().splitlines()) == 1 and 'holds no images' in err

def test_a_latent_shard_of_the_wrong_shape_is_one_line_exit_2_or_skipped(digits_dir, tmp_path):
    from rectiflow.flow.vae import encode_shards
    from diffusers import AutoencoderKL
    torch.manual_seed(0)
    vae = AutoencoderKL(in_channels=1, out_channels=1, down_block_types=('DownEncoderBlock2D',) * 2, up_block_types=('UpDecoderBlock2D',) * 2,
                        block_out_channels=(16, 32), layers_per_block=1, latent_channels=4, norm_num_groups=16, sample_size=8)
    shards = tmp_path / 'latents'
    encode_shards(digits_dir, vae, shards, shard_items=64, fmt='npy')
    np.save(shards / 'train-00001.latents.npy', np.zeros((64, 4, 2, 2), np.float32))
    code, _, err = main_in_process('train', '--data', shards, *TINY, '--out', tmp_path / 'run')
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert 'train-00001.latents.npy: latents of shape [64, 4, 2, 2], the manifest says [64, 4, 4, 4]' in err
    tr, _, info = flow_data(shards, skip_bad=True)
    assert info.skipped['count'] == 1 and len(tr) == info.splits['train']

def test_an_unknown_data_path_is_one_line_exit_2(tmp_path):
    p = run_cli('train', '--data', tmp_path / 'nowhere', '--out', tmp_path / 'run', fresh=True)   # nothing else said
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and 'invalid choice' in p.stderr

# ---- memory ----

MEMORY_SCRIPT = '''
import json, sys, numpy as np
from pathlib import Path
from PIL import Image
from rectiflow.data.files import ImageOptions, image_datasets, epoch_memory
root, n, size = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
for i in range(n):
    (root / f"g{i % 50:02d}").mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (size, size), dtype=np.uint8), mode="L").save(root / f"g{i % 50:02d}" / f"{i:05d}.png", compress_level=1)
ds, info, _ = image_datasets(root, ImageOptions(height=size, val_fraction=0.02))
print(json.dumps(epoch_memory(ds["train"], batch_size=32)))
del ds
# the same images as a saved Hugging Face dataset (06_data.hf): memory-mapped rows, decoded per item
import datasets
from rectiflow.data.hf import HFImageOptions, hf_datasets
datasets.disable_progress_bars()
files = sorted(root.rglob("*.png"))
rows = lambda: ({"image": {"bytes": p.read_bytes(), "path": None}, "group": p.parent.name} for p in files)
features = datasets.Features({"image": datasets.Image(), "group": datasets.Value("string")})
saved = datasets.Dataset.from_generator(rows, features=features, cache_dir=str(root.parent / "cache"))
saved.save_to_disk(str(root.parent / "hf"))
hds, _, _ = hf_datasets(f"hf:{root.parent / 'hf'}", HFImageOptions(height=size, val_fraction=0.02))
print(json.dumps({**epoch_memory(hds["train"], batch_size=32), "mapped_files": len(hds["train"].images.cache_files)}))
'''

def test_an_epoch_over_a_large_folder_or_hf_dataset_keeps_resident_memory_bounded(tmp_path):
    p = subprocess.run([sys.executable, '-c', MEMORY_SCRIPT, str(tmp_path / 'big'), '3000', '64'], capture_output=True, text=True,
                       timeout=600, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert p.returncode == 0, p.stderr
    files, hf = (json.loads(l) for l in p.stdout.strip().splitlines()[-2:])
    print(files, hf)
    assert hf['mapped_files'] >= 1                                    # the rows stay in the mapped Arrow file
    for r in (files, hf):
        assert r['data_mb'] > 40 and r['batches'] > 80                    # the epoch decodes far more than one batch ...
        assert r['growth_mb'] < 16 and r['growth_mb'] < r['data_mb'] / 4  # ... while the process holds a few batches at most
