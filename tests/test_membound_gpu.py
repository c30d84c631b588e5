"""GPU half of issue 25's memory-bound variants (`pytest -m gpu`): the one-pass reductions and the
per-SM histogram at every tuning-axis value on odd shapes and misaligned views, the one-pass ticket
across repeated labkit.call launches (whose outputs are not zeroed), kernels that share it and
concurrent streams, the histogram's shared-memory fallback, and the flat gather over several rounds."""
import pytest
import torch

import labkit
from labkit.config import make_rule, resolve
from labkit.ops.reduce import qrandn
from labkit.runner import Runner, context_ok

pytestmark = pytest.mark.gpu

FAST = make_rule(min_samples=5, max_samples=50, budget_s=0.05)


@pytest.fixture(scope="module")
def runner():
    return Runner(peak=False, kernel_time=False)


def _ok(runner, op, variant, dtype, shape, offset=0, axes=None):
    r = runner.run(resolve(op, variant, dtype, shape, offset=offset, rule=FAST, timed=False, axes=axes))
    assert r["status"] == "ok", r.get("error")
    return r


ONE_PASS = [("reduce_sum", v, d, u) for v, d in (("f32x4_1pass", "f32"), ("f16x8_1pass", "f16"), ("bf16x8_1pass", "bf16"))
            for u in (2, 4, 8)] + [("dot", "f32x4_1pass", "f32", u) for u in (1, 2, 4)]


@pytest.mark.parametrize("op,variant,dtype,unroll", ONE_PASS)
@pytest.mark.parametrize("n", [1, 13, 1 << 20, (1 << 24) + 7])
@pytest.mark.parametrize("offset", [0, 3])
def test_one_pass_at_every_unroll(runner, op, variant, dtype, unroll, n, offset):
    r = _ok(runner, op, variant, dtype, (n,), offset, {"unroll": unroll})
    assert r["path"] == "vector" or (op == "dot" and offset and r["path"] == "fallback")


def test_one_pass_ticket_survives_repeats_other_kernels_and_streams():
    gen = torch.Generator(device="cuda").manual_seed(0)
    xs = {d: qrandn(((1 << 22) + 5,), d, gen) for d in ("f32", "f16", "bf16")}
    want = {d: x.double().sum().item() for d, x in xs.items()}
    for _ in range(20):  # the repeat allocates y unzeroed; the three kernels share their stream's ticket
        for d, v in (("f32", "f32x4_1pass"), ("f16", "f16x8_1pass"), ("bf16", "bf16x8_1pass")):
            assert labkit.call("reduce_sum", v, xs[d], sync=True).item() == want[d]
    a, b = qrandn((1 << 23,), "f32", gen), qrandn((1 << 23,), "f32", gen)
    dot = (a.double() * b.double()).sum().item()
    streams = [torch.cuda.Stream() for _ in range(4)]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    outs = []
    for k in range(16):  # launches on four streams at once (their own slots, unless two hash alike)
        with torch.cuda.stream(streams[k % 4]):
            outs.append(labkit.call("dot", "f32x4_1pass", a, b))
    torch.cuda.synchronize()
    assert all(o.item() == dot for o in outs)
    assert context_ok()


@pytest.mark.parametrize("bins", [1, 16, 4096, 16384, 20000, 60000])
@pytest.mark.parametrize("axes", [{}, {"unroll": 8}, {"smem_kb": 32}, {"smem_kb": 192}])
def test_histogram_per_sm_at_its_axes(runner, bins, axes):
    r = _ok(runner, "histogram", "i32x4_sm", "i32", ((1 << 22) + 3, bins), 1, axes)
    assert r["path"] == ("fallback" if bins == 60000 else "vector")  # 60000 x 4 B: no copy fits a block


@pytest.mark.parametrize("mode", ["hot", "rotating"])
@pytest.mark.parametrize("n", [1, 5, 4100, 1 << 24])
def test_histogram_programmatic_launch_in_graphs(mode, n):
    """i32x4_sm zeroes the counts in a kernel that its programmatic launch overlaps: captured into a
    graph of back-to-back launches (the graph states), every launch's flush still waits for its own
    zeroing; the runner checks the output after timing."""
    r = Runner(peak=False, kernel_time=False).run(resolve("histogram", "i32x4_sm", "i32", (n, 4096), mode=mode, rule=FAST))
    assert r["status"] == "ok", r.get("error")
    assert r["method"] == "graph"


@pytest.mark.parametrize("variant,dtype", [("f32x4_flat", "f32"), ("f16x8_flat", "f16")])
@pytest.mark.parametrize("shape", [(3000, 70000, 64), (30000, 9000, 1000), (7, 1, 8), (50, 3000, 1000)])
def test_flat_gather_over_rounds(runner, variant, dtype, shape):
    _ok(runner, "embedding", variant, dtype, shape)
    _ok(runner, "embedding", variant, dtype, shape, offset=2)  # misaligned alike: the row kernel's edges
