"The lines task (37_tasks.lines) through the CLI, tiny, as a user runs it."
import json
import pytest
from conftest import run_cli, cli_in_process, records

def test_lines_task_trains_from_the_cli_and_reads_better_than_untrained(tmp_path):
    run = tmp_path / 'lines'
    p = run_cli('train', '--task', 'lines', '--out', run, '--no-progress', '--steps', '60', '--task.n_train', '1024',
                '--task.n_val', '64', '--eval.every', '30', '--eval.sample_every', '60', '--run.log_every', '30',
                '--eval.n_samples', '32', '--eval.val_items', '64')
    assert p.returncode == 0, p.stderr
    vals = [r for r in records(run) if r['kind'] == 'val']
    assert vals[0]['floor'] == 'untrained' and vals[0]['cer'] > 0.8          # an untrained model writes nothing legible
    assert vals[-1]['cer'] < vals[0]['cer'] - 0.05 and vals[-1]['gap'] > vals[0]['gap'], vals
    final = records(run)[-1]
    assert final['kind'] == 'final' and final['cer_real'] < 0.05 and final['gap_real'] > 0.8    # the gauge reads real lines
    assert json.loads((run / 'best' / 'info.json').read_text())['cer'] == min(v['cer'] for v in vals)   # best/ by CER
    assert (run / 'samples' / 'step_000060.png').exists()
    p = cli_in_process('sample', run)            # held-out lines' texts and styles, drawn as a strip
    assert p.returncode == 0, p.stderr
    assert f"wrote 16 samples to {run / 'samples' / 'grid_seed0.png'}" in p.stdout, p.stdout
    assert (run / 'samples' / 'grid_seed0.png').stat().st_size > 1000

@pytest.mark.slow     # most of a minute; the gates' own tests and the sequences task's run in every `make test`
def test_gates_run_on_lines(tmp_path):
    # width buckets and frame budgets: the data gate streams items, the overfit gate trains one batch of all its items
    for task in ('lines',):
        p = cli_in_process('gate', 'data,overfit,resume', '--task', task, '--out', tmp_path / task)
        assert p.returncode == 0, (task, p.stdout, p.stderr)
        assert all(f'PASS {g}' in p.stdout for g in ('data', 'overfit', 'resume')), p.stdout
