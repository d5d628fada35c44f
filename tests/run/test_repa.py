"""Representation alignment (REPA) end to end, with a tiny randomly initialised ViT saved in a temporary folder: the
term in the train records up to `repa.until` and not after, the projector checkpointed beside the model and kept out
of exports, a bit-identical resume between two records, the capture under gradient checkpointing, a bad encoder path."""
import json, shutil, sys
from pathlib import Path
import pytest
import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).parents[1]))
from conftest import cli_in_process, records, final_weights, copy_run
from rectiflow.config import apply_overrides
from rectiflow.tasks.registry import preset, load_checkpoint
from rectiflow.api import task_trainer
from rectiflow.run.lifecycle import run_figures
from rectiflow.store.files import write_manifest
from rectiflow.store.checkpoint import load_state_tree
from rectiflow.run.repa import REPA

# a tiny digits run: 6 steps, records at 2, 4 and 6, checkpoints at 3 and 6; REPA on for steps 1 to 3
TINY = ['--run.steps', '6', '--run.log_every', '2', '--eval.every', '6', '--eval.sample_every', '6',
        '--checkpoint.save_every', '3', '--eval.n_samples', '20', '--eval.nfe', '4', '--eval.val_items', '64',
        '--data.batch_size', '16', '--task.channels', '16,16']

@pytest.fixture(scope='module')
def encoder(tmp_path_factory) -> Path:
    "A two-layer ViT for 8x8 images (patches of 2: a 4x4 grid of 32-wide tokens), randomly initialised and saved."
    from transformers import ViTConfig, ViTModel
    folder = tmp_path_factory.mktemp('encoder')
    config = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       image_size=8, patch_size=2)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        ViTModel(config, add_pooling_layer=False).save_pretrained(folder)
    return folder

def repa_args(encoder) -> list:
    return ['--repa.encoder', str(encoder), '--repa.until', '0.5', '--repa.projector_dim', '32']

@pytest.fixture(scope='module')
def repa_run(tmp_path_factory, encoder) -> Path:
    run = tmp_path_factory.mktemp('repa') / 'run'
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try: p = cli_in_process('train', '--no-progress', '--out', run, *TINY, *repa_args(encoder))
    finally: torch.set_num_threads(threads)
    assert p.returncode == 0, p.stderr[-3000:]
    return run

def test_the_term_is_recorded_until_it_is_switched_off(repa_run):
    train = [r for r in records(repa_run) if r['kind'] == 'train']
    assert [(r['step'], 'repa_loss' in r) for r in train] == [(2, True), (4, True), (6, False)]
    assert all(-1 <= r['repa_loss'] <= 1 for r in train[:2])
    assert not any('repa_loss' in r for r in records(repa_run) if r['kind'] != 'train')

def test_the_projector_is_checkpointed_beside_the_model_and_never_exported(repa_run):
    ckpt = repa_run / 'checkpoints' / 'step_000006'
    projector = load_file(str(ckpt / 'model_1.safetensors'))
    assert sorted(projector) == ['0.bias', '0.weight', '2.bias', '2.weight', '4.bias', '4.weight']
    assert projector['4.weight'].shape == (32, 32)           # to the encoder's width
    model = load_file(str(ckpt / 'model.safetensors'))
    assert sorted(final_weights(repa_run)) == sorted(model)     # the export: the model's weights, nothing else
    assert load_checkpoint(ckpt).models['raw'] is not None    # a step checkpoint loads into the task's own model

def resumed_at_step_3(run) -> Path:
    "`run` resumed from its step-3 checkpoint (its step-6 one gone), in this process on one thread."
    shutil.rmtree(run / 'checkpoints' / 'step_000006')
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try: p = cli_in_process('train', '--no-progress', '--resume', run / 'checkpoints' / 'step_000003')
    finally: torch.set_num_threads(threads)
    assert p.returncode == 0, p.stderr[-3000:]
    return run

def assert_same_run(run, repa_run):
    assert [run_figures(r) for r in records(run)] == [run_figures(r) for r in records(repa_run)]
    want, got = final_weights(repa_run), final_weights(run)
    assert all(torch.equal(want[k], got[k]) for k in want)
    a, b = (load_file(str(r / 'checkpoints' / 'step_000006' / 'model_1.safetensors')) for r in (repa_run, run))
    assert all(torch.equal(a[k], b[k]) for k in a)

def test_a_resume_between_two_records_is_bit_identical(repa_run, tmp_path):
    assert_same_run(resumed_at_step_3(copy_run(repa_run, tmp_path / 'run')), repa_run)

def test_a_checkpoint_with_the_term_log_in_its_state_file_resumes_bit_identically(repa_run, tmp_path):
    # as checkpoints were written before extensions kept their state in callbacks.safetensors
    run = copy_run(repa_run, tmp_path / 'run')
    ckpt = run / 'checkpoints' / 'step_000003'
    log = load_state_tree(ckpt / 'callbacks.safetensors')['REPA']['log']
    assert log['count'] == 1                    # step 3's term, to be in the record of step 4
    (ckpt / 'callbacks.safetensors').unlink()
    state = json.loads((ckpt / 'trainer_state.json').read_text())
    (ckpt / 'trainer_state.json').write_text(json.dumps({**state, 'repa_log': log}))
    write_manifest(ckpt)
    assert_same_run(resumed_at_step_3(run), repa_run)

def digits(out, encoder, *args):
    return apply_overrides(preset(), ['--run.out', str(out), '--run.overwrite', 'true', *TINY, *repa_args(encoder),
                                      *args])

def repa(tr): return next(c for c in tr.callbacks.items if isinstance(c, REPA))    # the run's extension

def train(tr, n):
    for _ in zip(range(n), tr.optimizer_steps()): pass
    return tr

def test_under_gradient_checkpointing_the_activation_is_taken_once_a_step(encoder, tmp_path):
    # a module inside a checkpointed resnet: the backward's recomputation runs it (and its hooks) again
    layer = ['--repa.layer', 'unet.down_blocks.1.resnets.0.conv1']
    plain = train(task_trainer(digits(tmp_path / 'a', encoder, *layer)), 2)
    tr = task_trainer(digits(tmp_path / 'b', encoder, *layer, '--run.gradient_checkpointing', 'true'))
    calls = []
    dict(tr.unwrapped.named_modules())[layer[1]].register_forward_hook(lambda m, a, o: calls.append(1))
    train(tr, 2)
    assert len(calls) == 4                      # two steps: a forward and a recomputation each
    assert repa(tr).log.count == repa(plain).log.count == 2
    assert torch.equal(repa(tr).log.total, repa(plain).log.total)
    assert all(torch.equal(p, q) for p, q in zip(tr.unwrapped.parameters(), plain.unwrapped.parameters()))
    projector = lambda: {k: v.clone() for k, v in tr.state_dict()['beside'][0].items()}
    before = projector()
    with tr.preserved(): train(tr, 1)            # the LR range test's restore puts the projector back too
    after = projector()
    assert all(torch.equal(before[k], after[k]) for k in before)

def test_a_bad_encoder_path_is_a_one_line_error(tmp_path):
    p = cli_in_process('train', '--no-progress', '--out', tmp_path / 'run', *TINY, '--repa.encoder', tmp_path / 'none')
    assert p.returncode == 2
    assert p.stderr.count('\n') == 1 and 'repa.encoder' in p.stderr and 'is not a folder holding' in p.stderr, p.stderr
