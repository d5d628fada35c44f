"""A one-step student distilled from a tiny moons run through the command line: it evaluates, samples and writes its card
with the mean solver at 1 NFE without being told, resumes bit-identically (one process and two), passes the overfit and
resume gates, takes LoRA adapters, and its teacher's paths are drawn once."""
import json
from types import SimpleNamespace
import pytest
from conftest import BIN, cli_in_process, run_cli, same_run, final_weights, records
from ranks import workers_said

TORCHRUN = [str(BIN / 'torchrun'), '--standalone', '--nproc_per_node', '2']

def student_args(teacher, cache) -> list:
    "A 40-step student of `teacher` on 512 paths cached under `cache`, validating every 20 steps."
    return ['--task', 'distill', '--task.teacher', teacher, '--task.cache', cache,
            '--task.trajectories', '512', '--task.val_trajectories', '64', '--eval.val_items', '64',
            '--data.batch_size', '64', '--steps', '40', '--schedule.warmup_steps', '10', '--checkpoint.save_every', '20',
            '--eval.every', '20', '--eval.sample_every', '40', '--run.log_every', '10', '--eval.n_samples', '500']

def ok(p):
    assert p.returncode == 0, p.stderr[-3000:]
    return p

@pytest.fixture(scope='module')
def runs(tiny_run, tmp_path_factory):
    "A student of the tiny run (`straight`), and the same student stopped at step 20 and resumed (`resumed`)."
    d = tmp_path_factory.mktemp('distill')
    args = student_args(tiny_run, d / 'cache')
    ok(run_cli('train', *args, '--no-progress', '--out', d / 'straight'))     # the first as a user runs it
    ok(cli_in_process('train', *args, '--run.max_steps', '20', '--out', d / 'resumed'))
    ok(cli_in_process('train', '--resume', '--out', d / 'resumed', '--run.max_steps', '0'))
    return SimpleNamespace(straight=d / 'straight', resumed=d / 'resumed', root=d, args=args, teacher=tiny_run)

def test_a_student_samples_in_one_step_without_being_told(runs):
    e = json.loads((runs.straight / 'config.json').read_text())['eval']
    assert (e['solver'], e['nfe'], e['cfg_scale'], e['metric']) == ('mean', 1, 1.0, 'teacher_gap_1')
    final = json.loads((runs.straight / 'run_info.json').read_text())['final']
    assert final['w2'] > 0
    p = ok(cli_in_process('sample', runs.straight, '--out', runs.root / 'one.png'))
    assert '(mean solver, 1 NFE)' in p.stdout and (runs.root / 'one.png').stat().st_size > 0
    card = (runs.straight / 'final' / 'README.md').read_text()
    assert '--solver mean --nfe 1' in card
    val = [r for r in records(runs.straight) if r['kind'] == 'val']
    assert val[-1]['teacher_gap_1'] < val[0]['teacher_gap_1']            # its one jump moved towards the teacher's
    best = json.loads((runs.straight / 'best' / 'info.json').read_text())['step']
    assert best == min((r for r in val if r['step'] > 0), key=lambda r: r['teacher_gap_1'])['step']   # its best jump
    assert any(k.startswith('span_embed.') for k in final_weights(runs.straight))

def test_a_stopped_student_resumes_bit_identically(runs):
    same_run(runs.straight, runs.resumed)

def test_the_teachers_paths_are_drawn_once(runs):
    chunks = sorted((runs.root / 'cache').rglob('chunk_*.safetensors'))
    assert len(chunks) == 2                                              # the training paths and the validation ones
    before = {c: c.stat().st_mtime_ns for c in chunks}
    ok(cli_in_process('train', *runs.args, '--steps', '2', '--out', runs.root / 'again'))
    assert {c: c.stat().st_mtime_ns for c in chunks} == before

def test_two_processes_resume_a_student_bit_identically(runs):
    whole, halves = runs.root / 'ddp_whole', runs.root / 'ddp_halves'
    short = [*runs.args, '--steps', '20', '--checkpoint.save_every', '10', '--eval.every', '10', '--no-progress']
    for args in ([*short, '--out', whole], [*short, '--max-steps', '10', '--out', halves],
                 ['--resume', '--out', halves, '--max-steps', '0', '--no-progress']):
        p = run_cli('train', *args, launcher=TORCHRUN)
        assert p.returncode == 0, workers_said(p)
    assert json.loads((whole / 'run_info.json').read_text())['num_processes'] == 2
    same_run(whole, halves)

def test_the_overfit_and_resume_gates_pass_on_a_student(runs):
    out = runs.root / 'gated'
    p = cli_in_process('gate', 'overfit,resume', *runs.args, '--out', out)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = [json.loads(l) for l in (out / 'gates.jsonl').read_text().splitlines()]
    assert [(r['name'], r['passed']) for r in recs] == [('overfit', True), ('resume', True)]

def test_lora_adapters_train_on_a_student(runs):
    out = runs.root / 'lora'
    ok(cli_in_process('train', *runs.args, '--steps', '10', '--lora.rank', '4', '--init-from',
                      runs.straight / 'final', '--out', out))
    ok(cli_in_process('sample', out, '--out', runs.root / 'lora.png'))

def test_a_teacher_is_required_and_jumps_must_double(tmp_path):
    p = cli_in_process('train', '--task', 'distill', '--out', tmp_path / 'a')
    assert p.returncode == 2 and '--task.teacher RUN' in p.stderr
    p = cli_in_process('train', '--task', 'distill', '--task.teacher', tmp_path, '--task.jumps', '1,3', '--out',
                       tmp_path / 'b')
    assert p.returncode == 2 and 'must double from 1' in p.stderr

def test_a_student_follows_its_teachers_data(runs, tmp_path):
    "A 2-D teacher's student takes the 2-D recipe: the command line reads the teacher's dataset from its config.json."
    from rectiflow.cli import make_parser, config_from_args
    def config(*extra):
        args, rest = make_parser().parse_known_args(['train', '--task', 'distill', *map(str, extra), '--out',
                                                     str(tmp_path / 'x')])
        return config_from_args(args, rest)
    for teacher in (runs.teacher, runs.teacher / 'final'):                        # a run, its export
        cfg = config('--task.teacher', teacher)
        assert (cfg.data.batch_size, cfg.run.steps, cfg.task.trajectories, cfg.task.steps) == (512, 4000, 16384, 32)
        assert cfg.schedule.kind == 'cosine'                       # at a constant LR the moons' student diverged
    cfg = config('--task.teacher', tmp_path / 'nothing')           # no run there: the digits' recipe (then its error)
    assert (cfg.data.batch_size, cfg.run.steps, cfg.schedule.kind) == (128, 600, 'constant')
