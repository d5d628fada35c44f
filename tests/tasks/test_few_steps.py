"""Few-step sampling from the command line: `evaluate --nfe` sweeps a run into nfe_sweep.json and .png; the sampler
gate judges one setting against Euler at 100 NFE; a reflow student of a short teacher run has straighter paths and
a better one-step sample; the coupling generation, killed, resumes at the first chunk missing."""
import json, signal, time
from pathlib import Path
import pytest, torch
from safetensors.torch import load_file
from conftest import cli_in_process, start_cli, copy_run, main_in_process, TINY_MOONS

MOONS = [*TINY_MOONS, '--task.n_train', '4096', '--data.batch_size', '256', '--run.log_every', '100', '--eval.every',
         '100', '--eval.sample_every', '300']
REFLOW = ['--task', 'reflow', '--no-progress', '--data.batch_size', '256', '--run.log_every', '100', '--eval.every', '100',
          '--eval.sample_every', '300', '--eval.n_samples', '500']

def cli(*args):
    p = cli_in_process(*map(str, args))
    assert p.returncode == 0, p.stderr
    return p

@pytest.fixture(scope='module')
def moons_run(tmp_path_factory):
    "A moons run trained long enough that one sampling step is far from many: the sweeps' run and reflow's teacher."
    run = tmp_path_factory.mktemp('few') / 'run'
    cli('train', *MOONS, '--steps', '300', '--out', run)
    return run

def test_evaluate_nfe_sweeps_a_run_and_keeps_the_table_in_it(moons_run, tmp_path):
    run = copy_run(moons_run, tmp_path / 'run')
    p = cli('evaluate', run, '--nfe', '1,2,8', '--solvers', 'euler,heun')
    assert '| euler (reference) | 100 |' in p.stdout and 'n/a: one heun step costs 2 NFE' in p.stdout
    sweep = json.loads((run / 'nfe_sweep.json').read_text())
    assert (run / 'nfe_sweep.png').stat().st_size > 0
    assert sweep['metric'] == 'w2' and [(r['solver'], r['nfe']) for r in sweep['rows']] == [
        ('euler', 1), ('euler', 2), ('euler', 8), ('heun', 1), ('heun', 2), ('heun', 8)]
    one = sweep['rows'][0]
    assert one['nfe_used'] == 1 and one['w2'] > sweep['reference']['w2']     # one step is far from many

def test_the_sampler_gate_passes_the_reference_setting_and_fails_one_step(moons_run, tmp_path):
    run = copy_run(moons_run, tmp_path / 'run')
    cli('gate', 'sampler', '--data', 'moons', '--out', run, '--eval.solver', 'euler', '--eval.nfe', '100')
    p = cli_in_process('gate', 'sampler', '--data', 'moons', '--out', str(run), '--eval.solver', 'euler', '--eval.nfe', '1')
    assert p.returncode == 1 and 'outside the margin of 10%' in p.stdout, p.stdout
    gates = [json.loads(l) for l in (run / 'gates.jsonl').read_text().splitlines()]
    assert [(g['name'], g['passed']) for g in gates] == [('sampler', True), ('sampler', False)]
    assert gates[0]['figures']['ratio'] == 1.0 and gates[1]['figures']['ratio'] > 1.1

def test_bad_sweep_input_is_one_line(tiny_run):
    code, _, err = main_in_process('evaluate', tiny_run, '--nfe', '0,2')
    assert code == 2 and 'expected positive integers' in err
    code, _, err = main_in_process('evaluate', tiny_run, '--nfe', '2', '--solvers', 'rk9')
    assert code == 2 and "Unknown solver 'rk9'" in err

def one_step_w2(run) -> float:
    return json.loads(cli('evaluate', run, '--nfe', '1', '--solvers', 'euler', '--json').stdout)['rows'][0]['w2']

def test_reflow_straightens_a_short_teacher_run(moons_run, tmp_path):
    student = tmp_path / 'reflow'
    cli('train', *REFLOW, '--task.teacher', moons_run, '--task.pairs', '4096', '--task.cache', tmp_path / 'cache',
        '--steps', '200', '--out', student)
    final = json.loads((student / 'run_info.json').read_text())['final']
    # the mean squared deviation of each model's own ODE path from the line between its ends, from the same noise
    assert final['straightness'] <= 0.7 * final['straightness_teacher'], final
    assert one_step_w2(student) < one_step_w2(moons_run)

def chunks(cache: Path) -> dict:
    files = cache.rglob('chunk_*.safetensors')
    return {str(p.relative_to(cache)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in files}

def test_coupling_generation_resumes_after_a_kill_and_keeps_the_teachers_classes(tmp_path):
    teacher, cache = tmp_path / 'teacher', tmp_path / 'cache'
    cli('train', '--out', teacher, '--no-progress', '--steps', '20', '--run.log_every', '10', '--eval.every', '20',
        '--eval.sample_every', '20', '--eval.n_samples', '20')
    args = ['train', *REFLOW, '--task.teacher', str(teacher), '--task.pairs', '320', '--task.val_pairs', '64',
            '--task.chunk', '32', '--task.cache', str(cache), '--steps', '10', '--eval.n_samples', '20',
            '--data.batch_size', '32', '--out', str(tmp_path / 'reflow')]
    proc = start_cli(*args, '--task.delay', '0.5')
    deadline = time.time() + 120
    while len(chunks(cache)) < 3 and time.time() < deadline and proc.poll() is None: time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = chunks(cache)
    assert 3 <= len(before) < 10, before                      # killed part-way through the training couplings
    cli(*args)
    after = chunks(cache)
    assert len(after) == 10 + 2 and all(after[n] == before[n] for n in before)   # the chunks written stayed as they were
    labels = torch.cat([load_file(str(f))['cond'] for f in sorted(cache.rglob('chunk_*.safetensors'))])
    assert set(labels.tolist()) == set(range(10))             # the digits teacher's classes
    info = json.loads((tmp_path / 'reflow' / 'run_info.json').read_text())
    assert info['status'] == 'completed' and info['data']['n_classes'] == 10 and 'fd' in info['final']
