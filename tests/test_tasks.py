"The workloads of issue 6 through `rectiflow train --task NAME`, tiny, as a user runs them."
import json
from pathlib import Path
from conftest import run_cli

def records(run):
    return [json.loads(l) for l in (Path(run) / 'metrics.jsonl').read_text().splitlines()]

def test_filler_task_trains_from_the_cli_and_beats_its_untrained_floor(tmp_path):
    run = tmp_path / 'filler'
    p = run_cli('train', '--task', 'filler', '--out', run, '--no-progress', '--steps', '60', '--eval.every', '30',
                '--eval.sample_every', '60', '--run.log_every', '30', '--data.batch_size', '32')
    assert p.returncode == 0, p.stderr
    vals = [r for r in records(run) if r['kind'] == 'val']
    assert vals[0]['floor'] == 'untrained' and 'psnr' in vals[0]
    final = records(run)[-1]
    assert final['kind'] == 'final' and final['psnr'] > final['psnr_floor'] + 3, final
    assert json.loads((run / 'best' / 'info.json').read_text())['psnr'] == max(v['psnr'] for v in vals)
    assert (run / 'samples' / 'step_000060.png').exists()
    p = run_cli('evaluate', run, '--json')
    assert p.returncode == 0 and json.loads(p.stdout)['psnr'] == max(v['psnr'] for v in vals), p.stderr

def test_a_task_brings_its_own_data(tmp_path):
    p = run_cli('train', '--task', 'filler', '--data', 'moons', '--out', tmp_path / 'x')
    assert p.returncode == 2 and 'brings its own data' in p.stderr

def test_vae_then_latent_digits_from_the_cli(tmp_path):
    # stage 0: a small VAE, gated by `recon`; then flow matching on its cached latents, decoded for strips and quality
    vae = tmp_path / 'vae'
    p = run_cli('train', '--task', 'vae', '--out', vae, '--no-progress', '--steps', '150', '--data.batch_size', '32',
                '--model.channels', '16,32', '--eval.every', '75', '--eval.sample_every', '150')
    assert p.returncode == 0, p.stderr
    assert 'reconstructions read correctly' in p.stdout and 'recon gate passed' in p.stdout, p.stdout
    p = run_cli('gate', 'recon', '--vae', vae / 'final', '--out', vae)
    assert p.returncode == 0 and 'PASS recon' in p.stdout, (p.stdout, p.stderr)
    lat = tmp_path / 'latent'
    args = ['train', '--task', 'latent-digits', '--out', lat, '--no-progress', '--steps', '40', '--vae', vae / 'final',
            '--data.latent_cache', tmp_path / 'cache', '--eval.every', '20', '--eval.sample_every', '40', '--eval.n_samples', '100']
    p = run_cli(*args)
    assert p.returncode == 0 and 'generated-digit accuracy' in p.stdout, p.stderr
    assert (lat / 'samples' / 'step_000040.png').exists()
    stats = json.loads((lat / 'final' / 'info.json').read_text())['task']['latents']
    assert len(stats['mean']) == 4 and all(s > 0 for s in stats['std'])      # the statistics travel with the export
    p = run_cli('train', '--task', 'latent-digits', '--out', tmp_path / 'novae', '--no-progress')
    assert p.returncode == 2 and 'needs a trained VAE' in p.stderr

def test_lines_task_trains_from_the_cli_and_reads_better_than_untrained(tmp_path):
    run = tmp_path / 'lines'
    p = run_cli('train', '--task', 'lines', '--out', run, '--no-progress', '--steps', '60', '--data.n_train', '1024',
                '--data.n_val', '64', '--eval.every', '30', '--eval.sample_every', '60', '--run.log_every', '30',
                '--eval.n_samples', '32', '--eval.val_items', '64')
    assert p.returncode == 0, p.stderr
    vals = [r for r in records(run) if r['kind'] == 'val']
    assert vals[0]['floor'] == 'untrained' and vals[0]['cer'] > 0.8          # an untrained model writes nothing legible
    assert vals[-1]['cer'] < vals[0]['cer'] - 0.05 and vals[-1]['gap'] > vals[0]['gap'], vals
    final = records(run)[-1]
    assert final['kind'] == 'final' and final['cer_real'] < 0.05 and final['gap_real'] > 0.8    # the gauge reads real lines
    assert json.loads((run / 'best' / 'info.json').read_text())['cer'] == min(v['cer'] for v in vals)   # best/ by CER
    assert (run / 'samples' / 'step_000060.png').exists()
    p = run_cli('sample', run)            # no RunSampler for lines: one clear line, not a traceback
    assert p.returncode == 2 and 'samples are its strips' in p.stderr and 'Traceback' not in p.stderr, p.stderr

def test_sequences_task_trains_under_a_frame_budget_from_the_cli(tmp_path):
    run = tmp_path / 'seq'
    args = ['train', '--task', 'sequences', '--out', run, '--no-progress', '--steps', '150', '--data.n_train', '400',
            '--data.n_val', '64', '--eval.every', '75', '--eval.sample_every', '150', '--run.log_every', '75', '--eval.val_items', '64']
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    vals = [r for r in records(run) if r['kind'] == 'val']
    assert vals[0]['floor'] == 'untrained' and vals[0]['frame_acc'] < 0.2
    final = records(run)[-1]
    assert final['kind'] == 'final' and final['frame_acc'] > 0.8 and final['frame_acc'] > final['frame_acc_floor'] + 0.5, final
    assert json.loads((run / 'best' / 'info.json').read_text())['residual_fd'] == min(v['residual_fd'] for v in vals)
    assert (run / 'samples' / 'step_000150.png').exists()
    p = run_cli(*args[:-2], '--data.batch_size', '16', '--out', tmp_path / 'small', '--overwrite')   # shorter than the longest item
    assert p.returncode == 2 and 'data.batch_size' in p.stderr and 'Traceback' not in p.stderr, p.stderr

def test_gates_run_on_variable_size_tasks(tmp_path):
    # width buckets and frame budgets: the data gate streams items, the overfit gate trains one batch of all its items
    for task in ('sequences', 'lines'):
        p = run_cli('gate', 'data,overfit,resume', '--task', task, '--out', tmp_path / task)
        assert p.returncode == 0, (task, p.stdout, p.stderr)
        assert all(f'PASS {g}' in p.stdout for g in ('data', 'overfit', 'resume')), p.stdout
