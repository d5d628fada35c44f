"""A mean-velocity run from the command line: it resumes bit-identically with the forward-mode product in its step,
samples in one step, sweeps its NFE with the mean solver first, says on its card how to sample, fine-tunes a plain run
into a one-step one (`--init-from`), takes LoRA adapters on a mean-velocity base, and passes the overfit and resume
gates. Tiny moons runs, all in this process."""
import json
from types import SimpleNamespace
import pytest, torch
from conftest import (cli_in_process, main_in_process, TINY_MOONS, comparable, final_weights, same_run, one_line,
                      records)

MEAN = ['--task.objective', 'meanflow', '--eval.solver', 'mean', '--eval.nfe', '1', '--eval.cfg_scale', '1']
RUN = [*TINY_MOONS, *MEAN, '--steps', '40', '--checkpoint.save_every', '20', '--eval.every', '20',
       '--eval.sample_every', '40']

def ok(p):
    assert p.returncode == 0, p.stderr[-3000:]
    return p

@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """A mean-velocity run (`straight`); the same run stopped at step 20 and resumed (`resumed`); a plain run and a
    mean-velocity run started from it (`init`); LoRA adapters on the straight run's export (`lora`)."""
    d = tmp_path_factory.mktemp('meanflow')
    ok(cli_in_process('train', *RUN, '--out', d / 'straight'))
    ok(cli_in_process('train', *RUN, '--run.max_steps', '20', '--out', d / 'resumed'))
    ok(cli_in_process('train', '--resume', '--out', d / 'resumed', '--run.max_steps', '0'))
    ok(cli_in_process('train', *TINY_MOONS, '--steps', '40', '--out', d / 'plain'))
    ok(cli_in_process('train', *RUN, '--init-from', d / 'plain', '--out', d / 'init'))
    ok(cli_in_process('train', *RUN, '--steps', '10', '--lora.rank', '4', '--init-from', d / 'straight' / 'final',
                      '--out', d / 'lora'))
    return SimpleNamespace(**{k: d / k for k in ('straight', 'resumed', 'plain', 'init', 'lora')}, root=d)

def test_a_stopped_mean_velocity_run_resumes_bit_identically(runs):
    same_run(runs.straight, runs.resumed)
    assert any(k.startswith('span_embed.') for k in final_weights(runs.straight))   # the interval input trained

def test_it_samples_in_one_step_and_sweeps_with_the_mean_solver_first(runs):
    out = runs.root / 'one.png'
    p = ok(cli_in_process('sample', runs.straight, '--solver', 'mean', '--nfe', '1', '--out', out))
    assert out.stat().st_size > 0 and 'wrote' in p.stdout
    sweep = json.loads(ok(cli_in_process('evaluate', runs.straight, '--nfe', '1,2', '--json')).stdout)
    rows = [(r['solver'], r['nfe']) for r in sweep['rows']]
    assert rows[:2] == [('mean', 1), ('mean', 2)] and ('euler', 1) in rows
    one = {(r['solver'], r['nfe']): r for r in sweep['rows']}
    assert one['mean', 1]['nfe_used'] == 1 and one['mean', 1]['w2'] != one['euler', 1]['w2']   # the span reaches it

def test_the_card_says_how_to_sample_in_one_step(runs):
    card = (runs.straight / 'final' / 'README.md').read_text()
    assert '--solver mean --nfe 1' in card and 'average' in card
    assert '--solver mean' not in (runs.plain / 'final' / 'README.md').read_text()

def test_a_plain_run_fine_tunes_into_a_one_step_one(runs):
    info = json.loads((runs.init / 'run_info.json').read_text())
    assert info['init_from'].endswith('step_000040')
    plain, init = final_weights(runs.plain), final_weights(runs.init)
    assert set(plain) < set(init) and all('span' in k for k in set(init) - set(plain))
    first = lambda run: next(r for r in comparable(run) if r['kind'] == 'val')
    assert first(runs.init)['val_loss'] < first(runs.straight)['val_loss']      # it starts from trained weights

def test_lora_adapters_train_on_a_mean_velocity_base(runs):
    weights = final_weights(runs.lora) if (runs.lora / 'final' / 'model').is_dir() else None
    assert (runs.lora / 'final' / 'adapter_model.safetensors').exists() or weights
    ok(cli_in_process('sample', runs.lora, '--solver', 'mean', '--nfe', '1', '--out', runs.root / 'lora.png'))

def test_a_task_with_an_objective_of_its_own_refuses_meanflow(tmp_path):
    code, _, err = main_in_process('train', '--task', 'lines', '--task.objective', 'meanflow', '--out', tmp_path / 'r')
    assert code == 2 and one_line(err) and 'objective of its own' in err

def test_the_overfit_and_resume_gates_pass_on_a_mean_velocity_digits_run(tmp_path):
    run = tmp_path / 'run'
    p = cli_in_process('gate', 'overfit,resume', *MEAN, '--task.channels', '16,32', '--out', run)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = [json.loads(l) for l in (run / 'gates.jsonl').read_text().splitlines()]
    assert [(r['name'], r['passed']) for r in recs] == [('overfit', True), ('resume', True)]

def test_the_sampler_gate_judges_one_step_against_the_runs_euler_100(runs):
    p = cli_in_process('gate', 'sampler', '--data', 'moons', *MEAN, '--out', runs.straight)
    assert p.returncode in (0, 1), p.stderr
    rec = [json.loads(l) for l in (runs.straight / 'gates.jsonl').read_text().splitlines()][-1]
    f = rec['figures']
    assert (rec['name'], f['solver'], f['nfe'], f['metric']) == ('sampler', 'mean', 1, 'w2')
    assert rec['passed'] == (f['ratio'] <= 1 + f['margin']) and 'mean at 1 NFE' in p.stdout

def test_the_split_objective_trains_without_forward_mode_resumes_bit_identically_and_samples_in_one_step(tmp_path):
    split = [a if a != 'meanflow' else 'splitmeanflow' for a in RUN]
    ok(cli_in_process('train', *split, '--out', tmp_path / 'straight'))
    ok(cli_in_process('train', *split, '--run.max_steps', '20', '--out', tmp_path / 'resumed'))
    ok(cli_in_process('train', '--resume', '--out', tmp_path / 'resumed', '--run.max_steps', '0'))
    same_run(tmp_path / 'straight', tmp_path / 'resumed')
    val = [r['val_loss_ema'] for r in records(tmp_path / 'straight') if r['kind'] == 'val']
    assert val[-1] < val[0], val                                                  # it learns
    out = tmp_path / 'one.png'
    ok(cli_in_process('sample', tmp_path / 'straight', '--solver', 'mean', '--nfe', '1', '--out', out))
    assert out.stat().st_size > 0
