"""The widgets as a user sees them: JupyterLab on 127.0.0.1, a notebook run in headless Chromium.

`make browser` installs Debian's `chromium`; Playwright (a dev requirement) drives it. The screenshot
is kept as a test artifact in `tests/artifacts/browser_widgets.png`.
"""
import json, os, secrets, signal, socket, subprocess, sys, time, urllib.request
from pathlib import Path
import nbformat, pytest
from conftest import run_cli

CHROMIUM = os.environ.get('RECTIFLOW_CHROMIUM', '/usr/bin/chromium')
ARTIFACTS = Path(__file__).parents[1] / 'artifacts'
WAIT_S = 120  # every single wait; headless Chromium and a cold kernel on two shared cores are slow

# The notebook the browser runs, next to two tiny training runs `run/` and `run_b/`: every widget of
# `rectiflow.ui.widgets`, each shown with something to show (a compare pane, gate results, a range test).
CELLS = [
    'from rectiflow.ui.widgets import LossCurves, SampleGrid, GateBoard, RunComparison, LRFinder\n'
    'from rectiflow.tasks.registry import load_config',
    'LossCurves("run", "run_b")',
    'grid = SampleGrid("run"); grid.compare.value = True; grid',
    'board = GateBoard("run"); board.run("data"); board.run("overfit"); board',
    'RunComparison("run", "run_b")',
    'finder = LRFinder(load_config("run/config.json"), lo=1e-5, steps=60, run_dir="run"); finder.run(); finder',
]

# What must be on the page once every cell ran: ipywidgets 8 draws sliders with noUiSlider and an
# `Image` as <img class="widget-image">; the widgets tag their own elements with these classes.
SLIDER = '.jp-OutputArea .rectiflow-sample-grid .widget-slider .noUi-handle'
IMAGE = '.jp-OutputArea img.rectiflow-sample'
PLOT = '.jp-OutputArea img.rectiflow-curves-plot'
# One screenshot per widget: tests/artifacts/NAME.png, and nbs/images/NAME.png with RECTIFLOW_DOC_IMAGES=1.
WIDGETS = {'loss_curves': '.rectiflow-loss-curves', 'sample_grid': '.rectiflow-sample-grid', 'gate_board': '.rectiflow-gate-board',
           'run_comparison': '.rectiflow-run-comparison', 'lr_finder': '.rectiflow-lr-finder'}
DOC_IMAGES = Path(__file__).parents[2] / 'nbs' / 'images'

def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def _wait_until(ok, what, timeout=WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok(): return
        time.sleep(0.5)
    raise TimeoutError(f'{what} within {timeout} s')

def _answers(url):
    try: return urllib.request.urlopen(url, timeout=5).status == 200
    except OSError: return False

@pytest.fixture
def lab(tmp_path):
    "JupyterLab serving `tmp_path` (with a tiny run and `widgets.ipynb`), isolated from ~; yields its notebook URL."
    if not Path(CHROMIUM).exists(): pytest.skip(f'{CHROMIUM} is missing: run `make browser` (needs root and apt-get)')
    pytest.importorskip('playwright', reason='Playwright is missing: pip install -e ".[dev]"')
    for name, lr in (('run', '1e-3'), ('run_b', '3e-3')):
        p = run_cli('train', '--data', 'moons', '--steps', '30', '--out', tmp_path / name, '--no-progress', '--optim.lr', lr,
                    '--task.n_train', '2048', '--data.batch_size', '128', '--eval.every', '10', '--eval.n_samples', '300',
                    '--eval.sample_every', '10', '--run.log_every', '10', '--task.channels', '64')
        assert p.returncode == 0, p.stderr
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in CELLS])
    nb.metadata.kernelspec = {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}
    nbformat.write(nb, tmp_path / 'widgets.ipynb')
    home = tmp_path / 'jupyter'
    news = home / 'config/lab/user-settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings'
    news.parent.mkdir(parents=True); news.write_text(json.dumps({'fetchNews': 'false'}))  # no toast over the outputs
    env = {k: v for k, v in os.environ.items() if k != 'MPLBACKEND'}  # the kernel draws inline, as for a user
    env.update(JUPYTER_CONFIG_DIR=str(home / 'config'), JUPYTER_DATA_DIR=str(home / 'data'),
               JUPYTER_RUNTIME_DIR=str(home / 'runtime'), IPYTHONDIR=str(home / 'ipython'),
               JUPYTER_PLATFORM_DIRS='1', OMP_NUM_THREADS='1', PATH=f'{Path(sys.executable).parent}:{env["PATH"]}')
    port, token = _free_port(), secrets.token_hex(16)
    log = open(home / 'server.log', 'w')
    server = subprocess.Popen(
        [sys.executable, '-m', 'jupyterlab', '--no-browser', '--ip', '127.0.0.1', '--port', str(port),
         f'--IdentityProvider.token={token}', '--ServerApp.port_retries=0', f'--ServerApp.root_dir={tmp_path}',
         *(['--allow-root'] if os.geteuid() == 0 else []),
         # no network: no news, update checks or extension catalogue
         '--LabApp.news_url=', '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate',
         '--LabApp.extension_manager=readonly', '--LabApp.expose_app_in_browser=True'],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f'http://127.0.0.1:{port}'
    try:
        _wait_until(lambda: server.poll() is not None or _answers(f'{base}/api/status?token={token}'), 'JupyterLab answered')
        assert server.poll() is None, f'JupyterLab exited with code {server.returncode}'
        yield f'{base}/lab/tree/widgets.ipynb?token={token}'
    except (TimeoutError, AssertionError) as e:
        raise AssertionError(f'{e}; server log:\n{(home / "server.log").read_text()[-3000:]}')
    finally:
        _stop(server, f'{base}/api/shutdown?token={token}')
        log.close()

def _stop(server, shutdown_url):
    "Shut the server and its kernels down through the API; signal its process group if that does not work."
    try: urllib.request.urlopen(urllib.request.Request(shutdown_url, method='POST'), timeout=10)
    except OSError: pass
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None and server.poll() is None:
            try: os.killpg(server.pid, sig)
            except ProcessLookupError: pass
        try: server.wait(timeout=30); return
        except subprocess.TimeoutExpired: pass

# Run > Run All Cells through JupyterLab's command registry; its promise resolves (true when no cell
# raised) once the kernel has answered every cell. `evaluate` has no timeout of its own, hence the race.
RUN_ALL = '''async ms => {
    const app = window.jupyterapp, panel = app.shell.currentWidget;
    const run = (async () => {
        await panel.context.ready; await panel.sessionContext.ready;
        return await app.commands.execute('notebook:run-all-cells');
    })();
    const late = new Promise((_, fail) => setTimeout(() => fail(new Error(`cells still running after ${ms / 1000} s`)), ms));
    return await Promise.race([run, late]);
}'''

NATURAL_WIDTH = 'imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)'

def test_widgets_render_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / 'browser_widgets.png'
    shot.unlink(missing_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=['--no-sandbox', '--disable-dev-shm-usage'],
                                     timeout=WAIT_S * 1000)
        try:
            page = browser.new_page(viewport={'width': 1280, 'height': 3200})
            page.set_default_timeout(WAIT_S * 1000)
            page.goto(lab)
            page.wait_for_function('() => window.jupyterapp?.shell?.currentWidget?.sessionContext?.session?.kernel')
            all_ran = page.evaluate(RUN_ALL, WAIT_S * 1000)
            try:
                assert all_ran, f'a cell failed: {page.locator(".jp-OutputArea-output").all_inner_texts()}'
                for sel in (SLIDER, IMAGE, PLOT): page.wait_for_selector(sel, state='visible')
                page.wait_for_function(f'() => [...document.querySelectorAll("{IMAGE}, {PLOT}")].every(i => i.complete)')
                widths = {sel: page.eval_on_selector_all(sel, NATURAL_WIDTH) for sel in (IMAGE, PLOT)}
                assert all(w and min(w) > 0 for w in widths.values()), widths
                assert 'Loading widget' not in page.inner_text('.jp-Notebook')
                for name, sel in WIDGETS.items():
                    widget = page.locator(f'.jp-OutputArea {sel}').first
                    widget.wait_for(state='visible')
                    widget.screenshot(path=ARTIFACTS / f'{name}.png')
                    if os.environ.get('RECTIFLOW_DOC_IMAGES'): widget.screenshot(path=DOC_IMAGES / f'{name}.png')
            finally:
                page.screenshot(path=shot, full_page=True)
                print(f'screenshot: {shot}')
        finally:
            browser.close()
