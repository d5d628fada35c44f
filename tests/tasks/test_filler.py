"The regression filler task (36_tasks.filler) through `rectiflow train --task filler`, tiny, as a user runs it."
import json
from conftest import main_in_process, run_cli, cli_in_process, records

def test_filler_task_trains_from_the_cli_and_beats_its_untrained_floor(tmp_path):
    run = tmp_path / 'filler'
    p = run_cli('train', '--task', 'filler', '--out', run, '--no-progress', '--steps', '60', '--eval.every', '30',
                '--eval.sample_every', '60', '--run.log_every', '30', '--data.batch_size', '32')
    assert p.returncode == 0, p.stderr
    assert 'vs untrained floor' in p.stdout, p.stdout                        # the task's summary line
    vals = [r for r in records(run) if r['kind'] == 'val']
    assert vals[0]['floor'] == 'untrained' and 'psnr' in vals[0]
    final = records(run)[-1]
    assert final['kind'] == 'final' and final['psnr'] > final['psnr_floor'] + 3, final
    assert json.loads((run / 'best' / 'info.json').read_text())['psnr'] == max(v['psnr'] for v in vals)
    assert (run / 'samples' / 'step_000060.png').exists()
    p = cli_in_process('evaluate', run, '--json')
    assert p.returncode == 0 and json.loads(p.stdout)['psnr'] == max(v['psnr'] for v in vals), p.stderr
    p = cli_in_process('sample', run, '--n', '6', '--out', tmp_path / 'strip.png')     # predictions for held-out scenes, as a strip
    assert p.returncode == 0 and 'wrote 6 samples' in p.stdout and (tmp_path / 'strip.png').exists(), (p.stdout, p.stderr)

def test_a_task_brings_its_own_data(tmp_path):
    code, _, err = main_in_process('train', '--task', 'filler', '--data', 'moons', '--out', tmp_path / 'x')
    assert code == 2 and 'brings its own data' in err
