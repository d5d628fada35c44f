"The VAE and latent-digits tasks (35_tasks.latents) through the CLI, tiny, as a user runs them."
import json
from conftest import main_in_process, run_cli, cli_in_process

def test_vae_then_latent_digits_from_the_cli(tmp_path):
    # stage 0: a small VAE, gated by `recon`; then flow matching on its cached latents, decoded for strips and quality
    vae = tmp_path / 'vae'
    p = run_cli('train', '--task', 'vae', '--out', vae, '--no-progress', '--steps', '150', '--data.batch_size', '32',
                '--task.channels', '16,32', '--eval.every', '75', '--eval.sample_every', '150')
    assert p.returncode == 0, p.stderr
    assert 'reconstructions read correctly' in p.stdout and 'recon gate passed' in p.stdout, p.stdout
    p = cli_in_process('gate', 'recon', '--vae', vae / 'final', '--out', vae)
    assert p.returncode == 0 and 'PASS recon' in p.stdout, (p.stdout, p.stderr)
    lat = tmp_path / 'latent'
    args = ['train', '--task', 'latent-digits', '--out', lat, '--no-progress', '--steps', '40', '--vae', vae / 'final',
            '--task.latent_cache', tmp_path / 'cache', '--eval.every', '20', '--eval.sample_every', '40', '--eval.n_samples', '100']
    p = cli_in_process(*args)
    assert p.returncode == 0 and 'generated-digit accuracy' in p.stdout, p.stderr
    assert (lat / 'samples' / 'step_000040.png').exists()
    stats = json.loads((lat / 'final' / 'info.json').read_text())['task_state']['latents']
    assert len(stats['mean']) == 4 and all(s > 0 for s in stats['std'])      # the statistics travel with the export
    p = cli_in_process('sample', lat, '--out', tmp_path / 'grid.png')                # a grid of decoded digits, a column per class
    assert p.returncode == 0 and 'wrote 100 samples' in p.stdout and (tmp_path / 'grid.png').exists(), (p.stdout, p.stderr)
    code, _, err = main_in_process('train', '--task', 'latent-digits', '--out', tmp_path / 'novae', '--no-progress')
    assert code == 2 and 'needs a trained VAE' in err
