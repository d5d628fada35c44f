"""Few-step sampling from the command line: `evaluate --nfe` sweeps a run into nfe_sweep.json and .png, and the
sampler gate judges one setting against Euler at 100 NFE."""
import json
import pytest
from conftest import cli_in_process, copy_run, main_in_process, run_cli, TINY_MOONS

@pytest.fixture(scope='module')
def moons_run(tmp_path_factory):
    "A moons run trained long enough that one sampling step is far from many."
    run = tmp_path_factory.mktemp('sweep') / 'run'
    p = run_cli('train', *TINY_MOONS, '--steps', '300', '--run.log_every', '100', '--eval.every', '100',
                '--eval.sample_every', '300', '--out', run)
    assert p.returncode == 0, p.stderr
    return run

def test_evaluate_nfe_sweeps_a_run_and_keeps_the_table_in_it(moons_run, tmp_path):
    run = copy_run(moons_run, tmp_path / 'run')
    p = cli_in_process('evaluate', run, '--nfe', '1,2,8', '--solvers', 'euler,heun')
    assert p.returncode == 0, p.stderr
    assert '| euler (reference) | 100 |' in p.stdout and 'n/a: one heun step costs 2 NFE' in p.stdout
    sweep = json.loads((run / 'nfe_sweep.json').read_text())
    assert (run / 'nfe_sweep.png').stat().st_size > 0
    assert sweep['metric'] == 'w2' and [(r['solver'], r['nfe']) for r in sweep['rows']] == [
        ('euler', 1), ('euler', 2), ('euler', 8), ('heun', 1), ('heun', 2), ('heun', 8)]
    one = sweep['rows'][0]
    assert one['nfe_used'] == 1 and one['w2'] > sweep['reference']['w2']     # one step is far from many

def test_the_sampler_gate_passes_the_reference_setting_and_fails_one_step(moons_run, tmp_path):
    run = copy_run(moons_run, tmp_path / 'run')
    p = cli_in_process('gate', 'sampler', '--data', 'moons', '--out', run, '--eval.solver', 'euler', '--eval.nfe', '100')
    assert p.returncode == 0, p.stderr
    p = cli_in_process('gate', 'sampler', '--data', 'moons', '--out', run, '--eval.solver', 'euler', '--eval.nfe', '1')
    assert p.returncode == 1 and 'outside the margin of 10%' in p.stdout, p.stdout
    gates = [json.loads(l) for l in (run / 'gates.jsonl').read_text().splitlines()]
    assert [(g['name'], g['passed']) for g in gates] == [('sampler', True), ('sampler', False)]
    assert gates[0]['figures']['ratio'] == 1.0 and gates[1]['figures']['ratio'] > 1.1

def test_bad_sweep_input_is_one_line(tiny_run):
    code, _, err = main_in_process('evaluate', tiny_run, '--nfe', '0,2')
    assert code == 2 and 'expected positive integers' in err
    code, _, err = main_in_process('evaluate', tiny_run, '--nfe', '2', '--solvers', 'rk9')
    assert code == 2 and "Unknown solver 'rk9'" in err
