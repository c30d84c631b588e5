"""GPU half of `labkit serve`: the real thing on this box's GPU 0 (dask-cuda worker, TLS, the guard
reading NVML, inline kernels built on the box before they queue), and a kernel that faults costing
its own rows and one worker restart."""
import pytest

from labkit.config import make_rule, plan, resolve
from labkit.inline_kernel import inline_variant
from labkit.records import ResultLog
from labkit.session import run

pytestmark = pytest.mark.gpu
TOKEN = "a-token-for-the-serve-gpu-test"
FAST = make_rule(budget_s=0.1, noise_target=0.02)
PACK = r"""
__global__ void my_add(const __half* a, const __half* b, __half* c, int64_t n) {
  const int64_t i = 8 * (int64_t(blockIdx.x) * blockDim.x + threadIdx.x);
  if (i + 8 <= n) {
    float4 ra = *reinterpret_cast<const float4*>(a + i), rb = *reinterpret_cast<const float4*>(b + i), rc;
    const __half2* ha = reinterpret_cast<const __half2*>(&ra);
    const __half2* hb = reinterpret_cast<const __half2*>(&rb);
    __half2* hc = reinterpret_cast<__half2*>(&rc);
    for (int k = 0; k < 4; ++k) hc[k] = __hadd2(ha[k], hb[k]);
    *reinterpret_cast<float4*>(c + i) = rc;
  } else {
    for (int64_t j = i; j < n; ++j) c[j] = __hadd(a[j], b[j]);
  }
}"""
FAULT = "__global__ void my_add(const __half* a, const __half* b, __half* c, int64_t n) { *(volatile int*)0 = 1; }"


@pytest.mark.timeout(900)
def test_serve_measures_an_inline_kernel_on_a_quiet_gpu_and_a_fault_costs_its_rows():
    pytest.importorskip("dask_cuda")
    import torch

    from labkit.remote import ServeExecutor
    from labkit.serve.server import Server
    from labkit.workers import _close_pools

    _close_pools()  # earlier tests' worker pools in this process hold the GPU too: the guard would see them
    s = Server(TOKEN, host="127.0.0.1", port=0, board_port=0, gpus="0", guard_wait_s=3)
    ex = ServeExecutor(s.local_address, TOKEN, "gpu test")
    try:
        mine = inline_variant("add", "mine", PACK, "my_add", "f16", width=8, build=False)
        rows = run(plan("add", ["f16x8_pack", mine], "f16", ["4096x4096"], rule=FAST), ResultLog(), ex, progress=False)
        by = {r["variant"]: r for r in rows}
        assert {r["status"] for r in rows} == {"ok"} and by["mine"]["serve_build_s"] > 0
        assert 0.8 < by["mine"]["time_us"] / by["f16x8_pack"]["time_us"] < 1.25  # the same access pattern
        here = 1 if torch.cuda.is_initialized() else 0  # this test process's own context is another process
        for r in rows:
            assert r["gpu_other_procs"] == here and 0 < r["gpu_temp_c"] < 100 and r["gpu_slowdown"] is not None
            assert r["gpu_check"] in ("ok", "waited") if not here else r["gpu_check"].startswith("busy: 1 other")
        boom = inline_variant("add", "boom", FAULT, "my_add", "f16", width=8, build=False)
        rows = run(plan("add", ["f16x8", boom, "f16x8_pack"], "f16", ["1024x1024"], rule=FAST) +
                   [resolve("add", boom, "f16", "1x7", timed=False)], ResultLog(), ex, progress=False)
        by = {(r["variant"], r["shape"]): r for r in rows}
        lost, again = by[("boom", "1024x1024")], by[("boom", "1x7")]
        assert lost["status"] == "error" and "illegal" in lost["error"].lower() and lost["context_lost"]
        assert again["worker"] == "faulted before" and "not run" in again["error"]
        assert {by[(n, "1024x1024")]["status"] for n in ("torch", "f16x8", "f16x8_pack")} == {"ok"}
        after = run(plan("add", ["f16x8_pack"], "f16", ["1024x1024"], rule=FAST), ResultLog(), ex, progress=False)
        assert {r["status"] for r in after} == {"ok"}  # the restarted worker measures again
    finally:
        ex.close()
        s.close()
