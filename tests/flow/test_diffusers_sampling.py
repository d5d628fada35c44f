"""A digits export sampled by diffusers alone (its UNet and a flow scheduler, no rectiflow imported) lands where
rectiflow's Euler lands on the scheduler's grid, from the same noise."""
import json, subprocess, sys
import torch
from conftest import cli_in_process

SAMPLE_WITH_DIFFUSERS_ONLY = '''
import sys, torch
from diffusers import UNet2DModel, FlowMatchEulerDiscreteScheduler
final, noise_path, out = sys.argv[1:]
unet = UNet2DModel.from_pretrained(final + '/unet').eval()
scheduler = FlowMatchEulerDiscreteScheduler.from_pretrained(final + '/scheduler')
noise, labels = torch.load(noise_path)
scheduler.set_timesteps(8)
x = noise
with torch.no_grad():
    for t in scheduler.timesteps:
        x = scheduler.step(unet(x, t, class_labels=labels).sample, t, x).prev_sample
assert not any(m.startswith('rectiflow') for m in sys.modules)
torch.save({'x': x, 'shift': scheduler.config.shift}, out)
'''

def test_an_export_samples_with_diffusers_alone_as_rectiflow_does(tmp_path):
    run = tmp_path / 'run'
    p = cli_in_process('train', '--out', str(run), '--no-progress', '--steps', '20', '--run.log_every', '10',
                       '--eval.every', '20', '--eval.sample_every', '20', '--eval.n_samples', '20', '--eval.shift', '3')
    assert p.returncode == 0, p.stderr
    final = run / 'final'
    assert json.loads((final / 'info.json').read_text())['diffusers_parts'] == ['unet']
    g = torch.Generator().manual_seed(0)
    noise, labels = torch.randn(10, 1, 8, 8, generator=g), torch.arange(10)
    torch.save((noise, labels), tmp_path / 'noise.pt')
    p = subprocess.run([sys.executable, '-c', SAMPLE_WITH_DIFFUSERS_ONLY, str(final), str(tmp_path / 'noise.pt'),
                        str(tmp_path / 'x.pt')], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    theirs = torch.load(tmp_path / 'x.pt')
    assert theirs['shift'] == 3.0                                      # the run's eval.shift travels in the export
    from rectiflow.store.exports import load_exported_model
    from rectiflow.flow.sampling import integrate, flow_scheduler, scheduler_grid
    model = load_exported_model(final).eval()
    with torch.no_grad():
        ours, used = integrate(lambda x, t: model(x, t, labels), noise, solver='euler',
                               grid=scheduler_grid(flow_scheduler(3.0), 8))
    assert used == 8 and torch.allclose(theirs['x'], ours, atol=1e-5), (theirs['x'] - ours).abs().max()
