"""Every number a config holds, of every core section and every built-in task's section: out of its range, not finite
or past what an int can hold, it is one `ConfigError` line that names its key, applied as the CLI applies it.
Configs only, no training: the whole module takes seconds."""
import math
from dataclasses import dataclass, fields
from typing import get_type_hints
import pytest
from conftest import main_in_process
from rectiflow.config import Config, ConfigError, apply_overrides, check_ranges, field_ranges, validate_config
from rectiflow.tasks.registry import BUILTIN_TASKS, DEFAULT_TASK, preset, resolve_task, task_names, validate

pytestmark = pytest.mark.xdist_group('config_ranges')

NOT_NUMBERS = ('1e400', 'inf', '-inf', 'nan')
CORE = [f.name for f in fields(Config) if f.name != 'task']
TASKS = [name for name in task_names() if name in BUILTIN_TASKS]

def numbers_of(cls) -> list[tuple[str, type]]:
    "(name, int or float) of each numeric field of dataclass `cls`."
    hints = get_type_hints(cls)
    return [(f.name, hints[f.name]) for f in fields(cls) if hints[f.name] in (int, float)]

def walk() -> list[tuple[str, str, str, type]]:
    "(task, section, field, type) of every number: the core sections once (on the default task), each task's own."
    core = [(DEFAULT_TASK, s, name, typ) for s in CORE for name, typ in numbers_of(get_type_hints(Config)[s])]
    own = [(t, 'task', name, typ) for t in TASKS if resolve_task(t).config is not None
           for name, typ in numbers_of(resolve_task(t).config)]
    return core + own

CASES = walk()

def just_outside(rng, typ) -> list[str]:
    "The values next to `rng`'s ends on their wrong side, as a command line spells them."
    def step(x, down):
        if typ is int: return x - 1 if down else x + 1
        return math.nextafter(x, -math.inf if down else math.inf)
    out = []
    if rng.lo is not None: out.append(rng.lo if rng.lo_open else step(rng.lo, True))
    if rng.hi is not None: out.append(rng.hi if rng.hi_open else step(rng.hi, False))
    return [repr(typ(v)) for v in out]

def refusal(task: str, key: str, value: str) -> str:
    "The message `--key value` on `task`'s preset is refused with, applied then validated as `rectiflow train` does."
    with pytest.raises(ConfigError) as e: validate(apply_overrides(preset(task), [f'--{key}', value]))
    msg = str(e.value)
    assert '\n' not in msg and key in msg, msg
    return msg

def test_the_walk_finds_every_section():
    assert set(TASKS) == set(BUILTIN_TASKS)
    assert {s for _, s, _, _ in CASES} == {*CORE, 'task'}
    assert {t for t, s, _, _ in CASES if s == 'task'} == set(TASKS)    # every built-in task has numbers of its own

@pytest.mark.parametrize('task,section,name,typ', CASES, ids=[f'{t}-{s}.{n}' for t, s, n, _ in CASES])
def test_every_number_declares_a_range_and_refuses_what_lies_outside_it(task, section, name, typ):
    key, cfg = f'{section}.{name}', preset(task)
    rng = field_ranges(getattr(cfg, section))[name]
    assert rng is not None, f'{key} declares no range'
    check_ranges(getattr(cfg, section), section)                       # the preset's own value lies inside
    for value in NOT_NUMBERS:
        words = 'expects an integer' if typ is int else 'must be a finite number'
        assert f'{key} {words}' in refusal(task, key, value)
    for value in just_outside(rng, typ):
        assert f'{key} must {rng.must()}, got ' in refusal(task, key, value)

def test_an_integer_field_refuses_what_is_no_integer():
    for value in ('2.5e0', '2.5', '1e400', 'nan'):
        assert f"run.steps expects an integer, got '{value}'." == refusal('flow', 'run.steps', value)
    assert apply_overrides(preset(), ['--run.steps', '1e3']).run.steps == 1000

@dataclass
class OwnOptions:                   # a user's own task section: no ranges declared
    width: int = 8
    scale: float = 1.0

def test_a_section_without_ranges_gets_the_finiteness_check_only():
    validate_config(Config(task=OwnOptions(width=-3, scale=-1e300)))
    for bad in (float('nan'), float('inf'), -float('inf')):
        with pytest.raises(ConfigError, match='task.scale must be a finite number'):
            validate_config(Config(task=OwnOptions(scale=bad)))

def one_line_exit_2(tmp_path, *args) -> str:
    "The one stderr line of `rectiflow train ARGS` refused before anything is written."
    code, out, err = main_in_process('train', '--out', tmp_path / 'run', '--no-progress', *args, cwd=tmp_path)
    lines = err.strip().splitlines()
    assert code == 2 and out == '' and len(lines) == 1 and lines[0].startswith('rectiflow: error:'), (code, out, err)
    assert not (tmp_path / 'run').exists()
    return lines[0]

@pytest.mark.parametrize('args,message', [
    (['--optim.lr', '1e400'], 'optim.lr must be a finite number, got inf.'),
    (['--optim.lr', 'nan'], 'optim.lr must be a finite number, got nan.'),
    (['--steps', 'inf'], "run.steps expects an integer, got 'inf'."),
    (['--run.steps', '1e400'], "run.steps expects an integer, got '1e400'."),
    (['--data.num_workers', '-1'], 'data.num_workers must be >= 0, got -1.'),
    (['--eval.cfg_scale', '-1'], 'eval.cfg_scale must be >= 0, got -1.0.'),
    (['--task', 'vae', '--task.val_fraction', '1'], 'task.val_fraction must lie in (0, 1), got 1.0.'),
], ids=['lr-1e400', 'lr-nan', 'steps-inf', 'steps-1e400', 'num_workers-negative', 'cfg_scale-negative',
        'task-val_fraction'])
def test_train_refuses_a_number_out_of_range_in_one_line(tmp_path, args, message):
    assert one_line_exit_2(tmp_path, *args).endswith(message)

@pytest.mark.parametrize('yaml,message', [
    ('optim:\n  lr: .inf\n', 'optim.lr must be a finite number, got inf.'),
    ('optim:\n  lr: -.inf\n', 'optim.lr must be a finite number, got -inf.'),
    ('run:\n  steps: .inf\n', 'run.steps expects an integer, got inf.'),
    ('task:\n  t_mean: .nan\n', 'task.t_mean must be a finite number, got nan.'),
], ids=['lr-inf', 'lr-minus-inf', 'steps-inf', 't_mean-nan'])
def test_a_yaml_config_with_inf_is_refused_in_one_line(tmp_path, yaml, message):
    (tmp_path / 'c.yaml').write_text(yaml)
    assert one_line_exit_2(tmp_path, '--config', tmp_path / 'c.yaml').endswith(message)
