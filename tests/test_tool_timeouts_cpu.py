"""Issue 23 item 5, CPU half: every external program (nvcc, cuobjdump, ninja's nvcc, nsys, ncu, ...) runs
through labkit.toolkit.run, bounded by a timeout per tool ($LABKIT_TOOL_TIMEOUT_S overrides them), with
its whole process group killed past it or on Ctrl-C. Fake tools that hang (a shell that starts a
`sleep` child) stand in for a hung nvcc or cuobjdump; each test checks the message, that no process of
the fake is left, and that the session goes on."""
import os
import re
import shutil
import signal
import threading
import time

import pytest

import labkit
from labkit import cli, toolkit
from labkit.config import plan
from labkit.errors import ConfigError, ToolTimeoutError

HANG_S = 30  # how long a fake tool would hang: far past the 1 s timeout the tests set


def _exe(path, body):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"  # a zombie has been killed
    except FileNotFoundError:
        return False


@pytest.fixture
def cuda(tmp_path, monkeypatch):
    """A toolkit folder first in labkit's search ($CUDA_HOME), a 1 s tool timeout, and `hang(name)` /
    `works(name)` to put a fake program there. hang's program and its `sleep` child log their pids."""
    home = tmp_path / "cuda"
    (home / "include").mkdir(parents=True)
    (home / "include" / "cuda_runtime.h").write_text("")
    (home / "lib64").mkdir()
    (home / "lib64" / "libcudart.so").write_text("")
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setenv(toolkit.TIMEOUT_ENV, "1")
    pids = tmp_path / "pids"

    class Fake:
        def hang(self, name):
            _exe(home / "bin" / name, f"echo $$ >> {pids}\nsleep {HANG_S} &\necho $! >> {pids}\nwait")

        def works(self, name):  # nvcc that writes its -o file (an empty cubin)
            _exe(home / "bin" / name, 'while [ $# -gt 0 ]; do [ "$1" = -o ] && : > "$2"; shift; done; exit 0')

        def pids(self):
            return [int(p) for p in pids.read_text().split()] if pids.exists() else []

        def left(self, within_s=5):
            """Its processes still alive `within_s` after the kill (a signalled process ends when it is
            next scheduled: on a loaded host, not at once)."""
            end = time.monotonic() + within_s
            while [p for p in self.pids() if _alive(p)] and time.monotonic() < end:
                time.sleep(0.05)
            return [p for p in self.pids() if _alive(p)]

    return Fake()


def still_usable():
    assert [c.variant.name for c in plan("add", ["f32"], None, ["8x8"])] == ["torch", "f32"]
    assert cli.main(["list", "add"]) == 0


def _timed(fn):
    t = time.monotonic()
    out = fn()
    return out, time.monotonic() - t


def test_a_hung_nvcc_stops_labkit_sass(cuda, capsys):
    cuda.hang("nvcc")
    rc, took = _timed(lambda: cli.main(["sass", "add"]))
    err = capsys.readouterr().err
    assert rc == 2 and took < 15, (rc, took, err)
    assert re.search(r"labkit: error: nvcc \(compiling add-\w+\.cu for sm_90\) did not finish in 1 s and was stopped "
                     r"\(`\S+/cuda/bin/nvcc -O3 -std=c\+\+17 -lineinfo \.\.\.`; its process group was killed\)\. "
                     r"If it needs longer, set \$LABKIT_TOOL_TIMEOUT_S", err), err
    assert len(cuda.pids()) == 2 and cuda.left() == []  # the shell and its sleep child
    still_usable()


def test_a_hung_cuobjdump_stops_labkit_sass_diff(cuda, capsys):
    cuda.works("nvcc")
    cuda.hang("cuobjdump")
    rc, took = _timed(lambda: cli.main(["sass", "add", "--diff", "f16x8", "f16x8_pack"]))
    err = capsys.readouterr().err
    assert rc == 2 and took < 15, (rc, took, err)
    assert re.search(r"cuobjdump did not finish in 1 s and was stopped \(`\S+/cuobjdump -sass \S+\.cubin`", err), err
    assert cuda.pids() and cuda.left() == []
    still_usable()


def test_a_hung_nvcc_leaves_the_recorded_why_card_without_sass(cuda, capsys):
    """Recorded mode calls nvcc because SASS is not recorded: the card's machine-code lines (registers,
    load widths, occupancy) come from compiling the kernel now for the recorded GPU's arch."""
    cuda.hang("nvcc")
    rc, took = _timed(lambda: cli.main(["why", "add", "f16x8", "--recorded"]))
    out = capsys.readouterr().out
    assert rc == 0 and took < 15, (rc, took)
    assert "recorded" in out and re.search(r"no SASS: nvcc \(compiling add-\w+\.cu for sm_90\) did not finish in 1 s", out)
    assert cuda.left() == []
    still_usable()


def test_a_hung_nvcc_under_ninja_stops_labkit_inline(cuda, monkeypatch):
    """labkit.inline builds through torch's cpp_extension, whose ninja step has no timeout: labkit swaps
    in a bounded one for its builds (torch's real cpp_extension here, up to ninja and the fake nvcc)."""
    if not shutil.which("ninja"):
        pytest.skip("needs ninja (torch's cpp_extension builds with it)")
    import torch
    from torch.utils import cpp_extension

    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)  # a CUDA build of torch, as on a GPU machine
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", cpp_extension.CUDA_HOME)  # restored after the test
    monkeypatch.setenv("LABKIT_ARCH", "90")
    torch_ninja = cpp_extension._run_ninja_build
    cuda.hang("nvcc")
    src = "__global__ void k(const float* a, const float* b, float* c, long n) {}"
    with pytest.raises(ToolTimeoutError, match=r"^nvcc \(ninja building inline_add_hung_\w+-sm90-\w+\) did not finish in "
                                                r"1 s and was stopped \(`ninja -v`; its process group was killed\)") as e:
        _timed(lambda: labkit.inline("add", "hung", src, "k", "f32"))
    assert e.value.tool == "nvcc" and e.value.timeout_s == 1
    assert len(cuda.pids()) == 2 and cuda.left() == []
    assert cpp_extension._run_ninja_build is torch_ninja  # torch's own ninja step is back
    assert "hung" not in [v.name for v in labkit.get_op("add").variants]
    still_usable()


def test_ctrl_c_kills_the_whole_group(cuda, tmp_path):
    cuda.hang("cuobjdump")
    main = threading.get_ident()
    threading.Timer(0.5, lambda: signal.pthread_kill(main, signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        toolkit.run([toolkit.tool("cuobjdump"), "-sass", "x.cubin"], "cuobjdump", timeout=HANG_S)
    assert len(cuda.pids()) == 2 and cuda.left() == []


@pytest.mark.parametrize("value", ["abc", "0", "-5", "nan", "inf", ""])
def test_the_timeout_variable_is_checked(value, monkeypatch, capsys):
    monkeypatch.setenv(toolkit.TIMEOUT_ENV, value)
    if value == "":  # unset in effect: each tool's own default
        assert toolkit.timeout_s("nvcc") == toolkit.TIMEOUT_S["nvcc"]
        return
    with pytest.raises(ConfigError, match=rf"\$LABKIT_TOOL_TIMEOUT_S must be a finite number of seconds > 0, got '{value}'"):
        toolkit.run(["true"], "cuobjdump")
    from labkit import sass

    sass._functions.cache_clear()  # an earlier test's disassembly would answer without running a tool
    assert cli.main(["sass", "add"]) == 2
    assert "LABKIT_TOOL_TIMEOUT_S must be a finite number of seconds > 0" in capsys.readouterr().err
    monkeypatch.setenv(toolkit.TIMEOUT_ENV, "2.5")
    assert toolkit.timeout_s("nvcc") == 2.5 and toolkit.timeout_s("nvcc", 7) == 7
    still_usable()


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_profile_timeout_is_checked_before_anything_runs(value, capsys):
    from labkit import nsight

    assert cli.main(["profile", "add", "-v", "f32", "--timeout", value]) == 2
    assert f"timeout must be a finite number of seconds > 0, got {float(value)}" in capsys.readouterr().err
    assert cli.main(["profile", "add", "--ncu", "-v", "f32", "--timeout", value]) == 2
    for call in (lambda: nsight.profile("add", ["f32"], timeout=float(value)),
                 lambda: nsight.ncu_metrics("add", "f32", "64x64", timeout=float(value))):
        with pytest.raises(ConfigError, match="timeout must be a finite number of seconds > 0"):
            call()
    still_usable()


def test_no_subprocess_outside_the_one_runner():
    """Every external program of labkit's library goes through toolkit.run (benchmarks/ runs Python
    children of its own, with their own timeouts and logs; workers.py and cluster_procs.py start
    labkit's own long-lived processes, held by a lifeline pipe and answering within phase limits)."""
    pkg = os.path.dirname(labkit.__file__)
    users = sorted(os.path.relpath(os.path.join(d, f), pkg) for d, _, files in os.walk(pkg) for f in files
                   if f.endswith(".py") and re.search(r"subprocess\.(run|Popen|call|check_)",
                                                      open(os.path.join(d, f)).read()))
    assert [u for u in users if not u.startswith("benchmarks")] == ["cluster_procs.py", "toolkit.py", "workers.py"]


def test_a_worker_start_follows_the_tool_timeout_and_a_bad_one_is_named(monkeypatch):
    """A worker's start (and a Dask cluster's) waits TIMEOUT_S["worker start"], or $LABKIT_TOOL_TIMEOUT_S
    (the sanitizer steps set it); a value that is no number of seconds is named before any process starts."""
    from labkit.workers import Worker, worker_start_s

    monkeypatch.delenv("LABKIT_TOOL_TIMEOUT_S", raising=False)
    assert worker_start_s() == toolkit.TIMEOUT_S["worker start"]
    monkeypatch.setenv("LABKIT_TOOL_TIMEOUT_S", "900")
    assert worker_start_s() == 900
    monkeypatch.setenv("LABKIT_TOOL_TIMEOUT_S", "soon")
    monkeypatch.setattr("subprocess.Popen", lambda *a, **k: pytest.fail("a worker process was started"))
    with pytest.raises(ConfigError, match=r"\$LABKIT_TOOL_TIMEOUT_S must be a finite number of seconds > 0, got 'soon'"):
        Worker(None, ("labkit.runner:Runner", {}))
