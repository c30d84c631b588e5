"""CPU half, the measurement core: statistics and stop rule, checks, Config resolution (every op,
histogram included, through labkit.call's resolution too), plan order, NVTX names, the host-bound
rule, the blocking-kernel protocol with its fallbacks, the launcher ABI, provenance."""
import ctypes
import subprocess

import pytest
import torch

import labkit
from labkit import tables, timing
from labkit.check import compare, poison
from labkit.config import make_rule, plan, resolve
from labkit.errors import ConfigError
from labkit.ranges import check_name, config_name
from labkit.registry import get_op, ops
from labkit.runner import host_bound
from labkit.shapes import parse_size
from labkit.stats import StopRule, summarize


def test_summary_statistics():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s.median, s.min, s.max, s.n) == (3.0, 1.0, 100.0, 5)
    assert s.q1 == 2.0 and s.q3 == 4.0 and s.iqr == 2.0
    assert s.noise == pytest.approx(2.0 / 1.349 / 3.0)  # robust: the 100 outlier does not inflate it


def test_stop_rule_reasons():
    rule = StopRule(noise_target=0.01, min_samples=5, max_samples=50, min_time_s=0.0, budget_s=10)
    steady = [1e-3] * 5
    assert rule.reason(steady[:4], 0.1) is None            # too few samples
    assert rule.reason(steady, 0.1) == "converged"
    noisy = [1e-3, 2e-3] * 5
    assert rule.reason(noisy, 0.1) is None                 # noise 50 % > 1 %
    assert rule.reason(noisy, 10.0) == "budget"
    assert rule.reason(noisy * 5, 0.1) == "max_samples"
    assert StopRule(min_time_s=1.0, min_samples=1).reason(steady, 0.1) is None  # not enough measured time


def test_compare_catches_nan_and_reports_first_bad():
    ref = torch.arange(10, dtype=torch.float64)
    out = ref.to(torch.float16).clone()
    assert compare(out, ref, 1e-3, 1e-5).ok
    out[7] = float("nan")
    r = compare(out, ref, 1e-3, 1e-5)
    assert not r.ok and r.n_bad == 1 and r.first_bad == 7 and "index 7" in r.message
    out[7] = 7.02  # outside f16 tolerance
    assert not compare(out, ref, 1e-3, 1e-5).ok


def test_poison_never_matches_the_reference():
    out = torch.empty(5, dtype=torch.float32)
    poison(out)
    assert torch.isnan(out).all()
    ints = torch.empty(5, dtype=torch.uint8)
    exp = torch.tensor([0, 1, 255, 7, 128], dtype=torch.uint8)
    poison(ints, exp)
    assert (ints != exp).all() and not compare(ints, exp, 0, 0).ok


@pytest.mark.parametrize("op", list(ops().values()), ids=list(ops()))
def test_every_op_and_variant_resolves_once(op):
    for v in op.variants_for():
        for s in op.default_shapes[:2] + op.testing.shapes[:2]:
            cfg = resolve(op.name, v.name, v.dtype, op.format_shape(s), "hot", offset=1, rule={"budget_s": 0.1})
            assert cfg.spec is op and cfg.variant == v and cfg.shape == tuple(s) and cfg.rule.budget_s == 0.1
            assert cfg.key == (op.name, v.name, v.dtype, op.format_shape(s), "hot")
            assert not v.is_torch or cfg.baseline() == cfg
    assert all(v.symbol == f"{op.name}_{v.name}" and v.launch and v.kernel for v in op.variants)


def test_every_op_is_callable_through_the_same_resolution():
    # labkit.call resolves by the same lookups; histogram takes its bins (issue: call dropped shape=)
    from labkit.calls import _resolve

    for op in ops().values():
        for v in op.variants:
            assert _resolve(op.name, v.name, v.dtype) == (op, v)
    h = get_op("histogram")
    assert "bins" in h.call.keywords and h.call.signature is not None


def test_plan_puts_torch_first_in_every_group_and_checks_its_arguments():
    cfgs = plan("add", ["f16x8_pack", "f32x4", "torch"], None, ["64x64"], ("cold", "hot"))
    names = [(c.mode, c.dtype, c.variant.name) for c in cfgs]
    assert names == [("cold", "f16", "torch"), ("cold", "f16", "f16x8_pack"), ("cold", "f32", "torch"),
                     ("cold", "f32", "f32x4"), ("hot", "f16", "torch"), ("hot", "f16", "f16x8_pack"),
                     ("hot", "f32", "torch"), ("hot", "f32", "f32x4")]
    assert [c.variant.name for c in plan("add", None, "f16", ["8x8"], width=8)] == ["torch", "f16x8", "f16x8_pack"]
    with pytest.raises(ConfigError, match="unknown cache mode 'warm'"):
        plan("add", ["f32"], modes=("warm",))
    with pytest.raises(ConfigError, match="a vector width needs a dtype"):
        plan("add", width=8)
    with pytest.raises(ConfigError, match="unknown stop-rule setting"):
        make_rule(budget=1)
    with pytest.raises(ConfigError, match="budget_s .* must be > 0"):
        make_rule(budget_s=0)


def test_tuning_axes_are_configs_with_their_own_launcher():
    cfgs = plan("add", ["f16x8_pack"], "f16", ["4096x4096"], axes={"block": [128, 256, 512]})
    got = [(c.variant_s, c.axes) for c in cfgs if not c.variant.is_torch]
    assert got == [("f16x8_pack[block=128]", (("block", 128),)), ("f16x8_pack", ()), ("f16x8_pack[block=512]", (("block", 512),))]
    op = get_op("add")
    assert op.export(op.variant("f16x8_pack"), (("block", 512),)) == ("add_f16x8_pack__block512", "launch_add<__half, 8, 16, 512>")
    with pytest.raises(ConfigError, match="axis block=99 is not offered; values are 64, 128"):
        resolve("add", "f16x8_pack", axes={"block": 99})
    with pytest.raises(ConfigError, match="has no tuning axis 'blok'.*did you mean 'block'"):
        resolve("add", "f16x8_pack", axes={"blok": 128})


def test_sizes_and_nvtx_names():
    assert parse_size("64MiB") == 64 << 20 and parse_size("2^20+3") == (1 << 20) + 3 and parse_size("1G") == 1 << 30
    assert get_op("copy").parse_shape("1GiB") == (1 << 30,) and get_op("copy").format_shape((1 << 20,)) == "1MiB"
    assert config_name("add", "f16x8_pack", "4096x4096", "f16") == "add f16x8_pack 4096x4096"
    assert config_name("add", "torch", "4096x4096", "f16") == "add torch f16 4096x4096"
    with pytest.raises(ValueError, match="contains '/'"):
        check_name("a/b")
    for op in ops().values():
        for v in op.variants_for():
            for s in op.default_shapes:
                config_name(op.name, v.name, op.format_shape(s), v.dtype)


@pytest.mark.parametrize("time_us,kernel_us,floor,expected", [
    (6.02, 3.25, 2.75, False),    # H100 cold 1024x1024: the overhead is the floor
    (42.9, 3.14, 2.75, True),     # the round-1 bug: host launch cost inside the timed region
    (35.5, 34.4, 0.14, False),    # 1.1 µs over the kernel: within the floor + 3 % of a 34 µs kernel
    (35.5, 34.2, 0.14, True),     # 1.3 µs: more than that (H100 hot graphs of 5 launches, before 2 ms samples)
    (3.9, 3.25, 0.14, True),      # 0.51 µs over the floor plus 0.5: flagged
    (None, 3.0, 1.0, None),       # nothing to compare: no verdict
])
def test_host_bound_rule(time_us, kernel_us, floor, expected):
    assert host_bound(time_us, kernel_us, floor) is expected


@pytest.mark.parametrize("time_us,kernel_us,floor,kernels,expected", [
    (17.28, 13.01, 2.75, 1, True),   # H100 softmax f32 1M (two kernels) judged as one: flagged
    (17.28, 13.01, 2.75, 2, False),  # the gap between its two kernels is allowed one more floor
    (55.39, 48.99, 2.75, 2, False),  # torch.dot f32 16M: kernel + reduction
    (25.00, 13.01, 2.75, 3, True),   # 12 µs over three kernels: still more than three floors
])
def test_host_bound_allows_one_floor_per_kernel(time_us, kernel_us, floor, kernels, expected):
    assert host_bound(time_us, kernel_us, floor, kernels) is expected


@pytest.mark.parametrize("mode,time_us,kernel_us,cupti_event_us,host,slowed", [
    ("cold", 765.3, 852.3, 855.2, False, True),   # H100 relu f16 16384^2: the kernel 11 % slower under CUPTI
    ("cold", 352.2, 348.8, 351.8, False, False),  # f16x8_pack beside it: CUPTI changes nothing
    ("rotating", 8.21, 6.54, 9.67, None, True),   # dot f32 1M in a graph: a memset node's gap, no host inside
    ("hot", 4.11, 2.83, 5.96, None, True),        # reduce_sum f16x8_pack 1M: CUPTI's records, 1.9 µs a launch
])
def test_a_row_says_where_the_profiler_slowed_it_and_graphs_hold_no_host(monkeypatch, mode, time_us, kernel_us,
                                                                         cupti_event_us, host, slowed):
    import labkit.device
    from labkit.runner import Runner

    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    monkeypatch.setattr(labkit.device, "properties", lambda: {"l2_bytes": 50 << 20})
    rec = {"op": "relu", "variant": "f16", "dtype": "f16", "shape": "16384x16384", "mode": mode, "status": "ok",
           "bytes": 1 << 30, "time_us": time_us, "kernel_us": kernel_us, "cupti_event_us": cupti_event_us,
           "kernels": 1}
    runner = Runner(peak=False)
    floor = {"overhead_us": 2.75 if mode == "cold" else 0.14}  # H100's event overhead floors (labkit peak)
    monkeypatch.setattr(runner, "facts", lambda: {"copy_peak_gbps": 3000.0, "ref": "test", "floor": {mode: floor}})
    runner._derive(resolve("relu", "f16", "f16", "16384x16384", mode=mode), rec)
    assert rec["host_bound"] is host and rec["cupti_slowed"] is slowed
    assert rec["cupti_slowdown"] == pytest.approx(100 * (cupti_event_us / time_us - 1))
    assert ("CUPTI+" in tables.row_line(rec)) is slowed


class FakeBlocker:
    """The harness's blocking kernel, as seen from Python: block, release, timed_out."""

    def __init__(self, timeouts=0):
        self.calls, self.timeouts = [], timeouts

    def block(self, stream, timeout_s=timing.BLOCK_TIMEOUT_S):
        self.calls.append(("block", stream))

    def release(self):
        self.calls.append(("release",))

    def timed_out(self):
        if self.timeouts:
            self.timeouts -= 1
            return True
        return False


def _fake_cuda(monkeypatch, blk):
    """Enough of torch.cuda for _run_samples: events with fixed elapsed times, a stream."""
    class Event:
        def __init__(self, enable_timing=True):
            self.t = 0.0

        def record(self):
            Event.clock += 1e-3
            self.t = Event.clock

        def elapsed_time(self, other):
            return (other.t - self.t) * 1000.0
    Event.clock = 0.0

    class Stream:
        def synchronize(self):
            pass
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: Stream())
    monkeypatch.setattr(torch.cuda, "_sleep", lambda n: blk.calls.append(("spin", n)) if blk else None)
    monkeypatch.setattr("labkit.launch.current_stream", lambda device=None: 1234)


def test_every_group_is_enqueued_behind_the_blocking_kernel(monkeypatch):
    blk = FakeBlocker()
    _fake_cuda(monkeypatch, blk)
    monkeypatch.setattr(timing, "blocker", lambda: blk)
    enq = []
    loop = timing._run_samples(lambda: None, lambda: enq.append(len(blk.calls)), StopRule(max_samples=32), 16)
    assert loop.blocking == "kernel" and loop.timeouts == 0 and len(loop.samples) == 32 and loop.reason == "max_samples"
    # block, 16 enqueued samples, release: per group, and nothing enqueued outside a blocked region
    assert blk.calls == [("block", 1234), ("release",), ("block", 1234), ("release",)]
    assert enq == [1] * 16 + [3] * 16


def test_a_group_whose_blocking_kernel_timed_out_is_discarded(monkeypatch):
    blk = FakeBlocker(timeouts=1)
    _fake_cuda(monkeypatch, blk)
    monkeypatch.setattr(timing, "blocker", lambda: blk)
    loop = timing._run_samples(lambda: None, lambda: None, StopRule(max_samples=16), 16)
    assert loop.timeouts == 1 and len(loop.samples) == 16 and loop.blocking == "kernel"
    assert loop.kept == [False] * 16 + [True] * 16  # the discarded group's samples, in enqueue order
    blk = FakeBlocker(timeouts=5)
    monkeypatch.setattr(timing, "blocker", lambda: None if timing._blocker_state["forced_off"] else blk)
    monkeypatch.setitem(timing._blocker_state, "forced_off", False)
    loop = timing._run_samples(lambda: None, lambda: None, StopRule(max_samples=16), 16)
    assert loop.timeouts == 3 and loop.blocking == "spin" and len(loop.samples) == 16  # ncu's serialized launches


def test_without_the_blocking_kernel_rows_say_spin(monkeypatch):
    spins = FakeBlocker()
    _fake_cuda(monkeypatch, spins)
    with timing.no_blocking():
        loop = timing._run_samples(lambda: None, lambda: None, StopRule(max_samples=16), 16)
    assert loop.blocking == "spin" and spins.calls == [("spin", 40_000)] and len(loop.samples) == 16


def test_a_harness_that_cannot_build_falls_back_to_the_spin(monkeypatch):
    timing._blocker.cache_clear()

    def broken():
        raise labkit.errors.ToolMissingError("nvcc not found")
    monkeypatch.setattr("labkit.launch.harness", broken)
    try:
        assert timing.blocker() is None and "nvcc not found" in timing._blocker()[1]
    finally:
        timing._blocker.cache_clear()


def test_ctypes_abi_matches_the_c_header(tmp_path):
    # lk_abi.h is the one statement of the ABI; the ctypes mirror is checked against it by a C compiler
    from labkit.launch import LkArgs, LkTensor
    from labkit.paths import KERNELS_DIR

    src = tmp_path / "abi.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include "lk_abi.h"\nint main(void) {\n'
                   '  printf("%zu %zu %zu %zu %zu %zu %zu %zu %zu\\n", sizeof(lk_tensor), offsetof(lk_tensor, numel),\n'
                   '    offsetof(lk_tensor, size), offsetof(lk_tensor, ndim), offsetof(lk_tensor, itemsize),\n'
                   '    sizeof(lk_args), offsetof(lk_args, nt), offsetof(lk_args, i), offsetof(lk_args, f));\n'
                   '  return 0;\n}\n')
    subprocess.run(["gcc", "-I", str(KERNELS_DIR), "-o", str(tmp_path / "abi"), str(src)], check=True)
    got = [int(x) for x in subprocess.run([str(tmp_path / "abi")], capture_output=True, text=True).stdout.split()]
    assert got == [ctypes.sizeof(LkTensor), LkTensor.numel.offset, LkTensor.size.offset, LkTensor.ndim.offset,
                   LkTensor.itemsize.offset, ctypes.sizeof(LkArgs), LkArgs.nt.offset, LkArgs.i.offset, LkArgs.f.offset]


def test_pack_rejects_what_the_launchers_cannot_take():
    from labkit.launch import pack

    with pytest.raises(ConfigError, match="tensor 0 is on cpu"):
        pack([torch.ones(3)])
    with pytest.raises(ConfigError, match="at most 8 tensors"):
        pack([torch.ones(1)] * 9)
    with pytest.raises(ConfigError, match="at most 8 int"):
        pack([], ints=range(9))


def test_provenance_comes_from_git_and_an_override_says_so(monkeypatch):
    from labkit import device

    device.commit.cache_clear()
    c = device.commit()
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                          cwd=device.ROOT).stdout.strip()
    assert c["commit"] == head and c["commit_source"] == "git" and isinstance(c["dirty"], bool)
    monkeypatch.setenv("LABKIT_COMMIT", "abc123")
    device.commit.cache_clear()
    assert device.commit() == {"commit": "abc123", "dirty": None, "commit_source": "LABKIT_COMMIT"}
    device.commit.cache_clear()


def test_spec_table_gives_blank_for_unknown_gpus():
    from labkit.device import spec

    assert spec("NVIDIA H100 80GB HBM3")["mem_gbps"] == 3350 and spec("NVIDIA H200")["mem_gbps"] == 4800
    assert spec("Some Future GPU") == {"mem_gbps": None, "fp32_tflops": None, "spec_of": None}


def test_measure_is_public_and_checks_its_mode():
    with pytest.raises(ConfigError, match="unknown cache mode 'warm'"):
        labkit.measure(lambda: None, mode="warm")


def test_labkit_blocking_0_starts_without_the_blocking_kernel():
    # what labkit.nsight sets for ncu, which runs launches one at a time
    import os
    import sys

    code = "from labkit import timing; assert timing.blocker() is None; print('spin')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "LABKIT_BLOCKING": "0"})
    assert r.returncode == 0 and "spin" in r.stdout, r.stderr


def test_a_configuration_that_timed_out_falls_back_alone(monkeypatch):
    """Three timed-out groups put that measurement on the spin; the next configuration tries the
    blocking kernel again, unless a profiler is injected (its serialized launches time out every time)."""
    blk = FakeBlocker(timeouts=3)
    _fake_cuda(monkeypatch, blk)
    monkeypatch.setattr(timing, "blocker", lambda: None if timing._blocker_state["forced_off"] else blk)
    monkeypatch.setitem(timing._blocker_state, "forced_off", False)
    monkeypatch.setattr(timing, "_warmup", lambda fn, warmup_s, state: None)
    monkeypatch.setattr(timing, "sm_clock", lambda: (None, False))
    monkeypatch.setattr(timing, "flush", lambda kind: None)
    rule = StopRule(max_samples=16, min_samples=16)
    first = timing.measure(lambda: None, "cold", rule=rule)
    assert first.blocking == "spin" and first.timeouts == 3
    second = timing.measure(lambda: None, "cold", rule=rule)
    assert second.blocking == "kernel" and second.timeouts == 0
    blk.timeouts = 3
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/nsys/libToolsInjection64.so")
    assert timing.measure(lambda: None, "cold", rule=rule).blocking == "spin"
    assert timing._blocker_state["forced_off"]  # under a profiler the fallback stays




def test_compare_takes_one_atol_per_row_across_chunks(monkeypatch):
    import labkit.check as check

    monkeypatch.setattr(check, "CHUNK", 5)  # chunks that start and end inside rows
    ref = torch.zeros(6, 4, dtype=torch.float64)
    out = ref.float().clone()
    out[3, 2] = 1e-3                        # flat index 14, in the third chunk
    rows = torch.full((6, 1), 1e-4, dtype=torch.float64)
    assert not compare(out, ref, 0, rows).ok
    rows[3] = 2e-3
    assert compare(out, ref, 0, rows).ok
    rows[3], rows[2] = 1e-4, 2e-3           # the slack of a neighbouring row does not cover it
    r = compare(out, ref, 0, rows)
    assert not r.ok and r.first_bad == 14 and "atol=0.0001 in its row" in r.message
    with pytest.raises(ValueError, match="row tolerances"):
        compare(out, ref, 0, rows[:5])
