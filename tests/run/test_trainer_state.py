"""One trainer state: a field of `Trainer.state_dict()` (here the data position, `progress.data_pos`) travels through the
checkpoint, is put back by the LR range test's restore, and is compared by the resume gate, all from that one definition."""
import json
from rectiflow.config import apply_overrides
from rectiflow.tasks.registry import preset
from rectiflow.api import task_trainer
from rectiflow.run.checkpointer import Checkpointer
from rectiflow.tools.gates import resume_gate, flat_state

def moons(out, steps=8):
    return apply_overrides(preset(data='moons'), ['--run.out', str(out), '--run.steps', str(steps), '--task.n_train', '512',
                                                  '--task.n_val', '64', '--data.batch_size', '64', '--run.overwrite', 'true'])

def train(tr, n):
    for _ in zip(range(n), tr.optimizer_steps()): pass
    return tr

def test_the_data_position_travels_through_the_checkpoint(tmp_path):
    cfg = moons(tmp_path / 'run')
    tr = train(task_trainer(cfg), 3)
    tr.run_dir.mkdir(parents=True)
    ckpt = tr.save_checkpoint()
    assert tr.data_pos == [0, 3]
    assert json.loads((ckpt / 'trainer_state.json').read_text())['data_pos'] == [0, 3]
    resumed = task_trainer(cfg, resume=ckpt)
    assert resumed.state_dict()['progress']['data_pos'] == [0, 3]
    assert (next(resumed.host_batches())['x1'] == next(tr.host_batches())['x1']).all()      # the same next batch

def test_the_range_tests_restore_puts_the_data_position_back(tmp_path):
    tr = train(task_trainer(moons(tmp_path / 'run')), 2)
    with tr.preserved():
        train(tr, 5)
        assert tr.data_pos == [0, 7]
    assert tr.data_pos == [0, 2] and tr.state_dict()['progress']['data_pos'] == [0, 2]
    twin = train(task_trainer(moons(tmp_path / 'twin')), 2)
    assert (next(tr.host_batches())['x1'] == next(twin.host_batches())['x1']).all()

def test_the_resume_gate_compares_the_data_position_and_names_a_load_that_forgets_it(tmp_path, monkeypatch):
    cfg = moons(tmp_path / 'run')
    assert 'progress.data_pos.1' in flat_state(task_trainer(cfg).state_dict())   # an entry the gate compares
    assert resume_gate(cfg).passed
    real_load = Checkpointer.load
    def forgets_the_data_position(self, tr, path):
        real_load(self, tr, path)
        tr.data_pos = [0, 0]                          # everything else restored: the resumed run re-reads the first batches
    monkeypatch.setattr(Checkpointer, 'load', forgets_the_data_position)
    r = resume_gate(cfg)
    assert not r.passed and r.figures['first_differing'][0] == 'progress.data_pos.1', r.figures

def draws(tr) -> tuple:
    "One draw from every random stream a training step may use: Python's, NumPy's, torch's global one and the flow's."
    import random, numpy as np, torch
    return random.random(), float(np.random.rand()), float(torch.rand(())), float(torch.rand((), generator=tr.generator))

def test_every_random_stream_is_equal_after_a_restore(tmp_path):
    import copy
    tr = train(task_trainer(moons(tmp_path / 'run')), 2)
    state = copy.deepcopy(tr.state_dict())
    first = draws(tr)
    train(tr, 2)
    tr.load_state_dict(state)
    assert draws(tr) == first

def test_the_state_holds_what_a_checkpoint_restores(tmp_path):
    "A resumed trainer's state equals, entry for entry and bit for bit, the state of the trainer that wrote it."
    from rectiflow.tools.gates import same_entry
    cfg = moons(tmp_path / 'run')
    tr = train(task_trainer(cfg), 3)
    tr.run_dir.mkdir(parents=True)
    ckpt = tr.save_checkpoint()
    written = flat_state(tr.state_dict())
    assert {'random_state', 'numpy_random_seed', 'torch_manual_seed'} <= {k.split('.')[1] for k in written
                                                                             if k.startswith('rng.')}
    first = draws(tr)                                # what the trainer that wrote it draws next
    resumed = task_trainer(cfg, resume=ckpt)
    got = flat_state(resumed.state_dict())
    assert got.keys() == written.keys()
    assert [k for k in written if not same_entry(written[k], got[k])] == []
    assert draws(resumed) == first

def test_the_trainer_finds_its_extensions_by_type_and_holds_none_by_name(tmp_path):
    from rectiflow.run.ema import EMA
    from rectiflow.run.lora import LoRA
    tr = task_trainer(moons(tmp_path / 'run'))
    assert isinstance(tr.ema, EMA) and tr.extension(EMA) is tr.ema and tr.ema in tr.callbacks.items
    assert isinstance(tr.lora, LoRA) and not tr.lora.on and tr.sharding is None and not tr.sharded
    assert not {'ema', 'lora', 'sharding', 'sharded'} & set(vars(tr))
