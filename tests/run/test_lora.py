"""LoRA from the command line: checkpoints and exports hold the adapters alone and name their base, the base never
changes, a stopped LoRA run resumes bitwise, a changed base is refused, and `sample` / `evaluate` take a LoRA run.
One tiny base run and two LoRA runs on it, all in this process."""
import json, shutil
from types import SimpleNamespace
import pytest, torch
from safetensors.torch import load_file, save_file
from conftest import cli_in_process, main_in_process, TINY_MOONS, comparable
from rectiflow.store.files import write_manifest
from rectiflow.store.checkpoint import load_ema_state

LORA = [*TINY_MOONS, '--steps', '20', '--checkpoint.save_every', '10', '--lora.rank', '4']
BASE_WEIGHTS = 'model/diffusion_pytorch_model.safetensors'

def ok(p):
    assert p.returncode == 0, p.stderr[-3000:]
    return p

@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """A base run; a LoRA run on its final/ export (`straight`); the same LoRA run on a copy of that export, stopped
    at step 10, refused a resume while the copy's weights are changed, then resumed with the put-back copy and the
    merged export asked for (a change a resume accepts)."""
    d = tmp_path_factory.mktemp('lora')
    ok(cli_in_process('train', *TINY_MOONS, '--steps', '10', '--out', d / 'base'))
    base = shutil.copytree(d / 'base' / 'final', d / 'base_copy')
    ok(cli_in_process('train', *LORA, '--init-from', d / 'base' / 'final', '--out', d / 'straight'))
    ok(cli_in_process('train', *LORA, '--init-from', base, '--run.max_steps', '10', '--out', d / 'stopped'))
    original, manifest = (base / BASE_WEIGHTS).read_bytes(), (base / 'manifest.json').read_bytes()
    weights = load_file(str(base / BASE_WEIGHTS))
    save_file({k: v + 1e-3 for k, v in weights.items()}, str(base / BASE_WEIGHTS))
    write_manifest(base)                # another whole export at the base's path: its fingerprint must refuse it
    refused = main_in_process('train', '--resume', '--out', d / 'stopped', '--run.max_steps', '0')
    (base / BASE_WEIGHTS).write_bytes(original)
    (base / 'manifest.json').write_bytes(manifest)
    ok(cli_in_process('train', '--resume', '--out', d / 'stopped', '--run.max_steps', '0',
                      '--lora.merge_export', 'true'))
    return SimpleNamespace(base=d / 'base', straight=d / 'straight', stopped=d / 'stopped', refused=refused)

def tensors_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

def test_checkpoints_and_exports_hold_the_adapters_alone_and_name_their_base(runs):
    ckpt = runs.straight / 'checkpoints' / 'step_000020'
    weights = load_file(str(ckpt / 'model.safetensors'))
    assert weights and all('.lora_A.' in k or '.lora_B.' in k for k in weights)
    ema = load_ema_state(ckpt / 'ema.safetensors')['shadow_params']
    adam = torch.load(ckpt / 'optimizer.bin', weights_only=True)['state']
    assert len(ema) == len(adam) == len(weights)
    assert sorted(t.numel() for t in ema) == sorted(t.numel() for t in weights.values())
    base = json.loads((ckpt / 'lora_base.json').read_text())
    assert base['path'] == str((runs.base / 'final').resolve()) and len(base['fingerprint']) == 16
    final = runs.straight / 'final'
    assert {'adapter_model.safetensors', 'adapter_config.json', 'info.json'} <= {p.name for p in final.iterdir()}
    assert not (final / 'model').exists()
    info = json.loads((final / 'info.json').read_text())
    assert (info['model'], info['lora_base']) == ('lora', base)
    assert load_file(str(final / 'adapter_model.safetensors')).keys() == weights.keys()

def test_the_base_never_changes(runs):
    "The merged export is the base plus `alpha / r * B @ A` on each adapted layer's weight, the base everywhere else."
    final = runs.stopped / 'final'
    base, merged = load_file(str(runs.base / 'final' / BASE_WEIGHTS)), load_file(str(final / BASE_WEIGHTS))
    adapters = load_file(str(final / 'adapter_model.safetensors'))
    config = json.loads((final / 'adapter_config.json').read_text())
    scale = config['lora_alpha'] / config['r']
    assert merged.keys() == base.keys() and len(config['target_modules']) == 8      # the MLP's linear layers
    for name, w in base.items():
        layer, kind = name.rsplit('.', 1)
        a = adapters.get(f'base_model.model.{layer}.lora_A.weight')
        if a is None or kind != 'weight': assert torch.equal(merged[name], w), name
        else:
            delta = scale * adapters[f'base_model.model.{layer}.lora_B.weight'] @ a
            assert delta.abs().max() > 0 and torch.allclose(merged[name], w + delta, atol=1e-6), name

def test_a_stopped_lora_run_resumes_bit_identically(runs):
    a, b = runs.straight, runs.stopped
    assert tensors_equal(load_file(str(a / 'final' / 'adapter_model.safetensors')),
                         load_file(str(b / 'final' / 'adapter_model.safetensors')))
    for name in ('model.safetensors',):
        assert tensors_equal(load_file(str(a / 'checkpoints' / 'step_000020' / name)),
                             load_file(str(b / 'checkpoints' / 'step_000020' / name)))
    assert comparable(a) == comparable(b)

def test_a_resume_refuses_a_changed_base(runs):
    code, _, err = runs.refused
    assert code == 2 and 'changed since these adapters were trained on it' in err, err
    assert len(err.strip().splitlines()) == 1, err

def test_sample_and_evaluate_take_a_lora_run(runs, tmp_path):
    for run in (runs.straight, runs.stopped / 'final'):          # the adapters on their base; the merged model
        ok(cli_in_process('sample', run, '--n', '200', '--out', tmp_path / 'grid.png'))
        assert (tmp_path / 'grid.png').stat().st_size > 0
        (tmp_path / 'grid.png').unlink()
    for target in (runs.straight, runs.straight / 'checkpoints' / 'step_000020'):
        rec = json.loads(ok(cli_in_process('evaluate', target, '--json')).stdout)
        assert rec['val_loss_ema'] > 0 and ('val_loss' in rec) == (target.name == 'step_000020')

@pytest.mark.parametrize('args,message', [
    ([], 'lora.rank 4 trains adapters on a trained model: name it with --init-from'),
    (['--lora.targets', 'to_q', '--init-from', 'BASE'], "lora.targets 'to_q' matches no linear"),
    (['--lora.rank', '0', '--init-from', 'ADAPTERS'], 'holds LoRA adapters, not a whole model'),
])
def test_lora_refusals_are_one_line_exit_2(runs, tmp_path, args, message):
    named = {'BASE': runs.base / 'final', 'ADAPTERS': runs.straight / 'final'}
    args = [str(named.get(a, a)) for a in args]
    code, _, err = main_in_process('train', *LORA, *args, '--out', tmp_path / 'run')
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
