"""A real browser: JupyterLab (started here) + Debian Chromium driven by Python playwright.

Opens lab 01 in recorded mode (fixture results, no GPU), runs all cells, moves the vector-width
slider and changes the dtype, and checks that the explorer's plot data and title changed.
Run: pytest -m browser tests/test_browser.py   (screenshots of failures go to the tmp dir printed)
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from test_recorded import make_results

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("LABKIT_CHROMIUM", "/usr/bin/chromium")
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """JupyterLab on a free port, serving a copy of labs/ with fixture results; stopped by PID."""
    tmp = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "labs", tmp / "labs")
    real = os.environ.get("LABKIT_BROWSER_RESULTS")  # e.g. results/, to take the README screenshot
    shutil.copytree(real, tmp / "results") if real else make_results(tmp / "results")
    settings = tmp / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false",
                                                                         "checkForUpdates": False}))
    token, port = uuid.uuid4().hex, _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               LABKIT_RESULTS=str(tmp / "results"), CUDA_VISIBLE_DEVICES="",
               JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"))
    log = open(tmp / "jupyterlab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
         "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={tmp}", f"--LabApp.workspaces_dir={tmp}", "--LabApp.news_url=None",
         "--LabApp.extension_manager=readonly", "--LabApp.expose_app_in_browser=True"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=1)
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"JupyterLab exited: {(tmp / 'jupyterlab.log').read_text()[-2000:]}")
                time.sleep(0.25)
        else:
            raise RuntimeError("JupyterLab did not answer within 30 s")
        yield {"base": base, "token": token, "tmp": tmp}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture
def page(lab_server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        pg = browser.new_page(viewport={"width": 1500, "height": 1100})
        pg.set_default_timeout(30_000)
        try:
            yield pg
        finally:
            browser.close()
            _delete_sessions(lab_server)


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
PLOT = """() => {
  const gd = document.querySelector('.jp-Notebook .js-plotly-plot');
  if (!gd || !gd.data || !gd.data.length) return null;
  return {y: Array.from(gd.data[0].y || []), name: gd.data[0].name,
          title: (gd.layout.title && gd.layout.title.text) || ''};
}"""


def _wait_plot_change(pg, before, timeout_s=15):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        now = pg.evaluate(PLOT)
        if now and now["title"] != before["title"]:
            return now
        time.sleep(0.1)
    raise AssertionError(f"plot did not change within {timeout_s} s (title still {before['title']!r})")


@pytest.mark.timeout(120)
def test_lab01_explorer_controls_update_the_plot(page, lab_server):
    pg, s = page, lab_server
    try:
        pg.goto(f"{s['base']}/lab/tree/labs/01_vectorized_add.ipynb?token={s['token']}&reset")
        pg.wait_for_function("() => window.jupyterapp !== undefined")
        pg.evaluate("() => window.jupyterapp.started")
        pg.wait_for_function(KERNEL_IDLE, timeout=60_000)
        pg.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        pg.wait_for_function(ALL_RAN, timeout=90_000, polling=250)
        pg.wait_for_function(f"() => ({PLOT})() !== null")
        p0 = pg.evaluate(PLOT)
        assert p0["name"] == "f16x8_pack" and "add f16: f16x8_pack" in p0["title"] and "recorded" in p0["title"]
        assert "Recorded data" in pg.inner_text(".lk-recorded")

        # vector width: 8 -> 2 (keyboard on the slider handle)
        handle = pg.locator(".widget-slider:has(label.widget-label:text-is('vector width')) .noUi-handle").first
        slider = pg.locator(".widget-slider:has(label.widget-label:text-is('vector width'))").first
        assert slider.locator(".widget-readout").inner_text().strip() == "8"
        handle.focus()
        pg.keyboard.press("ArrowLeft")
        p1 = _wait_plot_change(pg, p0)
        assert p1["name"] == "f16x2" and "f16x2" in p1["title"] and p1["y"] != p0["y"]
        assert slider.locator(".widget-readout").inner_text().strip() == "2"

        # dtype: f16 -> bf16
        pg.locator(".widget-dropdown:has(label:text-is('dtype')) select").first.select_option("bf16")
        p2 = _wait_plot_change(pg, p1)
        assert p2["title"].startswith("add bf16: bf16x2") and p2["y"] != p1["y"]
        if os.environ.get("LABKIT_SCREENSHOT"):
            pg.locator(".jp-Notebook .js-plotly-plot").first.scroll_into_view_if_needed()
            pg.screenshot(path=os.environ["LABKIT_SCREENSHOT"], full_page=False)
    except Exception:
        shot = s["tmp"] / f"failure-{int(time.time())}.png"
        try:
            pg.screenshot(path=str(shot), full_page=True)
        except Exception:
            pass
        print(f"screenshot: {shot}; server log: {s['tmp'] / 'jupyterlab.log'}")
        raise
