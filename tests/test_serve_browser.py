"""A real browser on the room's board: `labkit serve` (CPU stand-in worker, tests/fake_serve_runner.py)
and Debian Chromium driven by Python playwright. Attendees submit lab 01's exercise one after the
other while the page is open; the page must show each as it arrives (no reload), with names shown
as the characters they are (an HTML name stays text). The screenshot goes to the test's tmp dir."""
import os
import threading
import time
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("LABKIT_CHROMIUM", "/usr/bin/chromium")
pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]
TOKEN = "a-token-for-the-board-browser-test"
NAMES = ["Ada", "<img src=x onerror=\"window.pwned=1\">", "Grace & co"]
ENTRIES = """() => Array.from(document.querySelectorAll('table[data-exercise="add f16"] tr.entry'))
  .map(tr => Array.from(tr.cells).map(td => td.textContent))"""


@pytest.fixture
def server(monkeypatch):
    pytest.importorskip("distributed")
    from labkit.serve.server import Server

    monkeypatch.setenv("LABKIT_FAKE_TIMED_S", "0.3")  # each timed configuration takes a visible while
    s = Server(TOKEN, host="127.0.0.1", port=0, board_port=0, cpu_workers=1, runner="fake_serve_runner:SleepRunner",
               guard_wait_s=0)
    yield s
    s.close()


def submit(server, names, done):
    from labkit.config import plan
    from labkit.inline_kernel import inline_variant
    from labkit.records import ResultLog
    from labkit.remote import ServeExecutor
    from labkit.session import run

    try:
        for k, name in enumerate(names):
            ex = ServeExecutor(server.local_address, TOKEN, name)
            try:
                src = f"__global__ void my_add(const __half* a, const __half* b, __half* c, int64_t n) {{ /* fake_us={9 + k} */ }}"
                v = inline_variant("add", "mine", src, "my_add", "f16", width=8, build=False)
                run(plan("add", ["f16x8", "f16x8_pack", v], "f16", ["4096x4096"]), ResultLog(), ex, progress=False)
            finally:
                ex.close()
            time.sleep(1.5)  # the page polls every second: each submission is seen on its own
    except BaseException as e:  # noqa: BLE001 - reported by the test
        done.append(e)
    done.append("finished")


@pytest.mark.timeout(240)
def test_the_board_updates_while_submissions_arrive(server, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            pg = browser.new_page(viewport={"width": 1400, "height": 700})
            pg.goto(f"http://127.0.0.1:{server.board_port}/")
            pg.wait_for_function("() => document.getElementById('summary').textContent.includes('0 submissions')")
            assert pg.evaluate(ENTRIES) == []
            done, seen = [], []
            threading.Thread(target=submit, args=(server, NAMES, done), daemon=True).start()
            deadline = time.monotonic() + 180
            while "finished" not in done or len(seen) < len(NAMES):
                assert time.monotonic() < deadline, f"the board showed {seen[-1:] or 'nothing'}; submitter: {done}"
                rows = pg.evaluate(ENTRIES)
                if rows and (not seen or rows != seen[-1]):
                    seen.append(rows)
                if len(rows) == len(NAMES) and rows[-1][4] != "–":
                    break
                time.sleep(0.2)
            assert not [d for d in done if d != "finished"], done
            counts = [len(r) for r in seen]
            assert counts[0] < len(NAMES) and counts == sorted(counts) and counts[-1] == len(NAMES), counts
            final = {r[0]: r for r in seen[-1]}
            assert set(final) == set(NAMES)  # names exactly as chosen: HTML stays text
            assert pg.evaluate("() => document.querySelectorAll('#board img').length") == 0
            assert pg.evaluate("() => window.pwned") is None
            ada = final["Ada"]
            assert ada[1:5] == ["mine", "correct", "1/1", "9.00"] and ada[5] == "4096x4096 cold"
            assert ada[6] == "torch 0.90x (faster) · f16x8 0.56x (faster) · f16x8_pack 0.90x (faster)"
            assert "3 submissions" in pg.inner_text("#summary")
            shot = tmp_path / "board.png"
            pg.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
