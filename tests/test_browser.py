"""A real browser: JupyterLab (started here) + Debian Chromium driven by Python playwright.

Opens lab 01 in recorded mode on the repo's own results/ (no GPU: CUDA_VISIBLE_DEVICES=""), runs
all cells, and drives the explorer: the vector-width slider and the dtype change the plot; 'hot',
then an op recorded only cold, still shows data; a shape typed into the custom box is shown. It
takes a screenshot of the panel (every recorded GPU side by side: one column per results/<gpu>/
folder) into its tmp dir; README's picture, labs/explorer.png, is replaced only on request:
LABKIT_REFRESH_SCREENSHOT=1 pytest tests/test_browser.py (a test run leaves the tracked tree as it
was). Run: pytest tests/test_browser.py (failures leave a screenshot and the server log in the tmp
dir printed).
"""
import contextlib
import json
import os
import shutil
import time
import urllib.request
from pathlib import Path

import pytest
from jupyter_runner import running

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(os.environ.get("LABKIT_BROWSER_RESULTS", ROOT / "results"))
README_PICTURE = ROOT / "labs" / "explorer.png"
REFRESH = os.environ.get("LABKIT_REFRESH_SCREENSHOT") == "1"  # the only way a test writes README's picture
CHROMIUM = os.environ.get("LABKIT_CHROMIUM", "/usr/bin/chromium")
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """JupyterLab on a free port, serving a copy of labs/ (recorded mode on RESULTS); stopped by PID."""
    tmp = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "labs", tmp / "labs")
    settings = tmp / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false",
                                                                         "checkForUpdates": False}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               LABKIT_RESULTS=str(RESULTS), CUDA_VISIBLE_DEVICES="",
               JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"))
    with running("jupyterlab", tmp, env, tmp / "jupyterlab.log",
                 [f"--LabApp.workspaces_dir={tmp}", "--LabApp.news_url=None", "--LabApp.extension_manager=readonly",
                  "--LabApp.expose_app_in_browser=True"]) as (base, token):
        yield {"base": base, "token": token, "tmp": tmp}


@pytest.fixture
def page(lab_server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        pg = browser.new_page(viewport={"width": 1500, "height": 2000})
        pg.set_default_timeout(30_000)
        try:
            yield pg
        finally:
            browser.close()
            _delete_sessions(lab_server)


@contextlib.contextmanager
def failure_screenshot(pg, server):
    try:
        yield
    except BaseException:
        shot = server["tmp"] / f"failure-{int(time.time())}.png"
        try:
            pg.screenshot(path=str(shot), full_page=True)
        except Exception:
            pass
        print(f"screenshot: {shot}; server log: {server['tmp'] / 'jupyterlab.log'}")
        raise


def _delete_sessions(server):
    base, token = server["base"], server["token"]
    try:
        sessions = json.load(urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=5))
        for s in sessions:
            req = urllib.request.Request(f"{base}/api/sessions/{s['id']}?token={token}", method="DELETE")
            urllib.request.urlopen(req, timeout=5)
    except OSError:
        pass


KERNEL_IDLE = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.connectionStatus === 'connected' && k.status === 'idle';
}"""
ALL_RAN = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const cells = w.content.model.cells;
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    if (c.type === 'code' && !c.executionCount) return false;
  }
  const k = w.sessionContext.session.kernel;
  return k.status === 'idle';
}"""
# the explorer's main figure (the first plotly plot of the notebook): its first trace and title
PLOT = """() => {
  const gd = document.querySelector('.jp-Notebook .js-plotly-plot');
  if (!gd || !gd.data || !gd.data.length) return null;
  // the first shown line of any GPU column: a GPU with no rows for an op leaves its column empty
  const shown = gd.data.filter(t => t.visible !== false && t.y && t.y.length);
  const first = shown[0] || gd.data[0];
  return {y: Array.from(first.y || []).map(v => (v === null ? NaN : v)), name: first.name,
          title: (gd.layout.title && gd.layout.title.text) || '',
          columns: (gd.layout.annotations || []).map(a => a.text)};
}"""


def open_lab01(pg, s):
    pg.goto(f"{s['base']}/lab/tree/labs/01_vectorized_add.ipynb?token={s['token']}&reset")
    pg.wait_for_function("() => window.jupyterapp !== undefined")
    pg.evaluate("() => window.jupyterapp.started")
    pg.wait_for_function(KERNEL_IDLE, timeout=60_000)
    pg.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    pg.wait_for_function(ALL_RAN, timeout=150_000, polling=250)
    pg.wait_for_function(f"() => ({PLOT})() !== null")
    return pg.evaluate(PLOT)


def wait_plot(pg, ok, what, timeout_s=15):
    """The plot once `ok(plot)` holds; AssertionError naming `what` otherwise."""
    deadline, now = time.time() + timeout_s, None
    while time.time() < deadline:
        now = pg.evaluate(PLOT)
        if now and ok(now):
            return now
        time.sleep(0.1)
    raise AssertionError(f"{what}: not seen within {timeout_s} s (plot: {now and now['title']!r}, y={now and now['y']})")


def has_data(p) -> bool:
    return any(v == v for v in p["y"])  # a finite point (NaN != NaN)


def control(pg, kind: str, label: str):
    return pg.locator(f".widget-{kind}:has(label:text-is('{label}'))").first


@pytest.mark.timeout(240)
def test_lab01_explorer_controls_update_the_plot(page, lab_server):
    pg = page
    with failure_screenshot(pg, lab_server):
        p0 = open_lab01(pg, lab_server)
        assert p0["name"] == "f16x8_pack" and "add f16: f16x8_pack" in p0["title"] and "recorded" in p0["title"]
        assert has_data(p0) and "Recorded data" in pg.inner_text(".lk-recorded")

        # vector width: 8 -> 2 (keyboard on the slider handle)
        slider = pg.locator(".widget-slider:has(label.widget-label:text-is('vector width'))").first
        assert slider.locator(".widget-readout").inner_text().strip() == "8"
        slider.locator(".noUi-handle").first.focus()
        pg.keyboard.press("ArrowLeft")
        p1 = wait_plot(pg, lambda p: p["title"] != p0["title"], "width 8 -> 2")
        assert p1["name"] == "f16x2" and "f16x2" in p1["title"] and p1["y"] != p0["y"]
        assert slider.locator(".widget-readout").inner_text().strip() == "2"

        # dtype: f16 -> bf16
        control(pg, "dropdown", "dtype").locator("select").select_option("bf16")
        p2 = wait_plot(pg, lambda p: p["title"] != p1["title"], "dtype f16 -> bf16")
        assert p2["title"].startswith("add bf16: bf16x2") and p2["y"] != p1["y"] and has_data(p2)


@pytest.mark.timeout(240)
def test_lab01_recorded_hot_op_switch_custom_shapes_and_readme_screenshot(page, lab_server, tmp_path):
    from labkit import recorded

    pg = page
    with failure_screenshot(pg, lab_server):
        p0 = open_lab01(pg, lab_server)
        gpus = sorted(set(recorded.load(RESULTS)["gpu"]))
        assert p0["columns"][:len(gpus)] == (gpus if len(gpus) > 1 else [])   # one column per recorded GPU
        panel = pg.locator(".jp-OutputArea-output:has(.js-plotly-plot)").first
        panel.scroll_into_view_if_needed()
        pg.wait_for_timeout(500)  # plotly's transitions settle
        shot = tmp_path / "explorer.png"
        panel.screenshot(path=str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if REFRESH:
            shutil.copyfile(shot, README_PICTURE)

        # 'hot', then copy (recorded cold only): the panel falls back to cold and says so
        pg.locator(".widget-toggle-buttons:has(label:text-is('cache')) button:text-is('hot')").first.click()
        p1 = wait_plot(pg, lambda p: "hot cache" in p["title"], "cache mode hot")
        assert has_data(p1)
        control(pg, "dropdown", "op").locator("select").select_option("copy")
        # copy has hot rows recorded (access-width.jsonl): the plot stays in hot once it has redrawn
        p2 = wait_plot(pg, lambda p: p["title"].startswith("copy u8") and "hot cache" in p["title"], "op add -> copy, hot")
        assert has_data(p2), f"no data after switching op with 'hot' selected: {p2}"

        # a typed shape list is shown as typed: the dropdown follows to 'custom'
        copy = recorded.load(RESULTS, op="copy")
        shapes = sorted(set(copy["shape"]), key=lambda s: int(copy.loc[copy["shape"] == s, "bytes"].iloc[0]))[1:4:2]
        box = control(pg, "text", "custom").locator("input")
        box.fill(", ".join(shapes))
        box.press("Enter")
        p3 = wait_plot(pg, lambda p: len(p["y"]) == len(shapes), f"custom shapes {shapes}")
        assert has_data(p3) and all(v == v for v in p3["y"])
        assert control(pg, "dropdown", "shapes").locator("select").input_value() == "custom"
