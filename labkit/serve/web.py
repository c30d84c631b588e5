"""The board's web page, served by tornado (Dask's own web server) from a thread of `labkit serve`.

`/` is a static page whose script polls `/board.json` every second and draws one table per
exercise. Attendees' names (and everything else from a row) reach the page only as JSON and are
put in with `textContent`, never as HTML; the Content-Security-Policy allows no inline script
either, so a name like `<img onerror=...>` shows as those characters. Read-only: it shows names,
times and verdicts, nothing an attendee could act on.
"""
from __future__ import annotations

import asyncio
import json
import threading

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>labkit serve: the board</title>
<link rel="stylesheet" href="/board.css"><script src="/board.js" defer></script></head>
<body><h1>labkit serve</h1><p id="summary">waiting for the first submission</p><div id="board"></div></body></html>
"""

CSS = """body { font: 18px/1.35 system-ui, sans-serif; margin: 1.5em; }
table { border-collapse: collapse; margin-bottom: 1.5em; min-width: 60%; }
th, td { padding: 4px 12px; border-bottom: 1px solid #ddd; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.correct { color: #15803d; font-weight: 600; } .wrong { color: #b91c1c; font-weight: 600; }
.error { color: #b45309; font-weight: 600; } #summary { color: #444; }
"""

JS = """'use strict';
function cell(tr, text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
}
function draw(b) {
  const q = b.queue;
  document.getElementById('summary').textContent =
    b.submissions + ' submissions · ' + q.waiting + ' requests waiting, ' + q.running + ' running on ' +
    q.workers + ' GPU worker(s) · updated ' + new Date(b.updated * 1000).toLocaleTimeString();
  const root = document.getElementById('board');
  root.replaceChildren();
  for (const ex of b.exercises) {
    const h = document.createElement('h2');
    h.textContent = ex.exercise;
    root.appendChild(h);
    const t = document.createElement('table');
    t.dataset.exercise = ex.exercise;
    const head = t.insertRow();
    for (const c of ['attendee', 'kernel', 'result', 'checks', 'time µs', 'shape', 'verdict']) {
      const th = document.createElement('th'); th.textContent = c; head.appendChild(th);
    }
    for (const e of ex.entries) {
      const tr = t.insertRow();
      tr.className = 'entry';
      cell(tr, e.attendee); cell(tr, e.variant); cell(tr, e.correct, e.correct);
      cell(tr, e.checks_passed + '/' + e.checks, 'num');
      cell(tr, e.time_us == null ? '–' : e.time_us.toFixed(2), 'num');
      cell(tr, e.shape ? e.shape + ' ' + e.mode : '–');
      cell(tr, e.correct === 'correct' ? (e.verdict || '–') : (e.error || ''));
    }
    root.appendChild(t);
  }
}
async function poll() {
  try {
    const r = await fetch('/board.json', {cache: 'no-store'});
    if (r.ok) draw(await r.json());
  } catch (e) { /* the server restarts: try again */ }
  setTimeout(poll, 1000);
}
poll();
"""


def start(board, host: str, port: int) -> tuple:
    """Serve `board` on host:port (0: a free port) from a thread; returns (port, stop())."""
    import tornado.httpserver
    import tornado.netutil
    import tornado.web

    class Static(tornado.web.RequestHandler):
        def initialize(self, body, kind):
            self.body, self.kind = body, kind

        def set_default_headers(self):
            self.set_header("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'")
            self.set_header("X-Content-Type-Options", "nosniff")

        def get(self):
            self.set_header("Content-Type", self.kind)
            self.set_header("Cache-Control", "no-store")
            self.write(self.body() if callable(self.body) else self.body)

    app = tornado.web.Application([
        (r"/", Static, {"body": PAGE, "kind": "text/html; charset=utf-8"}),
        (r"/board.js", Static, {"body": JS, "kind": "text/javascript; charset=utf-8"}),
        (r"/board.css", Static, {"body": CSS, "kind": "text/css; charset=utf-8"}),
        (r"/board.json", Static, {"body": lambda: json.dumps(board.snapshot(), default=str),
                                  "kind": "application/json"}),
    ])
    sockets = tornado.netutil.bind_sockets(port, host)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run():
        asyncio.set_event_loop(loop)
        server = tornado.httpserver.HTTPServer(app)
        server.add_sockets(sockets)
        loop.call_soon(ready.set)
        loop.run_forever()
        server.stop()
        loop.close()

    threading.Thread(target=run, name="labkit-board", daemon=True).start()
    ready.wait(10)
    return sockets[0].getsockname()[1], lambda: loop.call_soon_threadsafe(loop.stop)
