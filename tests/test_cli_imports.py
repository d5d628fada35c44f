"""The command answers --help and refuses bad input without importing the training stack (torch, diffusers and what
they pull in: seconds of imports). Its speed is measured in benchmarks/import_time.py; here, what it imported."""
import json, subprocess, sys
import pytest

HEAVY = ('torch', 'diffusers', 'transformers', 'peft', 'datasets', 'accelerate')
# `main` in a fresh interpreter; its exit code and the heavy modules loaded by then, as the last line of stdout
PROBE = f"""import json, sys
from rectiflow.cli import main
try: code = main(sys.argv[1:])
except SystemExit as e: code = e.code
print(json.dumps({{'code': code, 'heavy': [m for m in {HEAVY!r} if m in sys.modules]}}))"""

def run_main(*args, cwd) -> tuple[dict, str, str]:
    "`rectiflow ARGS` through `main` in a fresh interpreter: (exit code and heavy modules, the rest of stdout, stderr)."
    p = subprocess.run([sys.executable, '-c', PROBE, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    *out, last = p.stdout.splitlines() or ['{}']
    return json.loads(last), '\n'.join(out), p.stderr

@pytest.mark.parametrize('args, code, text', [
    (['--help'], 0, 'Train, gate, evaluate and sample'),
    (['train', '--help'], 0, 'flow, vae'),                     # the task names filled in, no task imported
    (['encode', '--help'], 0, '--device DEVICE'),
    (['train', '--task', 'nosuch'], 2, "rectiflow: error: Unknown task 'nosuch'; choose one of flow, vae"),
    (['train', '--run.steps', '-3'], 2, 'rectiflow: error: run.steps must be positive, got -3.'),
    (['train', '--steps', '0', '--data.batch_size', '64'], 2, 'rectiflow: error: run.steps must be positive, got 0.'),
    (['train', '--optim.lr', 'abc'], 2, 'rectiflow: error: optim.lr expects a number'),
    (['train', '--optimizer.lr', '1'], 2, "rectiflow: error: Unknown config section 'optimizer'"),
    (['gate', 'data', '--run.seed', '-1'], 2, 'rectiflow: error: run.seed must lie in [0, 4294967295], got -1.'),
    (['sample', '--solver', 'rk4', 'RUN'], 2, "rectiflow: error: argument --solver: invalid choice: 'rk4'"),
    (['evaluate', 'RUN', '--nfe', '0'], 2, 'rectiflow: error: argument --nfe: expected positive integers'),
])
def test_help_and_refusals_import_no_training_stack(tmp_path, args, code, text):
    res, out, err = run_main(*args, cwd=tmp_path)
    assert res == {'code': code, 'heavy': []}, (res, err)
    assert text in (out if code == 0 else err), (out, err)
    assert list(tmp_path.iterdir()) == []                     # and nothing written
