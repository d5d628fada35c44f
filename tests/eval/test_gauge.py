"""The gauge of your own data (08_eval.gauge) end to end: quality passes in a run on a generated RGB folder, best/ by fd,
the gauge and the encoder statistics from the cache, FD in a local transformers encoder's features, evaluate --quality
giving the figures the run recorded, and the loss curves' quality panel."""
import json, os
from pathlib import Path
import pytest
from conftest import cli_in_process, main_in_process, records

from rectiflow.eval import gauge

FIGURES = ('accuracy', 'control_gap', 'accuracy_ceiling', 'fd', 'fd_floor', 'fd_ratio', 'fd_encoder',
           'fd_encoder_floor', 'n_samples', 'quality_protocol')

# 40 steps of a small UNet on 16x16 shapes, evaluated every 10 steps, a quality pass every 20 (at 0, 20 and 40) on 48
# samples drawn with 6 Euler steps: the plumbing and the direction of the figures, not their quality
TINY = ['--no-progress', '--steps', '40', '--data.batch_size', '32', '--task.channels', '16,32',
        '--run.log_every', '20', '--eval.every', '10', '--eval.quality_every', '20', '--eval.quality_samples', '48',
        '--eval.n_samples', '48', '--eval.solver', 'euler', '--eval.nfe', '6', '--eval.cfg_scale', '1.0',
        '--eval.val_items', '48', '--eval.sample_every', '40', '--eval.metric', 'fd', '--checkpoint.keep_last', '3']

def tiny_encoder(path) -> Path:
    "A randomly initialised DINOv2 of one small layer, saved as a local folder (no download)."
    import torch
    from transformers import Dinov2Config, Dinov2Model
    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                             image_size=16, patch_size=4)).save_pretrained(path)
    return Path(path)

@pytest.fixture(scope='module')
def run(tmp_path_factory):
    "One run on 40 images per shape with quality passes, best/ by fd and FD in a tiny encoder's features; its folders."
    root = tmp_path_factory.mktemp('gauge')
    was = os.environ.get('XDG_CACHE_HOME')
    os.environ['XDG_CACHE_HOME'] = str(root / 'cache')         # a fresh cache: the run trains the gauge and keeps it
    gauge._GAUGES.clear()
    folder = gauge.shapes_image_folder(root / 'shapes', per_class=40, size=16, shapes=gauge.SHAPES[:3])
    enc = tiny_encoder(root / 'encoder')
    p = cli_in_process('train', '--data', folder, '--out', root / 'run', *TINY, '--eval.fd_encoder', enc)
    assert p.returncode == 0, p.stderr
    yield {'run': root / 'run', 'folder': folder, 'cache': root / 'cache' / 'rectiflow', 'stdout': p.stdout}
    if was is None: os.environ.pop('XDG_CACHE_HOME')
    else: os.environ['XDG_CACHE_HOME'] = was

def passes(run): return [r for r in records(run) if r['kind'] == 'val' and 'quality_seconds' in r]

def test_quality_passes_judge_the_samples_against_the_real_data_floor(run):
    vals = [r for r in records(run['run']) if r['kind'] == 'val']
    assert [r['step'] for r in vals if 'fd' in r] == [0, 20, 40] and all('fd' not in r for r in vals if r['step'] % 20)
    untrained, trained = passes(run['run'])[0], passes(run['run'])[-1]
    assert untrained['fd'] > trained['fd'] > trained['fd_floor'], (untrained, trained)
    assert untrained['fd_floor'] == trained['fd_floor'] and 0 < trained['accuracy_ceiling'] <= 1
    assert untrained['fd_encoder'] > untrained['fd_encoder_floor'] > 0
    assert trained['n_samples'] == 48 and all(r['quality_seconds'] > 0 for r in passes(run['run']))
    assert trained['quality_protocol'].startswith('48 samples (seed 30000), euler sampler, 6 NFE'), trained
    final = records(run['run'])[-1]
    assert final['kind'] == 'final' and set(FIGURES) <= set(final)
    assert 'generated-image accuracy' in run['stdout'] and 'in the gauge\'s features' in run['stdout'], run['stdout']

def test_best_follows_the_quality_passes_by_eval_metric_fd(run):
    best = min(passes(run['run']), key=lambda r: r['fd'])
    info = json.loads((run['run'] / 'best' / 'info.json').read_text())
    assert (info['step'], info['fd']) == (best['step'], best['fd'])

def test_evaluate_quality_gives_the_recorded_figures_from_the_cached_gauge(run):
    gauge._GAUGES.clear()                                        # as a new process would: the gauge from the disk
    p = cli_in_process('evaluate', run['run'] / 'checkpoints' / 'step_000020', '--quality', '--json')
    assert p.returncode == 0, p.stderr
    got, want = json.loads(p.stdout), next(r for r in passes(run['run']) if r['step'] == 20)
    assert {k: got[k] for k in FIGURES} == {k: want[k] for k in FIGURES}
    assert [g.hit for g in gauge._GAUGES.values()] == [True]     # read from the cache, not trained again
    assert len(list((run['cache'] / 'gauge').glob('gauge_*.safetensors'))) == 1
    assert len(list((run['cache'] / 'fd_reference').glob('*.safetensors'))) == 1   # one sample count: one reference

def test_a_quality_pass_leaves_the_global_rng_of_a_run_as_it_was(run):
    import torch
    from rectiflow.tasks.registry import load_checkpoint
    from rectiflow.run.evaluation import quality_figures
    c = load_checkpoint(run['run'] / 'checkpoints' / 'step_000040')
    gauge._GAUGES.clear()
    gauge._ENCODERS.clear()                                      # the gauge and the encoder built afresh, mid-run
    before = torch.get_rng_state()
    figures = quality_figures(c.task, c.models['ema'])
    assert torch.equal(torch.get_rng_state(), before) and figures['n_samples'] == 48

def test_the_loss_curves_plot_the_passes_with_their_floor(run):
    from rectiflow.ui.widgets import run_curves, plot_curves
    c = run_curves(run['run'])
    assert c.quality['fd'][0] == (0, 20, 40) and set(c.quality) == {'fd', 'fd_floor', 'fd_encoder', 'fd_encoder_floor'}
    fig = plot_curves([c])
    assert [l.get_label() for l in fig.axes[1].lines][:2] == ['run fd', 'run fd floor']

def test_an_encoder_folder_without_a_model_is_refused_before_training(run, tmp_path):
    code, _, err = main_in_process('train', '--data', run['folder'], '--out', tmp_path / 'r', '--no-progress',
                                   '--eval.fd_encoder', tmp_path)
    assert code == 2 and 'holds no transformers model (config.json)' in err, err
    assert not (tmp_path / 'r').exists()
