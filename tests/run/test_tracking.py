"""The trackers of a run (`23_run.tracking`): one tiny run into TensorBoard, trackio and W&B at once, each read back
from what it wrote in the run directory."""
import json
from pathlib import Path
import psutil
import pytest
from PIL import Image
from conftest import TINY_MOONS, cli_in_process, records
from rectiflow.run.tracking import read_tensorboard, read_trackio, read_wandb, strip_caption

TRACKED = [*TINY_MOONS, '--steps', '20', '--eval.sample_every', '10', '--gates', 'data',
           '--run.tracker', 'tensorboard,trackio,wandb']

@pytest.fixture(scope='module')
def tracked(tmp_path_factory):
    """A tiny run with its data gate and all three trackers: records at steps 0 and 10, a strip at 10, then a NaN loss
    at step 20; the run's directory, the processes this one had before it and after it, trackio's store before and
    after it."""
    import trackio.utils
    run = tmp_path_factory.mktemp('tracking') / 'run'
    me, store = psutil.Process(), trackio.utils.TRACKIO_DIR
    with pytest.MonkeyPatch.context() as mp:
        for name in ('WANDB_MODE', 'TRACKIO_DIR', 'WANDB_DIR'): mp.delenv(name, raising=False)
        before = {p.pid for p in me.children(recursive=True)}
        p = cli_in_process('train', *TRACKED, '--out', run, faults={'nan_at_step': 20})
        after = {p.pid for p in me.children(recursive=True)}
    assert p.returncode == 3 and 'training stopped' in p.stderr, p.stderr
    return run, before, after, store, trackio.utils.TRACKIO_DIR

def scalars(run) -> dict:
    "`{kind/field: [(step, value)]}` of the numbers in the run's metrics.jsonl, as the trackers are sent them."
    out = {}
    for r in records(run):
        for k, v in r.items():
            if k not in ('step', 'kind') and isinstance(v, (int, float)) and not isinstance(v, bool):
                out.setdefault(f"{r['kind']}/{k}", []).append((r['step'], v))
    return out

def close(a: dict, b: dict):
    "Whether two `{name: [(step, value)]}` agree: the same names and steps, values to float32's precision."
    return a.keys() == b.keys() and all([s for s, _ in a[k]] == [s for s, _ in b[k]] and
                                        all(abs(x - y) <= 1e-6 * max(1, abs(y)) for (_, x), (_, y) in zip(a[k], b[k]))
                                        for k in a)

def test_every_tracker_holds_the_records_numbers_at_their_steps(tracked):
    run = tracked[0]
    want = scalars(run)
    assert {'val/val_loss_ema', 'train/loss'} <= want.keys() and [s for s, _ in want['train/loss']] == [10]
    assert close(read_tensorboard(run / 'tensorboard'), want)
    trackio = read_trackio(run / 'trackio', run='run')['metrics']
    assert close({k: v for k, v in trackio.items() if k != 'samples/strip'}, want)
    wandb = read_wandb(run)['history']
    assert close({k: v for k, v in wandb.items() if k != 'samples/strip'}, want)

def test_the_sample_strip_reaches_every_tracker_as_an_image_with_its_caption(tracked):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    run = tracked[0]
    size = Image.open(run / 'samples' / 'step_000010.png').size
    acc = EventAccumulator(str(run / 'tensorboard'), size_guidance={'images': 0, 'tensors': 0})
    acc.Reload()
    (tb_image,) = acc.Images('samples/strip')
    (tb_caption,) = acc.Tensors('samples/caption/text_summary')
    assert (tb_image.step, (tb_image.width, tb_image.height)) == (10, size)
    assert (tb_caption.step, tb_caption.tensor_proto.string_val[0].decode()) == (10, strip_caption(10))
    ((step, image),) = read_trackio(run / 'trackio')['metrics']['samples/strip']
    assert (step, image['caption']) == (10, strip_caption(10))
    assert Image.open(run / 'trackio' / 'media' / image['file_path']).size == size
    wandb = read_wandb(run)
    ((step, image),) = wandb['history']['samples/strip']
    assert (step, image['caption']) == (10, strip_caption(10))
    assert Image.open(wandb['folder'] / 'files' / image['path']).size == size

def test_the_config_and_the_gate_results_go_to_every_tracker(tracked):
    import yaml
    run = tracked[0]
    config = json.loads((run / 'config.json').read_text())
    gate = json.loads((run / 'gates.jsonl').read_text().splitlines()[-1])
    (hparams,) = (run / 'tensorboard').glob('*/hparams.yml')
    for values in (yaml.safe_load(hparams.read_text()), read_trackio(run / 'trackio')['config'],
                   read_wandb(run)['config']):
        assert values['run.tracker'] == 'tensorboard,trackio,wandb'
        assert values['optim.lr'] == config['optim']['lr'] and values['task.n_train'] == 2048
        assert (values['gates.data.passed'], values['gates.data.message']) == (gate['passed'], gate['message'])

def test_a_non_finite_stop_is_an_alert_and_the_runs_summary(tracked):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    run = tracked[0]
    info = json.loads((run / 'run_info.json').read_text())
    assert info['status'] == 'failed' and info['reason'].startswith('NonFiniteError')
    assert read_trackio(run / 'trackio')['alerts'] == [('run failed', info['reason'], 'error', 10)]
    wandb = read_wandb(run)
    assert wandb['alerts'] == [('run failed', info['reason'], 'ERROR')]
    assert (wandb['summary']['status'], wandb['summary']['reason']) == ('failed', info['reason'])
    acc = EventAccumulator(str(run / 'tensorboard'), size_guidance={'tensors': 0})
    acc.Reload()
    (end,) = acc.Tensors('run/end/text_summary')
    assert end.tensor_proto.string_val[0].decode() == f"failed: {info['reason']}"

def test_the_trackers_write_in_the_run_directory_and_leave_no_process_behind(tracked):
    run, before, after, store_before, store_after = tracked
    assert after <= before, 'a process the trackers started is still running (wandb-core?)'
    assert {'tensorboard', 'trackio', 'wandb'} <= {p.name for p in run.iterdir()}
    assert read_wandb(run)['folder'].name.startswith('offline-run-')        # offline: W&B was not asked to sync
    assert store_after == store_before                                      # trackio's store is its own again
