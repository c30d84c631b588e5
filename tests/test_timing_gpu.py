"""GPU half: the timed region is host-independent, rows carry both times and their provenance,
and a kernel that is right only once fails its re-check."""
import time

import pytest

import labkit
from labkit import cache_states
from labkit.config import make_rule, resolve
from labkit.launch import launcher_for
from labkit.registry import get_op
from labkit.runner import Runner
from labkit.timing import measure, no_blocking

pytestmark = pytest.mark.gpu
RULE = make_rule(budget_s=0.3, noise_target=0.005)


def _add(shape):
    import torch

    op = get_op("add")
    a = torch.randn(shape, device="cuda", dtype=torch.float16)
    b, c = torch.randn_like(a), torch.empty_like(a)
    return launcher_for(op, op.variant("f16x8_pack")).prepare([a, b, c])


@pytest.mark.parametrize("mode", ["cold", "hot"])
def test_a_slow_host_does_not_reach_into_the_timed_region(mode):
    go = _add((1024, 1024))

    def slow():
        time.sleep(100e-6)  # a host 100 µs slower per enqueue than any real one
        go()

    fast = measure(go, mode, RULE)
    slowed = measure(slow, mode, RULE)
    assert fast.blocking == slowed.blocking == "kernel"
    assert abs(slowed.summary.median - fast.summary.median) * 1e6 <= 0.5, (fast.summary, slowed.summary)


def test_without_the_blocking_kernel_the_slow_host_shows():
    # the test above has teeth: with the spin fallback, 100 µs of host time lands in each cold sample
    go = _add((1024, 1024))

    def slow():
        time.sleep(100e-6)
        go()

    with no_blocking():
        m = measure(slow, "cold", RULE)
    assert m.blocking == "spin" and m.summary.median * 1e6 > measure(go, "cold", RULE).summary.median * 1e6 + 20


@pytest.mark.parametrize("mode", ["cold", "hot"])
def test_timed_row_has_both_times_and_its_provenance(mode, tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_RESULTS", str(tmp_path))
    r = Runner().run(resolve("add", "f16x8_pack", "f16", "2048x2048", mode, rule=RULE))
    assert r["status"] == "ok" and r["recheck"] == "ok" and r["blocking"] == "kernel"
    assert r["samples_per_group"] == cache_states.get(mode).group  # how the samples were enqueued, on the row
    # hot: a graph's back-to-back launches can take less than the isolated launches CUPTI times
    # (H200, 2048x2048: 3.75 µs per replayed launch, 3.92 µs CUPTI), so only cold orders the two
    assert r["kernel_us"] > 0 and (mode == "hot" or r["kernel_us"] < r["time_us"])
    assert r["host_bound"] is (None if mode == "hot" else False)  # no host inside a graph launch
    assert r["overhead_us"] == pytest.approx(r["time_us"] - r["kernel_us"])
    assert r["noise_target"] == RULE.noise_target and r["budget_s"] == RULE.budget_s and "converged" in r
    assert r["peak_ref"].startswith(r["gpu"].lower().replace(" ", "-")) or "/device.json#" in r["peak_ref"]
    assert r["commit_source"] in ("git", "LABKIT_COMMIT") and "dirty" in r
    assert r["min_us"] <= r["q1_us"] <= r["time_us"] <= r["q3_us"] <= r["max_us"]
    assert (tmp_path / r["peak_ref"].split("#")[0]).exists()  # the ceilings it names are stored


def test_a_kernel_right_only_on_a_poisoned_buffer_fails_its_recheck():
    # accumulates into c: right after the poison-and-run check only if c started at zero... it does not,
    # so write it as c = a + b the first time (c is NaN) and c += a + b afterwards
    src = """__global__ void once(const float* a, const float* b, float* c, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = (c[i] != c[i]) ? a[i] + b[i] : c[i] + a[i] + b[i];
}"""
    labkit.inline("add", "once", src, "once", "f32")
    r = Runner(peak=False).run(resolve("add", "once", "f32", "64x64", rule=RULE))
    assert r["status"] == "failed" and r["recheck"] == "failed" and "after" in r["error"] and "time_us" not in r


def test_measure_is_public():
    m = labkit.measure(_add((2048, 2048)), "cold", budget_s=0.1)
    assert m.summary.median > 0 and m.stop_reason in ("converged", "budget", "max_samples")


@pytest.mark.parametrize("mode", ["hot", "rotating"])
@pytest.mark.parametrize("what", ["torch.sum", "dot f32"])
def test_a_graph_of_memsets_keeps_the_blocking_kernel(mode, what):
    """torch.sum's split reduction and dot's atomics zero their output with memsets: two such graph
    launches behind the blocking kernel stalled the host until its timeout (2026-11-24)."""
    import torch

    a = torch.randn(1 << 20, device="cuda")
    outs = [torch.zeros(1, device="cuda") for _ in range(3)]
    if what == "torch.sum":
        fns = [lambda o=o: torch.sum(a, dim=0, out=o.view(())) for o in outs]
    else:
        op = get_op("dot")
        fns = [launcher_for(op, op.variant("f32")).prepare([a, a, o]) for o in outs]
    m = measure(fns if mode == "rotating" else fns[0], mode, make_rule(budget_s=0.1))
    assert (m.method, m.blocking, m.timeouts) == ("graph", "kernel", 0), m


# ---- every clock on the same launches, every cache state (issue 22) -------------------------------
STATE_SHAPES = ["2048x2048", "4096x4096", "8192x8192"]


@pytest.fixture(scope="module")
def state_rows(tmp_path_factory):
    """add f16 (torch and f16x8_pack) at 2048^2 ... 8192^2 in every registered cache state, one
    Runner, ceilings measured into a temporary results folder."""
    import os

    from labkit.config import plan

    old = os.environ.get("LABKIT_RESULTS")
    os.environ["LABKIT_RESULTS"] = str(tmp_path_factory.mktemp("results"))
    try:
        runner = Runner()
        rows = [runner.run(c) for c in plan("add", ["f16x8_pack"], "f16", STATE_SHAPES, cache_states.names(), rule=RULE)]
    finally:
        if old is None:
            os.environ.pop("LABKIT_RESULTS")
        else:
            os.environ["LABKIT_RESULTS"] = old
    assert all(r["status"] == "ok" for r in rows), [(r["variant"], r["shape"], r["mode"], r.get("error")) for r in rows]
    return {(r["variant"], r["shape"], r["mode"]): r for r in rows}


def test_kernel_time_comes_from_the_timed_launches(state_rows):
    for (variant, shape, mode), r in state_rows.items():
        assert r["cupti"] == "same-launch", (variant, shape, mode, r["cupti"])
        assert r["kernel_us"] > 0 and r["kernels"] >= 1
        # the flag says what its numbers say; add's launches under CUPTI pay its records (0.1-0.6 µs), no more
        assert r["cupti_slowed"] == (r["cupti_event_us"] - r["time_us"] > max(0.5, 0.03 * r["time_us"])), r
        assert r["cupti_slowdown"] < 10, (variant, shape, mode, r["cupti_slowdown"])
        if mode in ("cold", "cold-dirty"):
            # every sample's kernels <= its event time (labkit.cupti.per_launch fails the row otherwise)
            assert r["kernel_us"] <= r["cupti_event_us"], (variant, shape, mode, r)
            assert r["kernel_us"] <= r["time_us"] and r["host_bound"] is False, (variant, shape, mode, r)
        else:  # back-to-back launches: the overlap of their recorded durations is stated; no host in a graph
            assert "overlap_us" in r and abs(r["overlap_us"]) < 0.5 * r["kernel_us"], (variant, shape, mode, r)
            assert r["host_bound"] is None, (variant, shape, mode, r)


def test_cache_states_order_as_the_physics_says(state_rows):
    from labkit.device import properties

    l2 = properties()["l2_bytes"]
    for variant in ("torch", "f16x8_pack"):
        for shape in STATE_SHAPES:
            t = {m: state_rows[(variant, shape, m)] for m in ("cold", "cold-dirty", "rotating", "hot")}
            # the kernel pays for evicting dirty lines: never faster than from a clean L2
            assert t["cold-dirty"]["time_us"] >= 0.99 * t["cold"]["time_us"], (variant, shape, t)
            # rotating reads cold inputs and writes back earlier outputs on every launch: at least cold's
            # kernel time (events differ in kind: one launch with its latency vs back-to-back launches)
            assert t["rotating"]["kernel_us"] >= 0.98 * t["cold"]["kernel_us"], (variant, shape, t)
            assert t["rotating"]["buffer_sets"] * t["rotating"]["bytes"] >= 3 * l2  # the sets total >= 3x the L2


def test_no_row_above_the_spec_goes_unflagged(state_rows):
    for (variant, shape, mode), r in state_rows.items():
        spec = r.get("spec_gbps")
        if not spec:
            pytest.skip(f"{r['gpu']} has no datasheet bandwidth in labkit.device.SPECS")
        best = min(t for t in (r["time_us"], r.get("kernel_us")) if t)
        model_gbps = r["bytes"] / (best * 1e-6) / 1e9
        assert r["dram_guard"] in ("ok", "above-spec: served from L2", "above-spec: writes absorbed by L2"), \
            (variant, shape, mode, r["dram_guard"], r.get("dram_note"))  # 'unexplained': physics or a bug
        if model_gbps > spec:
            assert r["dram_guard"].startswith("above-spec") and r["dram_note"], (variant, shape, mode, r)
        if mode in ("cold-dirty", "rotating"):  # every byte crosses DRAM in the timed region
            assert r["dram_guard"] == "ok", (variant, shape, mode, r.get("dram_note"))
