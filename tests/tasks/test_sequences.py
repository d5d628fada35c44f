"The sequences task (38_tasks.sequences) through the CLI, tiny, as a user runs it."
import json
from conftest import main_in_process, run_cli, cli_in_process, records

def test_sequences_task_trains_under_a_frame_budget_from_the_cli(tmp_path):
    run = tmp_path / 'seq'
    args = ['train', '--task', 'sequences', '--out', run, '--no-progress', '--steps', '150', '--task.n_train', '400',
            '--task.n_val', '64', '--eval.every', '75', '--eval.sample_every', '150', '--run.log_every', '75', '--eval.val_items', '64']
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    vals = [r for r in records(run) if r['kind'] == 'val']
    assert vals[0]['floor'] == 'untrained' and vals[0]['frame_acc'] < 0.2
    final = records(run)[-1]
    assert final['kind'] == 'final' and final['frame_acc'] > 0.8 and final['frame_acc'] > final['frame_acc_floor'] + 0.5, final
    assert json.loads((run / 'best' / 'info.json').read_text())['residual_fd'] == min(v['residual_fd'] for v in vals)
    assert (run / 'samples' / 'step_000150.png').exists()
    p = cli_in_process('sample', run, '--n', '4')      # held-out utterances' alignments, drawn as a strip
    assert p.returncode == 0 and f"wrote 4 samples to {run / 'samples' / 'grid_seed0.png'}" in p.stdout, p.stderr
    assert (run / 'samples' / 'grid_seed0.png').stat().st_size > 1000
    code, _, err = main_in_process(*args[:-2], '--data.batch_size', '16', '--out', tmp_path / 'small', '--overwrite')
    assert code == 2 and 'data.batch_size' in err and 'Traceback' not in err, err     # shorter than the longest item

def test_gates_run_on_sequences(tmp_path):
    # width buckets and frame budgets: the data gate streams items, the overfit gate trains one batch of all its items
    for task in ('sequences',):
        p = cli_in_process('gate', 'data,overfit,resume', '--task', task, '--out', tmp_path / task)
        assert p.returncode == 0, (task, p.stdout, p.stderr)
        assert all(f'PASS {g}' in p.stdout for g in ('data', 'overfit', 'resume')), p.stdout
