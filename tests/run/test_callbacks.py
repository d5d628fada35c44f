"Your own callbacks from the command line: `--callbacks package.module:Name`, importable from the working directory."
import json
import pytest
from conftest import run_cli, cli_in_process, comparable, same_run, TINY_MOONS
from rectiflow.store.checkpoint import load_state_tree

EVENTS = '''
import json
from rectiflow.run.callbacks import Callback

class Events(Callback):
    "Writes down (event, step) as the trainer calls it, into RUN/events.json at the end."
    def __init__(self): self.seen = []
    def on_fit_start(self, tr): self.seen.append(('fit_start', tr.step))
    def on_loss(self, tr, loss):
        self.seen.append(('loss', tr.step))
        return loss
    def on_step_end(self, tr): self.seen.append(('step_end', tr.step))
    def on_record(self, tr, r): self.seen.append((r['kind'], r['step']))
    def on_eval(self, tr, r): self.seen.append(('eval', r['step']))
    def on_checkpoint_written(self, tr, path): self.seen.append(('checkpoint', int(path.name.split('_')[-1])))
    def on_fit_end(self, tr, end):
        self.seen.append(('fit_end', end['step']))
        (tr.run_dir / 'events.json').write_text(json.dumps(self.seen))

class Doubled(Callback):
    "Makes every loss twice as large: the trainer must step on what on_loss returns."
    def on_loss(self, tr, loss): return loss * 2
'''

FOUR_STEPS = [*TINY_MOONS, '--steps', '4', '--run.log_every', '2', '--eval.every', '2', '--eval.sample_every', '4',
              '--checkpoint.save_every', '4']

# the same run as 33_run.trainer's notebook callback: evaluations at 0, 2 and 4, checkpoints at every evaluation
EXPECTED = [('fit_start', 0), ('val', 0), ('eval', 0),
            ('loss', 0), ('step_end', 1),
            ('loss', 1), ('train', 2), ('step_end', 2), ('val', 2), ('eval', 2), ('checkpoint', 2),
            ('loss', 2), ('step_end', 3),
            ('loss', 3), ('train', 4), ('step_end', 4), ('val', 4), ('eval', 4), ('checkpoint', 4),
            ('final', 4), ('fit_end', 4)]

def test_a_callback_from_the_command_line_sees_the_exact_sequence_of_events(tmp_path):
    (tmp_path / 'mymod.py').write_text(EVENTS)
    p = run_cli('train', *FOUR_STEPS, '--out', 'runs/cb', '--callbacks', 'mymod:Events', cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    run = tmp_path / 'runs' / 'cb'
    assert [tuple(e) for e in json.loads((run / 'events.json').read_text())] == EXPECTED
    assert json.loads((run / 'config.json').read_text())['run']['callbacks'] == 'mymod:Events'

def test_on_loss_changes_the_loss_the_trainer_steps_on(tmp_path):
    (tmp_path / 'mymod.py').write_text(EVENTS)
    every_step = [*FOUR_STEPS, '--run.log_every', '1']
    plain = run_cli('train', *every_step, '--out', 'runs/plain', cwd=tmp_path)
    doubled = run_cli('train', *every_step, '--out', 'runs/doubled', '--callbacks', 'mymod:Doubled', cwd=tmp_path)
    assert plain.returncode == 0 and doubled.returncode == 0, plain.stderr + doubled.stderr
    def first_train(name):
        recs = [json.loads(l) for l in open(tmp_path / 'runs' / name / 'metrics.jsonl')]
        return next(r for r in recs if r['kind'] == 'train')
    a, b = first_train('plain'), first_train('doubled')
    assert a['step'] == b['step'] == 1
    assert b['loss'] == 2 * a['loss']                                # the recorded loss is the returned one
    assert abs(b['grad_norm'] - 2 * a['grad_norm']) <= 1e-6 * a['grad_norm']   # and its gradient was stepped on

def test_a_bad_callback_path_is_one_line_and_nothing_is_written(tmp_path):
    (tmp_path / 'mymod.py').write_text(EVENTS)
    p = run_cli('train', *FOUR_STEPS, '--out', 'runs/bad', '--callbacks', 'mymod:Missing', cwd=tmp_path)
    assert p.returncode == 2 and 'Missing' in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / 'runs' / 'bad').exists()


OUTSIDE = '''
import torch
from rectiflow.run.callbacks import Callback

class LossNoise(Callback):
    "A term of its own on every loss, drawn from its own generator: what it keeps must resume with the run."
    def __init__(self): self.g, self.draws = torch.Generator().manual_seed(7), 0
    def on_loss(self, tr, loss):
        self.draws += 1
        return loss * (1 + 0.1 * torch.randn((), generator=self.g))
    def state_dict(self): return {'g': self.g.get_state(), 'draws': self.draws}
    def load_state_dict(self, state):
        self.g.set_state(state['g'])
        self.draws = state['draws']

class GradientNoise(Callback):
    "An extension: noise on the gradients before each optimizer step, from its own generator (a resume must keep it)."
    def __init__(self): self.g, self.steps = torch.Generator().manual_seed(11), 0
    def on_before_update(self, tr):
        self.steps += 1
        for p in tr.params: p.grad.add_(torch.randn(p.grad.shape, generator=self.g), alpha=1e-2)
    def state_dict(self): return {'g': self.g.get_state(), 'steps': self.steps}
    def load_state_dict(self, state):
        self.g.set_state(state['g'])
        self.steps = state['steps']

class StopAt6(Callback):
    "Asks the loop to stop after step 6."
    def on_step_end(self, tr):
        if tr.step == 6: tr.request_stop('enough for now')
'''
TINY = [*TINY_MOONS, '--steps', '20', '--checkpoint.save_every', '10']      # the settings of the tiny_run fixture

# A loss term of its own (a callback), and noise on the gradients before the optimizer step (an extension)
@pytest.mark.parametrize('name, count', [('LossNoise', 'draws'), ('GradientNoise', 'steps')])
def test_a_callback_from_outside_with_state_of_its_own_resumes_bit_identically(tmp_path, one_thread, tiny_run, name,
                                                                             count):
    (tmp_path / 'outside.py').write_text(OUTSIDE)
    noisy = [*TINY, '--callbacks', f'outside:{name}']
    assert run_cli('train', *noisy, '--out', 'straight', cwd=tmp_path).returncode == 0
    p = cli_in_process('train', *noisy, '--out', 'parted', '--max-steps', '10', cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    saved = load_state_tree(tmp_path / 'parted' / 'checkpoints' / 'step_000010' / 'callbacks.safetensors')
    assert saved[name][count] == 10
    p = cli_in_process('train', '--resume', '--out', 'parted', '--max-steps', '0', '--no-progress', cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    same_run(tmp_path / 'straight', tmp_path / 'parted')
    assert comparable(tmp_path / 'straight') != comparable(tiny_run)     # the term did change the run (same settings)

def test_a_callback_asks_the_loop_to_stop_and_the_run_resumes_to_the_same_end(tmp_path, tiny_run, one_thread):
    (tmp_path / 'outside.py').write_text(OUTSIDE)
    p = cli_in_process('train', *TINY, '--out', 'run', '--callbacks', 'outside:StopAt6', cwd=tmp_path)
    assert p.returncode == 0 and 'stopped by enough for now at step 6' in p.stdout, p.stdout + p.stderr
    run = tmp_path / 'run'
    info = json.loads((run / 'run_info.json').read_text())
    assert (info['status'], info['reason'], info['stopped_at']) == ('stopped_by_callback', 'enough for now', 6)
    assert (run / 'checkpoints' / 'step_000006').is_dir()
    p = cli_in_process('train', '--resume', '--out', run, '--no-progress', cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    same_run(run, tiny_run)

def test_a_callback_watches_and_an_extension_changes():
    "The two contracts: a Callback has the events and the state; the hooks whose values count are an Extension's."
    import torch
    from rectiflow.run.callbacks import Callback, Extension, Callbacks, INDEXED
    value_hooks = {'on_loss', 'on_model', 'trained_parameters', 'forward_window', 'loss_term', 'weights', 'write_export',
                   'on_before_update', 'on_update', 'on_built', 'on_ready', 'on_train_record', 'on_run_facts'}
    assert not value_hooks & set(dir(Callback)) and value_hooks <= set(dir(Extension))
    class Quiet(Extension): pass
    class Halves(Extension):
        def on_loss(self, trainer, loss): return loss / 2
    cbs = Callbacks([Quiet(), Halves(), Halves()])
    assert all(cbs.hooks[e] == [] for e in INDEXED if e != 'on_loss')     # defaults are never called, step or not
    assert cbs.on_loss(None, torch.tensor(8.0)) == 2.0                     # chained: each takes the last's loss
