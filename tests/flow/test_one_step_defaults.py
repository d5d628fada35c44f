"""A mean-velocity run knows it samples in one step: `--task.objective meanflow` without sampler flags saves the
`mean` solver at 1 NFE, unguided, and its card, `rectiflow sample`, `load_run(...).sample` and the sampler gate use
it; named sampler flags are kept; a run that saved a many-step solver is refused one step naming the mean solver.
Two tiny moons runs."""
import json
from types import SimpleNamespace
import pytest, torch
from conftest import run_cli, TINY_MOONS, one_line

MEANFLOW = [*TINY_MOONS, '--task.objective', 'meanflow', '--steps', '30']

def ok(p):
    assert p.returncode == 0, p.stderr[-3000:]
    return p

@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    "A meanflow run without sampler flags (`one`), and one that names Heun at 20 NFE (`heun`: as an older run saved)."
    d = tmp_path_factory.mktemp('one_step')
    said = ok(run_cli('train', *MEANFLOW, '--out', d / 'one')).stderr
    ok(run_cli('train', *MEANFLOW, '--eval.solver', 'heun', '--eval.nfe', '20', '--out', d / 'heun'))
    return SimpleNamespace(one=d / 'one', heun=d / 'heun', root=d, said=said)

def sampler(run) -> tuple:
    e = json.loads((run / 'config.json').read_text())['eval']
    return e['solver'], e['nfe'], e['cfg_scale']

def test_a_meanflow_run_saves_the_one_step_sampler_and_its_cards_say_it(runs):
    assert sampler(runs.one) == ('mean', 1, 1.0)
    assert 'samples in one step: eval.solver mean, eval.nfe 1' in runs.said      # the note says what it brought
    for export in ('best', 'final'):
        card = (runs.one / export / 'README.md').read_text()
        assert '- samples: `mean` solver, 1 NFE, guidance scale 1,' in card, export
        assert "This run's sampler is `mean` at 1 NFE" in card, export

def test_sample_and_load_run_draw_with_one_evaluation(runs):
    p = ok(run_cli('sample', runs.one, '--n', '64', '--out', runs.root / 'one.png'))
    assert '(mean solver, 1 NFE)' in p.stdout, p.stdout
    from rectiflow.api import load_run
    run, calls = load_run(runs.one), []
    run.model.register_forward_hook(lambda module, args, out: calls.append(len(args)))
    x = run.sample(64, seed=1)
    assert x.shape == (64, 2) and calls == [4]                  # one call, with the span (x_t, t, cond, span)
    assert torch.equal(x, run.sample(64, seed=1, solver='mean', nfe=1))

def test_the_sampler_gate_judges_the_runs_one_step_against_its_euler_100(runs):
    p = run_cli('gate', 'sampler', '--out', runs.one)             # no sampler flags: the run's own setting
    assert p.returncode in (0, 1), p.stderr
    rec = [json.loads(line) for line in (runs.one / 'gates.jsonl').read_text().splitlines()][-1]
    f = rec['figures']
    assert (rec['name'], f['solver'], f['nfe'], f['cfg_scale']) == ('sampler', 'mean', 1, 1.0)
    assert rec['passed'] == (f['ratio'] <= 1 + f['margin']) and rec['passed'] == (p.returncode == 0)
    assert "mean at 1 NFE" in rec['message'] and "euler at 100 NFE (the same model's" in rec['message']
    if not rec['passed']: assert 'train longer, or jump more often' in rec['message']

def test_named_sampler_flags_are_kept(runs):
    assert sampler(runs.heun) == ('heun', 20, 1.0)
    card = (runs.heun / 'final' / 'README.md').read_text()
    assert "sampler is `heun` at 20 NFE; `--solver mean --nfe 1` samples in one jump" in card

def test_one_step_of_a_many_step_solver_is_refused_naming_the_mean_solver(runs):
    from rectiflow.config import ConfigError
    from rectiflow.api import load_run
    p = run_cli('sample', runs.heun, '--nfe', '1', '--out', runs.root / 'few.png')
    assert p.returncode == 2 and one_line(p.stderr) and not (runs.root / 'few.png').exists(), p.stderr
    assert '--nfe 1 is too small for one heun step' in p.stderr and 'choose the mean solver' in p.stderr
    p = run_cli('sample', runs.one, '--solver', 'heun', '--nfe', '1', '--out', runs.root / 'few.png')
    assert p.returncode == 2 and 'choose the mean solver' in p.stderr        # a solver given is never switched
    with pytest.raises(ConfigError, match='choose the mean solver'): load_run(runs.heun).sample(8, nfe=1)
    sweep = json.loads(ok(run_cli('evaluate', runs.heun, '--nfe', '1', '--solvers', 'mean,heun', '--json')).stdout)
    rows = {r['solver']: r for r in sweep['rows']}
    assert rows['mean']['nfe_used'] == 1 and rows['heun']['na'] == 'one heun step costs 2 NFE'
