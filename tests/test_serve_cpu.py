"""CPU half of `labkit serve`, piece by piece: the fair queue, the GPU guard (a fake NVML), the
board, the token's TLS material and the plain-data requests, the dispatcher (a TLS scheduler in
this process, a fake executor), and the command with labkit.connect routing labkit.bench there."""
import threading
import time

import pytest

from labkit.config import plan, resolve
from labkit.errors import ConfigError, LabkitError

TOKEN = "a-token-for-the-serve-unit-tests"
SRC = "__global__ void my_add(const __half* a, const __half* b, __half* c, int64_t n) {{ /* {tag} */ }}"


def _inline(name="mine", tag=""):
    from labkit.inline_kernel import inline_variant

    return inline_variant("add", name, SRC.format(tag=tag), "my_add", "f16", width=8, build=False)


# ---- the fair queue -----------------------------------------------------------------------------------
def _req(who, n=1, rid=None):
    from labkit.serve.queue import Request

    return Request(rid or f"{who}{time.monotonic_ns()}", who, "c", "r", "t", [object()] * n)


def test_the_queue_takes_turns_and_a_newcomer_waits_one_round():
    from labkit.serve.queue import FairQueue

    fq = FairQueue()
    for r in [_req("ann", rid="a1"), _req("ann", rid="a2"), _req("ann", rid="a3"), _req("bob", rid="b1"),
              _req("bob", rid="b2")]:
        fq.add(r)
    assert [r.id for r in fq.order()] == ["a1", "b1", "a2", "b2", "a3"]
    assert fq.pop().id == "a1"
    fq.add(_req("cy", rid="c1"))  # joins behind everyone waiting now
    got = [fq.pop().id for _ in range(5)]
    assert got == ["b1", "a2", "c1", "b2", "a3"] and fq.pop() is None
    assert [fq.running[i].seq for i in ["a1", "b1", "a2", "c1"]] == [1, 2, 3, 4]
    assert fq.running["c1"].arrived_at_seq == 1


def test_places_and_expected_waits_follow_the_order_and_the_workers():
    from labkit.serve.queue import FairQueue

    fq = FairQueue(first_guess_s=1.0)
    for r in [_req("ann", 2, "a1"), _req("ann", 2, "a2"), _req("bob", 1, "b1")]:
        fq.add(r)
    assert fq.places(workers=1) == {"a1": (1, 0.0), "b1": (2, 2.0), "a2": (3, 3.0)}
    assert fq.places(workers=2) == {"a1": (1, 0.0), "b1": (2, 0.0), "a2": (3, 1.0)}
    fq.drop(lambda r: r.id != "b1")
    assert list(fq.places(1)) == ["a1", "a2"] and fq.ring == type(fq.ring)(["ann"])


# ---- the GPU guard --------------------------------------------------------------------------------------
class FakeProbe:
    why = "no NVML in this test"

    def __init__(self, readings):
        self.readings = list(readings)

    def read(self):
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]


def _r(others=0, temp=50.0, slow=()):
    return {"other_procs": others, "temp_c": temp, "slowdown": list(slow)}


def test_the_guard_passes_waits_or_marks_the_row():
    from labkit.serve.guard import GpuGuard

    ok = GpuGuard(FakeProbe([_r()]), wait_s=1, poll_s=0.01).check()
    assert ok["gpu_check"] == "ok" and ok["gpu_other_procs"] == 0 and ok["gpu_slowdown"] == ""
    waited = GpuGuard(FakeProbe([_r(others=1), _r(temp=85), _r()]), wait_s=1, poll_s=0.01).check()
    assert waited["gpu_check"] == "waited" and waited["gpu_check_wait_s"] >= 0.02
    busy = GpuGuard(FakeProbe([_r(others=2, temp=90, slow=["HwThermalSlowdown"])]), wait_s=0.05, poll_s=0.01).check()
    assert busy["gpu_check"].startswith("busy: 2 other process(es)") and "90 °C (limit 80)" in busy["gpu_check"]
    assert "slowdown HwThermalSlowdown" in busy["gpu_check"] and busy["gpu_temp_c"] == 90


def test_the_guard_says_unavailable_without_nvml_and_the_runner_adds_its_fields(monkeypatch):
    from fake_runner import configs

    from labkit.runner import ContextLost
    from labkit.serve.guard import GpuGuard, GuardedRunner

    g = GuardedRunner(inner="fake_runner:FakeRunner")
    g.guard = GpuGuard(FakeProbe([None]))
    row = g.run(configs(["ok"])[0])
    assert row["gpu_check"] == "unavailable: no NVML in this test" and row["gpu_other_procs"] is None
    with pytest.raises(ContextLost) as lost:  # a lost context's row says what the guard saw too
        g.run(configs(["lost"])[0])
    assert lost.value.record["gpu_check"].startswith("unavailable")
    g.phase = marks = []
    assert g.inner.phase is marks and g.prebuild(configs(["ok"])) == 1  # phases and prebuild reach the inner runner
    monkeypatch.setattr(g.inner, "run", lambda cfg: {"status": "ok"})
    assert "gpu_check" not in g.run(resolve("add", "f16x8", "f16", "1x7", timed=False))  # only timed ones wait


class CountingRunner:
    """A stand-in inner runner: counts its runs; a row's status and time_us come from `status` and the
    count; torch's row fills `baselines` per group as labkit's Runner does."""

    def __init__(self, status="ok"):
        self.runs, self.status, self.baselines = 0, status, {}

    def run(self, cfg):
        self.runs += 1
        if cfg.variant.is_torch:
            self.baselines[cfg.group] = {"time_us": float(self.runs)}
        return {"variant": cfg.variant_s, "status": self.status, "time_us": float(self.runs), "samples": [1.0]}


def _reusing(monkeypatch, status="ok", **kw):
    """A GuardedRunner over a CountingRunner, a probe that counts its readings, and a clock set by hand."""
    import types

    from labkit.serve import guard

    clock = [1000.0]
    monkeypatch.setattr(guard, "time", types.SimpleNamespace(monotonic=lambda: clock[0], sleep=time.sleep))
    g = guard.GuardedRunner(inner="fake_runner:FakeRunner", **kw)
    g.inner, probe = CountingRunner(status), FakeProbe([_r()])
    reads, read = [], probe.read
    probe.read = lambda: reads.append(1) or read()
    g.guard = guard.GpuGuard(probe)
    return g, clock, reads


def test_shipped_rows_are_reused_within_the_window_under_the_same_rule(monkeypatch):
    import dataclasses

    from labkit.config import make_rule

    g, clock, reads = _reusing(monkeypatch)
    cfg = resolve("add", "f16x8_pack", "f16", "4096x4096", rule={"budget_s": 0.2, "noise_target": 0.01})
    first = g.run(cfg)
    clock[0] += 30.04
    again = g.run(cfg)
    assert g.inner.runs == 1 and len(reads) == 1 and "reused_s" not in first and first["gpu_check"] == "ok"
    assert again == dict(first, reused_s=30.0) and again["samples"] is not first["samples"]  # a copy, guard skipped
    g.run(dataclasses.replace(cfg, rule=make_rule(cfg.rule, budget_s=0.3)))  # another stop rule: timed
    g.run(dataclasses.replace(cfg, offset=8))  # another offset: timed
    assert g.inner.runs == 3 and len(reads) == 3
    clock[0] += 89.9  # 119.94 s after the first: still reused
    assert g.run(cfg)["reused_s"] == 119.9 and g.inner.runs == 3
    clock[0] += 0.1  # past the window: timed again, and that row is reused from now on
    assert "reused_s" not in g.run(cfg) and g.inner.runs == 4 and g.run(cfg)["reused_s"] == 0.0
    mine = resolve("add", _inline(tag="reuse"), "f16", "4096x4096")  # an attendee's own kernel: always timed
    assert ["reused_s" in g.run(mine) for _ in range(2)] == [False, False] and g.inner.runs == 6


def test_no_reuse_when_off_for_failed_rows_or_untimed_runs_and_torch_keeps_its_baseline(monkeypatch):
    import dataclasses

    from labkit.config import make_rule

    cfg = resolve("add", "f16x8", "f16", "4096x4096")
    for kw, status, c in [({"reuse_s": 0}, "ok", cfg), ({}, "failed", cfg), ({}, "ok", dataclasses.replace(cfg, timed=False))]:
        g, _, _ = _reusing(monkeypatch, status, **kw)
        assert ["reused_s" in g.run(c) for _ in range(2)] == [False, False] and g.inner.runs == 2
    # torch under rule A, then under rule B (the inner runner's baseline is B's), then A reused: A's baseline is back
    g, _, _ = _reusing(monkeypatch)
    a, b = cfg.baseline(), dataclasses.replace(cfg.baseline(), rule=make_rule(budget_s=0.3))
    g.run(a), g.run(b)
    assert g.inner.baselines[a.group] == {"time_us": 2.0}
    assert g.run(a)["reused_s"] == 0.0 and g.inner.baselines[a.group] == {"time_us": 1.0} and g.inner.runs == 2


def test_labkit_serve_refuses_a_negative_reuse_window(capsys):
    pytest.importorskip("distributed")
    from labkit.cli import main

    assert main(["serve", "--reuse", "-1", "--cpu-workers", "1"]) == 2
    assert "--reuse must be >= 0 seconds" in capsys.readouterr().err


# ---- the board ------------------------------------------------------------------------------------------
def test_the_board_shows_correctness_time_and_verdicts_per_exercise_and_attendee():
    from labkit.serve.board import Board, verdict
    from labkit.serve.queue import Request

    v = _inline(tag="board")
    cfgs = [resolve("add", v, "f16", "1x7", timed=False)]
    b = Board()
    req = Request("r1", "<b>ann</b>", "c", "q", "t", cfgs)
    b.add(req, {"op": "add", "dtype": "f16", "variant": "mine", "shape": "1x7", "mode": "cold", "status": "ok"})
    timed = Request("r2", "<b>ann</b>", "c", "q", "t", plan("add", ["f16x8", v], "f16", ["4096x4096"]))
    for name, t in [("torch", 10.0), ("f16x8", 16.0), ("mine", 9.9)]:
        b.add(timed, {"op": "add", "dtype": "f16", "variant": name, "shape": "4096x4096", "mode": "cold",
                      "status": "ok", "time_us": t})
    e = b.snapshot()["exercises"][0]["entries"][0]
    assert (e["attendee"], e["correct"], e["checks_passed"], e["checks"], e["time_us"]) == ("<b>ann</b>", "correct", 2, 2, 9.9)
    assert e["verdict"] == "torch 0.99x (on par) · f16x8 0.62x (faster)" == verdict({"f16x8": 0.61875, "torch": 0.99})
    b.add(timed, {"op": "add", "dtype": "f16", "variant": "mine", "shape": "1x1023", "mode": "cold", "status": "failed",
                  "error": "output 0: 3 elements differ"})
    e = b.snapshot()["exercises"][0]["entries"][0]
    assert e["correct"] == "wrong" and e["error"] == "output 0: 3 elements differ"
    edited = _inline(tag="edited")  # a new kernel under the same name starts a new entry
    b.add(Request("r3", "<b>ann</b>", "c", "q", "t", [resolve("add", edited, "f16", "1x7", timed=False)]),
          {"op": "add", "dtype": "f16", "variant": "mine", "shape": "1x7", "mode": "cold", "status": "ok"})
    e = b.snapshot()["exercises"][0]["entries"][0]
    assert (e["correct"], e["checks"], e["time_us"]) == ("correct", 1, None)


# ---- the token and the requests -----------------------------------------------------------------------
def test_the_token_gives_the_same_certificate_everywhere_and_a_short_one_is_refused():
    from labkit.remote import check_name, security

    a, b, c = security(TOKEN), security(TOKEN), security(TOKEN + "x")
    assert a.tls_ca_file == b.tls_ca_file and a.tls_client_key == b.tls_client_key
    assert c.tls_ca_file != a.tls_ca_file and a.require_encryption
    with pytest.raises(ConfigError, match="at least 16 characters"):
        security("short")
    for bad in ["", "x" * 41, "tab\there", None]:
        with pytest.raises(ConfigError, match="1 to 40 printable"):
            check_name(bad)
    assert check_name(" <img src=x onerror=alert(1)> ") == "<img src=x onerror=alert(1)>"


def test_a_request_travels_as_plain_data_and_the_inline_source_with_it(tmp_path, monkeypatch):
    import json

    from labkit.remote import decode, encode

    cfg = plan("add", ["f16x8_pack"], "f16", ["4096x4096"], ("hot",), rule={"budget_s": 0.7})[1]
    d = json.loads(json.dumps(encode(cfg)))  # nothing but JSON
    assert decode(d) == cfg and decode(d, budget_s=0.2).rule.budget_s == 0.2
    v = _inline(tag="travels")
    d = json.loads(json.dumps(encode(resolve("add", v, "f16", "1x7"))))
    text = v.source.read_text()
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path / "box-cache"))  # the box's own cache
    got = decode(d).variant
    assert got.is_inline and got.source.read_text() == text and str(got.source).startswith(str(tmp_path))
    assert got.name == "mine" and got.symbol == "inline_add_mine" and got.width == 8
    for bad, match in [({**d, "variant": "f16x8"}, "taken by add's shipped variant"),
                       ({**d, "variant": "x; rm -rf /"}, "must be an identifier"),
                       ({**d, "inline": None, "variant": "nosuch"}, "no variant 'nosuch'"),
                       ({k: x for k, x in d.items() if k != "rule"}, "malformed request")]:
        with pytest.raises(ConfigError, match=match):
            decode(bad)


# ---- the dispatcher, with a fake executor ---------------------------------------------------------------
class FakeEx:
    """Yields an ok row per configuration; an inline kernel tagged 'slow' waits for `release`, one
    tagged 'raise' raises a ConfigError."""

    def __init__(self):
        self.ran, self.release = [], threading.Event()

    def run_all(self, title, groups):
        for g in groups:
            self.ran.append([c.variant_s for c in g])
            for c in g:
                text = c.variant.source.read_text() if c.variant.is_inline else ""
                if "slow" in text:
                    self.release.wait(10)
                if "raise" in text:
                    raise ConfigError("add raise: not on this box")
                yield {"op": c.op, "variant": c.variant_s, "dtype": c.dtype, "shape": c.shape_s, "mode": c.mode,
                       "status": "ok", "time_us": 5.0}


@pytest.fixture
def dispatcher(monkeypatch, caplog):
    distributed = pytest.importorskip("distributed")
    from dask_state import leftovers, timed_out_gets
    from labkit.remote import INBOX, INFO, PLACES, ServeExecutor, security
    from labkit.serve.board import Board
    from labkit.serve.dispatch import Dispatcher

    def builder(cfg):
        if "syntax error" in cfg.variant.source.read_text():
            from labkit.errors import CompileError

            raise CompileError("expected a ';'", file="mine.cu", line=1)

    with distributed.LocalCluster(n_workers=0, processes=False, security=security(TOKEN), protocol="tls",
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster, security=security(TOKEN)) as client:
        distributed.Variable(INFO, client=client).set({"gpus": ["Fake GPU"], "board": None})
        fake = FakeEx()
        d = Dispatcher(client, fake, Board(), workers=1, request_budget_s=1.0, builder=builder).start()
        ex = ServeExecutor(cluster.scheduler_address, TOKEN, "ann")
        try:
            yield d, fake, ex
        finally:
            fake.release.set()
            ex.close()
            d.close()
        # nothing per attendee or request stays on the scheduler (the inbox: while a leaver holds it)
        assert leftovers(client, queues={INBOX}, variables={INFO, PLACES}) == {}
        assert timed_out_gets(r.getMessage() for w in ("setup", "call") for r in caplog.get_records(w)) == []


@pytest.mark.timeout(120)
def test_a_kernel_that_does_not_compile_costs_its_rows_not_a_gpu_turn(dispatcher):
    from labkit.records import ResultLog
    from labkit.session import run

    d, fake, ex = dispatcher
    bad = _inline("bad", "syntax error")
    rows = run(plan("add", ["f16x8", bad], "f16", ["4096x4096"]), ResultLog(), ex, progress=False)
    by = {r["variant"]: r for r in rows}
    assert by["bad"]["status"] == "error" and by["bad"]["worker"] == "compile" and "mine.cu:1: expected a ';'" in by["bad"]["error"]
    assert fake.ran == [["torch", "f16x8"]] and by["f16x8"]["attendee"] == "ann" and by["f16x8"]["queue_seq"] == 1
    only_bad = run([resolve("add", bad, "f16", "1x7", timed=False)], ResultLog(), ex, progress=False)
    assert [r["worker"] for r in only_bad] == ["compile"] and len(fake.ran) == 1


@pytest.mark.timeout(120)
def test_errors_reach_the_attendee_and_a_cancelled_run_leaves_the_queue(dispatcher):
    from labkit.records import ResultLog
    from labkit.session import run
    from labkit.spec import Variant

    d, fake, ex = dispatcher
    with pytest.raises(ConfigError, match="op 'add' has no variant 'nosuch'"):
        run(plan("add", [Variant("nosuch", "f16")], "f16", ["1x7"]), ResultLog(), ex, progress=False)
    with pytest.raises(ConfigError, match="not on this box"):
        run(plan("add", [_inline("boom", "raise")], "f16", ["1x7"], baseline=False), ResultLog(), ex, progress=False)
    # three requests, Ctrl-C while the first runs: the other two never reach the executor
    import signal

    def interrupt(*_):
        raise KeyboardInterrupt

    def when_first_runs():  # the interrupt comes once the first runs and the other two wait
        deadline = time.monotonic() + 30
        while not (fake.ran and d.waiting() == 2) and time.monotonic() < deadline:
            time.sleep(0.02)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGALRM)

    slow = [plan("add", [_inline(f"slow{k}", "slow")], "f16", [f"1x{7 + k}"], baseline=False)[0] for k in range(3)]
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        threading.Thread(target=when_first_runs, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run(slow, ResultLog(), ex, progress=False)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert fake.ran[-1] == ["slow0"]
    deadline = time.monotonic() + 10
    while d.waiting():  # the cancellation reaches the dispatcher
        assert time.monotonic() < deadline, "the cancelled requests still wait"
        time.sleep(0.05)
    fake.release.set()
    deadline = time.monotonic() + 10
    while d.fq.running:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert d.waiting() == 0 and fake.ran[-1] == ["slow0"]
    assert run(plan("add", ["f16x8"], "f16", ["1x7"]), ResultLog(), ex, progress=False)  # still usable


@pytest.mark.timeout(120)
def test_the_waiting_requests_of_an_attendee_who_left_are_dropped(dispatcher):
    """A notebook closed mid-run sends no cancellation: its client's disappearance is enough."""
    from labkit.remote import INBOX, ServeExecutor, encode

    d, fake, ex = dispatcher
    import distributed

    gone = ServeExecutor(ex.address, TOKEN, "leaver")
    inbox = distributed.Queue(INBOX, client=gone.client)
    for k in range(3):
        cfg = plan("add", [_inline(f"slow_left{k}", "slow")], "f16", [f"1x{7 + k}"], baseline=False)[0]
        inbox.put({"kind": "request", "id": f"left{k}", "attendee": gone.name, "client": gone.client.id,
                   "reply": gone.reply, "title": "t", "configs": [encode(cfg)]})
    deadline = time.monotonic() + 20
    while not fake.ran or fake.ran[-1] != ["slow_left0"] or d.waiting() < 2:  # the first runs, the others wait
        assert time.monotonic() < deadline, (fake.ran, d.waiting())
        time.sleep(0.05)
    gone.client.close()  # the tab closes
    deadline = time.monotonic() + 20
    while d.waiting():  # queued, or still building
        assert time.monotonic() < deadline, "the leaver's waiting requests are still queued"
        time.sleep(0.1)
    fake.release.set()
    time.sleep(0.5)
    assert fake.ran[-1] == ["slow_left0"]
    from dask_state import held

    deadline = time.monotonic() + 10  # its reply queue goes with it (the row of its running request too)
    while gone.reply in d.client.run_on_scheduler(held)["queues"]:
        assert time.monotonic() < deadline, "the leaver's reply queue stayed on the scheduler"
        time.sleep(0.2)


# ---- the command, and labkit.connect routing labkit.bench --------------------------------------------------
def _serve(tmp_path, **popen_kw):
    """`labkit serve` with one CPU worker and a stand-in runner, started: (the process, its --info as a dict)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("distributed")
    info = tmp_path / "serve.json"
    tests = str(Path(__file__).parent)
    env = dict(os.environ, LABKIT_TOKEN=TOKEN, PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "labkit.cli", "serve", "--host", "127.0.0.1", "--port", "0",
                             "--board-port", "0", "--cpu-workers", "1", "--runner", "fake_serve_runner:SleepRunner",
                             "--guard-wait", "0", "--info", str(info)], env=env, stdout=subprocess.PIPE, text=True,
                            **popen_kw)
    deadline = time.monotonic() + 120
    while not info.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"labkit serve did not start: {proc.communicate()[0][-2000:]}")
        time.sleep(0.2)
    return proc, json.loads(info.read_text())


@pytest.mark.timeout(180)
def test_labkit_serve_command_and_connect(tmp_path, monkeypatch, capsys):
    import signal

    import labkit
    from labkit import labs, remote

    proc, s = _serve(tmp_path)
    try:
        monkeypatch.setenv("LABKIT_SERVER", s["local_address"])
        monkeypatch.setenv("LABKIT_TOKEN", TOKEN)
        monkeypatch.setenv("LABKIT_NAME", "grace")
        try:
            assert labs.live() is True  # LABKIT_SERVER connects on first use
            df = labkit.bench("add", ["f16x8_pack"], "f16", ["1024x1024"], progress=False)
            assert sorted(df["variant"]) == ["f16x8_pack", "torch"] and set(df["attendee"]) == {"grace"}
            assert set(df["gpu"]) == {"Fake GPU"} and (df["queue_wait_s"] >= 0).all()
        finally:
            remote.disconnect()
        assert "connected to labkit serve at" in capsys.readouterr().out
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and f"LABKIT_TOKEN={TOKEN}" in out and "the board:  http://127.0.0.1:" in out


@pytest.mark.timeout(240)
def test_ctrl_c_in_a_terminal_ends_serve_and_its_cluster(tmp_path):
    """A terminal's Ctrl-C sends SIGINT to its whole foreground process group: `labkit serve` ends (exit 0)
    with its scheduler and workers, within seconds. It ignored Ctrl-C when the cluster's processes shared
    the group: the scheduler went first and the shutdown waited on it for ever."""
    import os
    import signal
    import subprocess

    psutil = pytest.importorskip("psutil")
    proc, _ = _serve(tmp_path, stderr=subprocess.STDOUT, start_new_session=True)  # the terminal's job
    kids = []
    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
        assert len(kids) >= 2  # the scheduler and a worker
        time.sleep(2)  # serving a while, as in a workshop (SIGINT at once sometimes ended it anyway)
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        took = time.monotonic() - t0
        assert proc.returncode == 0 and took < 40, (proc.returncode, took, out[-2000:])
        _, alive = psutil.wait_procs(kids, timeout=20)
        assert not alive, alive
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        for k in kids:
            try:
                k.kill()
            except psutil.NoSuchProcess:
                pass
