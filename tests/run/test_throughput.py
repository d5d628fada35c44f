"""Speed on the CPU: `run.compile` (regional, under the `aot_eager` backend) trains the same curve and resumes across
settings; gradient checkpointing keeps the gradients of a diffusers UNet; bf16 autocast keeps the loss and the EMA in
fp32; the throughput figures are consistent with the FLOPs counted once; `auto` threads leave out the cores of a process
that stays busy."""
import copy, json, os, re, subprocess, sys, time
import pytest, torch
from conftest import main_in_process, records, final_weights, TINY_MOONS
from rectiflow.run.lifecycle import run_figures
from rectiflow.run import throughput

TINY = [*TINY_MOONS, '--steps', '20', '--checkpoint.save_every', '10']       # the settings of the tiny_run fixture
REGIONAL = ['--run.compile', 'regional', '--run.compile_backend', 'aot_eager']


def test_the_cores_free_leave_out_a_process_that_stays_busy():
    "The median of the sampled windows drops a moment's burst (the notebook's fake machine), not a busy loop."
    loop = subprocess.Popen([sys.executable, '-c', 'while True: pass'])
    try:
        time.sleep(0.5)                                         # it runs
        assert throughput.cpu_room()[2] >= 0.5
    finally:
        loop.kill()
        loop.wait()




def test_regional_compile_trains_the_same_curve_and_counts_its_graphs(tiny_run, tmp_path, one_thread):
    run = tmp_path / 'compiled'
    code, _, err = main_in_process('train', *TINY, '--out', run, *REGIONAL)
    assert code == 0, err
    got, want = records(run), records(tiny_run)
    assert [r['kind'] for r in got] == [r['kind'] for r in want]
    for g, w in zip(got, want):
        for k in ('loss', 'val_loss', 'val_loss_ema'):
            if k in w: assert g[k] == pytest.approx(w[k], rel=1e-5, abs=1e-7), (k, g, w)
    train = [r for r in got if r['kind'] == 'train']
    assert all(r['compiled_graphs'] >= 1 for r in train) and 'compiled_graphs' not in records(tiny_run)[1]
    assert list(final_weights(run)) == list(final_weights(tiny_run))           # no _orig_mod. in the export's keys

@pytest.mark.parametrize('first,then', [([], REGIONAL), (REGIONAL, [])])
def test_a_run_resumes_across_compile_settings(tiny_run, tmp_path, one_thread, first, then):
    run = tmp_path / 'run'
    code, _, err = main_in_process('train', *TINY, '--out', run, '--max-steps', '10', *first)
    assert code == 0, err
    code, _, err = main_in_process('train', '--resume', '--out', run, '--no-progress', '--max-steps', '0', *then)
    assert code == 0, err
    # aot_eager traces the same aten operators eager runs, so on the CPU the runs are bit-identical
    assert [run_figures(r) for r in records(run)] == [run_figures(r) for r in records(tiny_run)]
    a, b = final_weights(run), final_weights(tiny_run)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

def test_gradient_checkpointing_keeps_the_gradients_of_a_diffusers_unet():
    from rectiflow.flow.models import UNetVelocity
    from rectiflow.run.throughput import enable_gradient_checkpointing
    torch.manual_seed(0)
    plain = UNetVelocity(sample_size=8, in_channels=1, channels=(8, 16), layers_per_block=1, n_classes=3, norm_groups=4)
    ckpt = enable_gradient_checkpointing(copy.deepcopy(plain))
    assert ckpt.unet.is_gradient_checkpointing and not plain.unet.is_gradient_checkpointing
    def grads(model):
        g = torch.Generator().manual_seed(1)
        x, t, c = torch.randn(4, 1, 8, 8, generator=g), torch.rand(4, generator=g), torch.tensor([0, 1, 2, 0])
        model.train()
        model(x, t, c).square().mean().backward()
        return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    g0, g1 = grads(plain), grads(ckpt)
    assert g0.keys() == g1.keys() and all(torch.allclose(g0[k], g1[k], rtol=1e-5, atol=1e-7) for k in g0)

def test_bf16_autocast_keeps_the_loss_and_the_ema_in_fp32(tmp_path):
    from rectiflow.config import apply_overrides
    from rectiflow.tasks.registry import preset
    from rectiflow.api import task_trainer
    cfg = apply_overrides(preset(data='moons'), ['--run.precision', 'bf16', '--run.out', str(tmp_path / 'run'),
                                                 '--task.n_train', '512', '--task.n_val', '64', '--data.batch_size', '64'])
    tr = task_trainer(cfg)
    assert tr.accelerator.mixed_precision == 'bf16'
    loss, _ = next(tr.optimizer_steps())
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert all(p.dtype == torch.float32 for p in tr.ema.ema_model.shadow_params) and all(p.dtype == torch.float32 for p in tr.params)

def test_the_throughput_figures_agree_with_the_flops_counted_once(tiny_run):
    info = json.loads((tiny_run / 'run_info.json').read_text())
    assert info['flops_per_item'] > 0 and info['peak_tflops'] is None          # a CPU has no dense bf16 peak
    for r in (r for r in records(tiny_run) if r['kind'] == 'train'):
        assert r['tflops'] == pytest.approx(info['flops_per_item'] * r['items_per_s'] / 1e12, rel=1e-9)
        assert r['mfu'] is None and r['steps_per_s'] > 0

def test_recompiles_with_width_buckets_are_counted_and_stop_growing(tmp_path):
    # lines come in width buckets: a new width recompiles once, with that dimension then dynamic (torch.compile's
    # automatic dynamic shapes), so the count grows by a graph, not by a graph per bucket
    run = tmp_path / 'lines'
    code, _, err = main_in_process('train', '--task', 'lines', '--out', run, '--no-progress', '--steps', '12',
                                   '--task.n_train', '512', '--task.n_val', '64', '--run.log_every', '1',
                                   '--eval.every', '12', '--eval.sample_every', '12', '--eval.n_samples', '8',
                                   '--eval.val_items', '32', *REGIONAL)
    assert code == 0, err
    graphs = [r['compiled_graphs'] for r in records(run) if r['kind'] == 'train']
    assert len(graphs) == 12 and graphs == sorted(graphs)
    assert graphs[0] < graphs[-1] <= graphs[0] + 2 and graphs[-4:] == [graphs[-1]] * 4, graphs

def test_the_cpu_threads_are_chosen_for_the_work_and_recorded(tmp_path, monkeypatch):
    n = torch.get_num_threads()
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    def threads(name, *extra):
        code, _, err = main_in_process('train', *TINY, '--steps', '2', '--out', tmp_path / name, *extra)
        assert code == 0, err
        info = json.loads((tmp_path / name / 'run_info.json').read_text())
        return info['threads'], info['threads_why'], torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        count, why, now = threads('auto', '--task.channels', '32')
        assert (count, now) == (1, 1) and why.startswith('auto: a small step'), why    # a small 2-D MLP: one thread
        large = ('--data.batch_size', '1024')                                   # 2e9 training FLOPs a step
        rooms = {(2, None, 0.02): 2, (2, None, 1.0): 1, (1, None, 0.0): 1, (8, 1.5, 0.0): 1}   # (CPUs, quota, busy)
        for i, (room, want) in enumerate(rooms.items()):
            monkeypatch.setattr(throughput, 'cpu_room', lambda room=room: room)   # the machine's facts, as measured
            count, why, now = threads(f'large{i}', *large)
            assert (count, now) == (want, want), (room, why)
            assert why.startswith(f'auto: {want} of {room[1] or room[0]:g} cores free'), why
        monkeypatch.undo()
        monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
        count, why, now = threads('measured', *large)                            # this machine, as it is now
        assert count == now and 1 <= count <= len(os.sched_getaffinity(0)), (count, why)
        form = rf'auto: {count} of \d+ cores free \([\d.]+ busy with other work\), [\d.]+ GFLOPs a step'
        assert re.fullmatch(form, why), why
        assert threads('explicit', '--run.threads', '2') == (2, 'run.threads', 2)
        monkeypatch.setenv('OMP_NUM_THREADS', '2')
        assert threads('env')[:2] == (2, 'OMP_NUM_THREADS')                   # the environment's choice is kept
    finally: torch.set_num_threads(n)
