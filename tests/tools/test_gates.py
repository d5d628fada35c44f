"Gates, the range test, evaluate and the evaluation rules through the `rectiflow` command, as a user runs them."
import json
from pathlib import Path
import pytest
from conftest import run_cli, main_in_process, TINY_MOONS, cli_in_process, records

def gate_records(run):
    return [json.loads(l) for l in (Path(run) / 'gates.jsonl').read_text().splitlines()]

def test_gate_command_passes_and_records_on_the_digits_default(tmp_path):
    run = tmp_path / 'run'
    p = run_cli('gate', 'data,overfit,resume', '--out', run)
    assert p.returncode == 0, p.stderr
    recs = gate_records(run)
    assert [(r['name'], r['passed']) for r in recs] == [('data', True), ('overfit', True), ('resume', True)]
    assert recs[1]['figures']['ratio'] < 0.05 and (run / 'gates' / 'overfit.png').exists()
    assert p.stdout.count('PASS') == 3

def test_gate_command_fails_with_exit_1_when_the_global_batch_exceeds_the_data(tmp_path):
    p = cli_in_process('gate', 'data', '--out', tmp_path / 'run', '--data.batch_size', '1000', '--optim.grad_accum', '2')
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert 'FAIL data' in p.stdout and 'global batch of 2000 exceeds the 1437 training items' in p.stdout
    assert gate_records(tmp_path / 'run')[0]['passed'] is False

def test_unknown_gate_is_a_one_line_error(tmp_path):
    code, _, err = main_in_process('gate', 'speed', '--out', tmp_path / 'run')
    assert code == 2 and "Unknown gate 'speed'" in err and not (tmp_path / 'run').exists()

def test_train_refuses_when_a_gate_fails_and_force_trains_anyway(tmp_path):
    run = tmp_path / 'run'
    args = ['train', *TINY_MOONS, '--steps', '20', '--out', run, '--gates', 'overfit', '--optim.lr', '1e-7', '--schedule.min_lr', '0']
    p = run_cli(*args)
    assert p.returncode == 1 and 'not training: gate overfit failed' in p.stderr, p.stderr
    assert sorted(x.name for x in run.iterdir()) == ['.lock', '.lock_holder.json', 'gates', 'gates.jsonl']   # nothing trained
    p = cli_in_process(*args, '--force')
    assert p.returncode == 0, p.stderr
    assert json.loads((run / 'run_info.json').read_text())['status'] == 'completed'
    assert [r['passed'] for r in gate_records(run)] == [False, False]               # both attempts recorded, kept by the run

def test_train_with_passing_gates_trains(tmp_path):
    run = tmp_path / 'run'
    p = cli_in_process('train', *TINY_MOONS, '--steps', '20', '--out', run, '--gates', 'data,overfit')
    assert p.returncode == 0, p.stderr
    assert [r['passed'] for r in gate_records(run)] == [True, True]
    assert json.loads((run / 'run_info.json').read_text())['status'] == 'completed'

def test_evaluate_reproduces_the_logged_validation_figures(tmp_path, tiny_run):
    run = tiny_run
    vals = [json.loads(l) for l in (run / 'metrics.jsonl').read_text().splitlines() if '"val"' in l]
    p = cli_in_process('evaluate', run / 'checkpoints' / 'step_000020', '--json')
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert (rec['step'], rec['val_loss'], rec['val_loss_ema']) == (20, vals[-1]['val_loss'], vals[-1]['val_loss_ema'])
    p = cli_in_process('evaluate', run, '--quality')
    assert p.returncode == 0 and 'val_loss_ema' in p.stdout and 'w2' in p.stdout, p.stderr
    code, _, err = main_in_process('evaluate', tmp_path / 'nothing')
    assert code == 2 and 'is not a checkpoint' in err

def test_max_steps_stops_the_loop_and_resume_finishes_the_schedule(tmp_path):
    run = tmp_path / 'run'
    p = run_cli('train', *TINY_MOONS, '--steps', '40', '--max-steps', '20', '--out', run)
    assert p.returncode == 0, p.stderr
    assert 'status max_steps at step 20' in p.stdout and f'train --resume --out {run} --max-steps 0' in p.stdout
    assert json.loads((run / 'run_info.json').read_text())['status'] == 'max_steps'
    # resumed as it was, the run is at its end: it finishes again and takes no step past it
    p = cli_in_process('train', '--resume', '--out', run, '--no-progress')
    assert p.returncode == 0, p.stderr
    assert 'status max_steps at step 20' in p.stdout and max(r['step'] for r in records(run)) == 20
    p = cli_in_process('train', '--resume', '--out', run, '--no-progress', '--max-steps', '0')
    assert p.returncode == 0, p.stderr
    info = json.loads((run / 'run_info.json').read_text())
    assert info['status'] == 'completed' and info['final']['step'] == 40

def test_a_run_the_abort_rule_stops_exits_4(tmp_path):
    run = tmp_path / 'run'
    # 'max' mode on a falling loss: every evaluation after the untrained floor is "worse" than it
    p = cli_in_process('train', *TINY_MOONS, '--steps', '100', '--out', run, '--eval.mode', 'max',
                       '--eval.abort_margin', '1e-6')
    assert p.returncode == 4, (p.stdout, p.stderr)
    assert 'run aborted at step 20' in p.stderr and 'best/ holds the best model' in p.stderr
    assert json.loads((run / 'run_info.json').read_text())['status'] == 'aborted'
    assert json.loads((run / 'best' / 'info.json').read_text())['step'] == 0

def test_lr_find_command_suggests_and_records(tmp_path):
    run = tmp_path / 'run'
    p = run_cli('lr-find', '--data', 'moons', '--out', run, '--no-progress', '--task.n_train', '2048', '--data.batch_size', '128',
                '--lo', '1e-5', '--range-steps', '60')
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith('Suggested lr') and (run / 'lr_find.png').stat().st_size > 1000
    recs = [json.loads(l) for l in (run / 'lr_find.jsonl').read_text().splitlines()]
    assert recs[-1]['kind'] == 'suggestion' and recs[-1]['has_descent'] and len(recs) > 10
    assert f"{recs[-1]['suggestion']:.2g}" in p.stdout
    # the run directory still takes a new run: the range test's records are pre-run records
    assert cli_in_process('train', *TINY_MOONS, '--steps', '10', '--out', run).returncode == 0
    assert (run / 'lr_find.jsonl').exists()

@pytest.mark.slow     # the range test refusing a range: its chapter tests the rule; this is the CLI exit code
def test_lr_find_command_fails_with_exit_1_on_a_range_without_descent(tmp_path):
    p = run_cli('lr-find', '--data', 'moons', '--out', tmp_path / 'run', '--no-progress', '--lo', '1e-9', '--hi', '1e-8',
                '--range-steps', '20', '--task.n_train', '2048', '--data.batch_size', '128')
    assert p.returncode == 1 and 'No descending band' in p.stdout, (p.stdout, p.stderr)

def test_lr_gate_passes_on_a_learnable_range_and_fails_on_a_dead_one():
    from rectiflow.tasks.registry import preset
    from rectiflow.tools.gates import lr_gate
    cfg = preset(data='moons'); cfg.task.n_train, cfg.data.batch_size = 2048, 128
    r = lr_gate(cfg, lo=1e-5, hi=1.0, steps=60)
    assert r.passed and 1e-4 < r.figures['suggestion'] < 1.0, r
    r = lr_gate(cfg, lo=1e-9, hi=1e-8, steps=20)
    assert not r.passed and 'no descending band' in r.message.lower(), r
